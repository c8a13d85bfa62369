"""Make an ``asv publish`` dashboard open on data, with readable graphs.

Applied by the publish plugin (mlpbench/asv/offline.py) to the freshly built folder, before it
replaces the published one:

- benchmarks with no data point on any machine leave index.json, so the grid and the sidebar list
  only benchmarks that have graphs (the grid opens on a family with data);
- mlpbench/static/asv_dashboard.js is copied in and loaded after ASV's scripts: a graph opened from
  a bare link (grid tile, sidebar, typed URL) shows bf16 (where the benchmark has bf16 data, else the
  first dtype that has some: index.json's `mlpbench_data`) on a y-axis zoomed to the data, and the
  legend names only what differs between the drawn series;
- a banner at the top of index.html names the fleet's stale machines (mlpbench/fleet.py), which the
  Regressions publisher noted in STALE while ASV built the folder;
- where the results hold pytest runs of several GPU types, a panel on index.html says how many cases
  are not portable between them (fleet.portability) and links portability.html, the whole table,
  both written by the Regressions publisher (note_portability).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SCRIPT = "asv_dashboard.js"
STATIC = Path(__file__).parent.parent / "static"  # package data (pyproject.toml)
STALE = "mlpbench-stale.json"  # the stale machines' lines, noted during `asv publish` (note_stale)
BANNER_ID = "mlpbench-stale"
PORTABILITY = "portability.html"  # the cross-GPU table, beside index.html (note_portability)
PORTABILITY_LINE = "mlpbench-portability.json"
PANEL_ID = "mlpbench-portability"
# ASV's last script tag: ours goes after it, so that ASV's pages are registered first.
_ANCHOR = re.compile(r'(<script\b[^>]*\bsrc="regressions\.js"[^>]*>\s*</script>)')


class DashboardError(RuntimeError):
    """index.html is not the page this module knows how to extend."""


def _sanitize(name: str) -> str:
    from asv.util import sanitize_filename

    return sanitize_filename(name)


def has_data(html_dir: Path, name: str) -> bool:
    """True when the benchmark's summary graph holds a value (ASV writes one only for benchmarks with results)."""
    path = Path(html_dir) / "graphs" / "summary" / f"{_sanitize(name)}.json"
    if not path.is_file():
        return False
    return any(y is not None for _, y in json.loads(path.read_text()))


def drop_empty_benchmarks(html_dir: Path) -> list[str]:
    """Remove benchmarks without data from index.json; returns their names."""
    path = Path(html_dir) / "index.json"
    index = json.loads(path.read_text())
    empty = [n for n in index["benchmarks"] if not has_data(html_dir, n)]
    if len(empty) == len(index["benchmarks"]):
        return []  # nothing measured yet: an empty grid would hide what the suite holds
    for name in empty:
        del index["benchmarks"][name]
    from asv.util import write_json

    write_json(path, index, compact=True)
    return empty


def inject_script(html_dir: Path) -> None:
    """Copy the dashboard script into html_dir and load it from index.html. Idempotent."""
    html_dir = Path(html_dir)
    (html_dir / SCRIPT).write_bytes((STATIC / SCRIPT).read_bytes())
    page = html_dir / "index.html"
    text = page.read_text(encoding="utf-8")
    if f'src="{SCRIPT}"' in text:
        return
    new, n = _ANCHOR.subn(rf'\1\n    <script type="text/javascript" src="{SCRIPT}"></script>', text, count=1)
    if n != 1:
        raise DashboardError(f"{page}: no regressions.js script tag to load {SCRIPT} after (unknown asv version?)")
    page.write_text(new, encoding="utf-8")


def note_values_with_data(html_dir: Path) -> None:
    """Give each parametrised benchmark of index.json `mlpbench_data`: per parameter, the values that
    some graph has a point for. The script opens a graph on its preferred dtype only where that
    dtype has data (a CPU-sized shape measured in fp32 alone would draw an empty plot)."""
    import itertools

    html_dir = Path(html_dir)
    path = html_dir / "index.json"
    index = json.loads(path.read_text())
    for name, bm in index["benchmarks"].items():
        if not bm.get("params"):
            continue
        combos = list(itertools.product(*bm["params"]))
        seen: set[int] = set()
        for graph in (html_dir / "graphs").rglob(f"{_sanitize(name)}.json"):
            if "summary" in graph.relative_to(html_dir).parts:
                continue
            for _, values in json.loads(graph.read_text()):
                if isinstance(values, list):
                    seen.update(k for k, v in enumerate(values) if v is not None)
        bm["mlpbench_data"] = {pname: sorted({combos[k][i] for k in seen if k < len(combos)}, key=bm["params"][i].index)
                               for i, pname in enumerate(bm["param_names"])}
    from asv.util import write_json

    write_json(path, index, compact=True)


def note_stale(html_dir: Path, lines: list[str]) -> None:
    """Keep the stale machines' lines ("**Stale:** ...") in html_dir for stale_banner."""
    (Path(html_dir) / STALE).write_text(json.dumps(lines))


def stale_banner(html_dir: Path, lines: list[str] | None = None) -> bool:
    """Put the stale lines (default: those noted in STALE) in a banner at the top of index.html, below
    ASV's navigation bar; returns whether there were any. Idempotent."""
    import html

    html_dir = Path(html_dir)
    if lines is None:
        noted = html_dir / STALE
        lines = json.loads(noted.read_text()) if noted.is_file() else []
    page = html_dir / "index.html"
    text = re.sub(rf'\s*<div id="{BANNER_ID}".*?</div>', "", page.read_text(encoding="utf-8"), flags=re.S)
    if lines:
        items = "<br>".join(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(line)) for line in lines)
        # fixed just below ASV's fixed navbar (its views are placed absolutely at top: 55px), over them
        banner = (f'<div id="{BANNER_ID}" title="click to hide" onclick="this.remove()" style="position:fixed;'
                  f'top:55px;left:0;right:0;z-index:2000;background:#f2dede;color:#a94442;padding:8px 16px;'
                  f'border-bottom:1px solid #ebccd1">{items}</div>')
        text = _after_body(text, banner, page, "the stale machines' banner")
    page.write_text(text, encoding="utf-8")
    return bool(lines)


def _after_body(text: str, block: str, page: Path, what: str) -> str:
    """`text` with `block` right after its <body> tag; DashboardError naming `what` where there is none."""
    text, n = re.subn(r"(<body\b[^>]*>)", lambda m: m.group(1) + "\n    " + block, text, count=1)
    if n != 1:
        raise DashboardError(f"{page}: no <body> tag to put {what} in")
    return text


def note_portability(html_dir: Path, results_root: Path) -> str:
    """Write portability.html (the cross-GPU table of the results under `results_root`) and its summary
    line into html_dir, for portability_panel; returns the line, "" where fewer than two GPU types
    have pytest runs (nothing is written then)."""
    import html

    from .. import fleet, report, tables
    from ..judging import gate

    html_dir = Path(html_dir)
    for stale in (html_dir / PORTABILITY, html_dir / PORTABILITY_LINE):
        stale.unlink(missing_ok=True)
    try:
        data = report.load(Path(results_root))
        frame = fleet.portability_of(data)
    except (OSError, ValueError) as exc:  # the dashboard still publishes; the reason is printed, not lost
        print(f"mlpbench: no cross-GPU panel on the dashboard: {exc}", file=sys.stderr)
        return ""
    if frame.empty:
        return ""
    line = fleet.portability_summary(frame)
    table = fleet.portability_table(frame)
    # the pytest runs its figures come from, each from a dirty tree marked as the report marks it
    files = f"<p>{html.escape(tables.from_line(table.sources, data.dirty, str))}</p>" if table.sources else ""
    (html_dir / PORTABILITY).write_text(
        "<!doctype html><meta charset='utf-8'><title>Across machines</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
        f"<h1>Across machines: {html.escape(fleet.PORTABILITY_TITLE)}</h1><p>{html.escape(line)}</p>"
        f"<p>{html.escape(fleet.PORTABILITY_NOTE.format(floor=gate.FLOOR))}</p>"
        f"{table.html()}{files}<p><a href='index.html'>back to the dashboard</a></p>",
        encoding="utf-8")
    (html_dir / PORTABILITY_LINE).write_text(json.dumps(line))
    return line


def portability_panel(html_dir: Path) -> bool:
    """A panel at the bottom right of index.html with the portability line noted in html_dir and a
    link to portability.html; returns whether there was one. Idempotent."""
    import html

    html_dir = Path(html_dir)
    page = html_dir / "index.html"
    text = re.sub(rf'\s*<div id="{PANEL_ID}".*?</div>', "", page.read_text(encoding="utf-8"), flags=re.S)
    noted = html_dir / PORTABILITY_LINE
    line = json.loads(noted.read_text()) if noted.is_file() else ""
    if line:
        panel = (f'<div id="{PANEL_ID}" style="position:fixed;bottom:8px;right:8px;z-index:2000;max-width:40em;'
                 f'background:#d9edf7;color:#31708f;padding:8px 16px;border:1px solid #bce8f1">'
                 f'<strong>Across machines.</strong> {html.escape(line)} '
                 f'<a href="{PORTABILITY}">The cross-GPU table</a></div>')
        text = _after_body(text, panel, page, "the portability panel")
    page.write_text(text, encoding="utf-8")
    return bool(line)


def finish(html_dir: Path) -> list[str]:
    """All of the above; returns the benchmarks dropped from index.json."""
    dropped = drop_empty_benchmarks(html_dir)
    note_values_with_data(html_dir)
    inject_script(html_dir)
    stale_banner(html_dir)
    portability_panel(html_dir)
    return dropped
