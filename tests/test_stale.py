"""Silence is an alert: a nightly machine that stored no results for more than 36 hours is named at
the top of the fleet summary and of the dashboard, on fabricated ASV result files."""

import datetime as dt
import json

from mlpbench.asv import dashboard as asv_dashboard
from mlpbench import fleet

NOW = dt.datetime(2026, 12, 3, 6, 0, tzinfo=dt.timezone.utc)


def _result(results, machine: str, hours_ago: float, columns: bool = True, commit: str = "c" * 40) -> None:
    """An ASV result file whose newest benchmark ended `hours_ago` before NOW (its commit is older still):
    with per-benchmark started_at and duration columns (ASV 0.6), else with ended_at dicts."""
    ended = (NOW - dt.timedelta(hours=hours_ago)).timestamp() * 1000
    folder = results / machine
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine.json").write_text(json.dumps({"machine": machine}))
    doc = {"commit_hash": commit, "date": ended - 30 * 86400e3, "params": {"machine": machine}}
    if columns:
        doc |= {"result_columns": ["result", "started_at", "duration"],
                "results": {"a": [1.0, ended - 60e3, 30.0], "b": [1.0, ended - 90e3, 90.0]}}
    else:
        doc |= {"started_at": {"a": ended - 60e3, "b": ended - 120e3}, "ended_at": {"a": ended - 30e3, "b": ended}}
    (folder / f"{commit[:8]}-existing.json").write_text(json.dumps(doc))


def test_a_machine_silent_for_40_hours_is_flagged_and_one_of_2_hours_is_not(tmp_path):
    results = tmp_path / "results" / "asv"
    _result(results, "h100", 40, columns=False)
    _result(results, "h200", 2)
    lines = fleet.stale_lines(results, ["h100", "h200", "b200"], now=NOW)
    assert lines == ["**Stale:** h100 last stored results 40 hours ago", "**Stale:** b200 has stored no results"]
    assert fleet.stored_at(results, "h200") == NOW - dt.timedelta(hours=2)


def test_the_fleet_summary_and_the_dashboard_open_on_the_notice(tmp_path, capsys, monkeypatch):
    results = tmp_path / "results" / "asv"
    _result(results, "h100", 40)
    _result(results, "h200", 2)
    (tmp_path / ".github").mkdir()
    machines = tmp_path / ".github" / "nightly-machines.json"
    machines.write_text(json.dumps([{"machine": "h100", "labels": []}, {"machine": "h200", "labels": []}]))
    assert fleet.fleet_machines(results) == ["h100", "h200"]

    monkeypatch.setattr(fleet, "stale_lines", lambda r, m, now=None, hours=36, _f=fleet.stale_lines: _f(r, m, NOW, hours))
    assert fleet.main(["stale", "--results", str(results), "--machines", str(machines)]) == 0
    assert capsys.readouterr().out.strip() == "**Stale:** h100 last stored results 40 hours ago"

    html = tmp_path / "results" / "html"
    html.mkdir()
    (html / "index.html").write_text("<html>\n  <body>\n    <nav id=\"nav\"></nav>\n  </body>\n</html>\n")
    asv_dashboard.note_stale(html, fleet.stale_lines(results, fleet.fleet_machines(results), now=NOW))
    assert asv_dashboard.stale_banner(html) and asv_dashboard.stale_banner(html)  # idempotent
    page = (html / "index.html").read_text()
    assert page.count('id="mlpbench-stale"') == 1
    assert page.index("<strong>Stale:</strong> h100 last stored results 40 hours ago") < page.index('<nav id="nav"')
    asv_dashboard.note_stale(html, [])
    assert not asv_dashboard.stale_banner(html) and "mlpbench-stale" not in (html / "index.html").read_text()
