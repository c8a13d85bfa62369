// mlpbench report: click a column header to sort by it; numbers sort as numbers (data-sort).
document.querySelectorAll('table.sortable th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var table = th.closest('table'), body = table.tBodies[0], asc = !th.classList.contains('asc');
    table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc')});
    th.classList.add(asc ? 'asc' : 'desc');
    var key = function(tr){var td = tr.cells[col]; var n = td.getAttribute('data-sort');
      return n === null ? td.textContent : parseFloat(n)};
    Array.from(body.rows).sort(function(a, b){
      var x = key(a), y = key(b), c = (typeof x === 'number' && typeof y === 'number') ? x - y
        : String(x).localeCompare(String(y));
      return asc ? c : -c}).forEach(function(tr){body.appendChild(tr)});
  });
});
