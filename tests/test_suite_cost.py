"""The suite's own cost: each record's wall time split into phases, each run's total, and the report
section that ranks them."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from report_fixtures import CPU, OLD, NEW, build, costed_run, record, write_run

from mlpbench import report, results_store
from mlpbench.record import NAMES

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("phase_check_s", "phase_device_s", "phase_host_s", "phase_profile_s")
SLACK_S = 1e-3  # the phases are timed inside the case's wall time, each by its own clock reads


def _check_phases(info: dict) -> None:
    assert info["wall_s"] > 0
    assert all(info[k] >= 0 for k in PHASES), info
    assert sum(info[k] for k in PHASES) <= info["wall_s"] + SLACK_S, info
    assert info["phase_check_s"] > 0 and info["phase_host_s"] > 0  # both ran on a CPU


def test_phase_fields_are_record_fields():
    assert {"wall_s", *PHASES} <= NAMES


def test_a_run_records_each_cases_phases_and_its_own_wall_time(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "run", "--tier", "quick", "--op", "gelu_mul", "--variant", "eager",
         "--dtype", "fp32", "--results", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = [f for f in tmp_path.glob("*/*-quick-*.json") if not f.name.endswith(".outcomes.json")]
    doc = json.loads(path.read_text())
    (bench,) = doc["benchmarks"]
    info = bench["extra_info"]
    _check_phases(info)
    run = doc["mlpbench_run"]
    assert run["wall_s"] >= info["wall_s"]
    (part,) = run["parts"]
    assert part["part"] == "op gelu_mul" and info["wall_s"] <= part["wall_s"] <= run["wall_s"]
    # the process's time outside its cases: its start, the memory released after each case, the ceilings
    assert 0 < part["start_s"] < part["wall_s"] and 0 < part["release_s"] < part["wall_s"]
    assert part["ceilings_s"] >= 0 and "mlpbench_process" not in doc
    # in this process (one op): no interpreter of its own to time, its exit timed from the file written
    assert "boot_s" not in part and 0 <= part["end_s"] < part["wall_s"] and "written_at" not in part
    assert part["waited_s"] == 0  # nothing made ahead on a CPU


def test_asv_cache_entries_carry_the_same_phase_fields():
    from mlpbench.asv import measure as asv_measure

    entry = asv_measure.measure_case("gelu_mul/eager/fp32/t333-h3000")
    _check_phases(entry)


# --- the report --------------------------------------------------------------------------------

A, B, C = "gelu_mul/eager/bf16/t1-h1", "gelu_mul/ours/bf16/t1-h1", "gelu_mul/compiled/bf16/t1-h1"


@pytest.fixture
def costed(tmp_path):
    results = tmp_path / "results"
    # a run from before the fields existed: left out, silently
    write_run(results / "pytest" / "box" / "20261130T000000Z-standard-0.json", "box", "2026-11-30T00:00:00+00:00",
              [record("gelu_mul", "eager", "bf16", "t9-h9", {"t": 9, "h": 9}, device_us=5.0)])
    costed_run(results, "box", OLD, "2026-12-01T00:00:00+00:00",
               {A: (10.0, 8.0, 1.0, 0.5, 0.3), B: (30.0, 2.0, 20.0, 5.0, 2.0), C: (5.0, 4.0, 0.5, 0.2, 0.1)},
               run_wall_s=100.0, ahead_s=20.0)
    # newer: A became the slowest case, C the fastest; this run's file has no total
    costed_run(results, "box", NEW, "2026-12-02T00:00:00+00:00", {A: (40.0, 39.0, 0.5, 0.3, 0.1),
                                                                   C: (1.0, 0.5, 0.2, 0.2, 0.0)})
    costed_run(results, CPU, OLD, "2026-12-01T00:00:00+00:00", {A: (3.0, 1.0, 0.0, 1.5, 0.0)}, run_wall_s=9.0)
    return results


def test_the_slowest_cases_come_first_each_from_its_newest_record(costed):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = report.load(costed)
        table = report.slowest_cases_table(data)
    rows = [(r[0], r[1]) for r in table.rows]
    assert rows == [("box", A), ("box", B), ("box", C), (CPU, A)]
    first = dict(zip(table.headers, table.rows[0]))
    assert first["wall time"] == "40.0 s" and first["check & compile"] == "39.0 s (98%)"
    assert first["longest phase"] == "check & compile" and first["run"] == NEW
    second = dict(zip(table.headers, table.rows[1]))
    assert second["longest phase"] == "device timing" and second["run"] == OLD
    assert [r[1] for r in report.slowest_cases_table(data, n=2).rows] == [A, B, A]


def test_each_run_states_its_total_and_its_phases(costed):
    data = report.load(costed)
    table = report.run_cost_table(data)
    rows = {(r[0], r[1]): dict(zip(table.headers, r)) for r in table.rows}
    assert set(rows) == {("box", OLD), ("box", NEW), (CPU, OLD)}  # the run without the fields is left out
    old = rows[("box", OLD)]
    assert old["wall time"] == "100.0 s" and old["cases"] == "3"
    assert old["check & compile"] == "14.0 s (14%)" and old["device timing"] == "21.5 s (22%)"
    assert old["compiles made ahead"] == "20.0 s (20%)" and old["outside the cases"] == "35.0 s (35%)"
    new = rows[("box", NEW)]
    assert new["wall time"] == "—" and new["check & compile"] == "39.5 s" and new["outside the cases"] == "—"
    assert new["compiles made ahead"] == "—"


def test_the_section_is_in_the_report_and_left_out_without_the_fields(costed, tmp_path):
    titles = [t for t, _ in report.sections(costed).sections]
    assert "Where the suite's time goes" in titles
    assert titles.index("Where the suite's time goes") < titles.index("pytest-benchmark runs")
    md = report.markdown(report.sections(report.load(costed).of("box"), full=False), "box")
    assert "## Where the suite's time goes" in md and A in md
    older = build(tmp_path / "older")
    assert "Where the suite's time goes" not in [t for t, _ in report.sections(older).sections]


def test_each_process_states_its_time_outside_its_cases(costed):
    path = costed / "pytest" / "box" / OLD
    doc = json.loads(path.read_text())
    doc["mlpbench_run"]["parts"][-1] |= {"boot_s": 4.0, "start_s": 30.0, "waited_s": 25.0, "release_s": 1.5,
                                         "ceilings_s": 2.0, "end_s": 3.0}
    path.write_text(json.dumps(doc))
    table = report.process_cost_table(report.load(costed))
    (row,) = [dict(zip(table.headers, r)) for r in table.rows]  # the precompile part and older runs: left out
    assert row["run"] == OLD and row["process"] == "op gelu_mul" and row["wall time"] == "80.0 s"
    assert row["interpreter and imports"] == "4.0 s" and row["of it, waiting for compiles"] == "25.0 s"
    assert row["exit"] == "3.0 s" and table.sources == [f"results/pytest/box/{OLD}"]


def test_each_night_states_its_wall_time_and_steps(costed):
    nights = costed / "nightly"
    nights.mkdir()
    (nights / "box.json").write_text(json.dumps([
        {"commit": "a" * 40, "date": "2026-12-01T02:00:00+00:00", "wall_s": 400.0, "bench": "b"},
        {"commit": "b" * 40, "date": "2026-12-02T02:00:00+00:00", "wall_s": 380.5, "bench": "b",
         "steps": {"record": 350.0, "publish": 20.0}}]))
    (nights / "other.json").write_text("not json")  # unreadable: no nights, no failure
    data = report.load(costed)
    table = report.nightly_cost_table(data)
    assert [r[:4] for r in table.rows] == [["box", "aaaaaaaa", "2026-12-01T02:00:00+00:00", "400.0 s"],
                                          ["box", "bbbbbbbb", "2026-12-02T02:00:00+00:00", "380.5 s"]]
    assert table.rows[0][4] == "—" and table.rows[1][4] == "record 350.0 s, publish 20.0 s"
    assert table.sources == ["results/nightly/box.json"]
    assert report.nightly_cost_table(data.of(CPU)).rows == []
    md = report.markdown(report.sections(data.of("box"), full=False), "box")
    assert "### The nightly" in md and "380.5 s" in md


# --- the nightly's history travels with the results --------------------------------------------

def test_store_keeps_this_machines_nightly_history_only(tmp_path):
    from test_results_store import _clone, _on_branch, _origin, _write_result

    origin = _origin(tmp_path)
    clone = _clone(origin, tmp_path / "clone")
    _write_result(clone, "h200", "aaaaaaaa")
    nights = clone / "results" / "nightly"
    nights.mkdir(parents=True)
    (nights / "h200.json").write_text(json.dumps([{"commit": "a" * 40, "date": "2026-12-01", "wall_s": 10.0}]))
    (nights / "h100.json").write_text("[]")
    results_store.store(clone, "h200", "origin", backoff_s=0)
    on_branch = _on_branch(origin)
    assert "results/nightly/h200.json" in on_branch and "results/nightly/h100.json" not in on_branch


@pytest.mark.slow
def test_processes_in_turn_start_at_once_and_measure_one_after_the_other(tmp_path, capfd):
    """Two pytest processes of one run: both start at once, the second waits for the first to exit before
    its first case, and its output is printed after the first's."""
    from mlpbench import run_suite

    argv = [str(ROOT / "benchmarks"), "-p", "no:cacheprovider", f"--rootdir={ROOT}", f"-c={ROOT / 'pytest.ini'}",
            "--tier=quick", "--variant=eager", "--dtype=fp32", "--benchmark-max-time=0.01"]
    walls: list[dict] = []
    json_path = tmp_path / "run.json"
    # the first measures for seconds (host samples of 3 s), longer than the second takes to boot and collect
    rc = run_suite._run_parts(argv, [("first", ["-v", "--op=gelu_mul", "--benchmark-max-time=3"], {}),
                                     ("second", ["-v", "--op=silu_mul"], {})],
                              json_path, tmp_path / "run.outcomes.json", walls, together=False)
    out = capfd.readouterr().out
    assert rc == 0, out[-3000:]
    first, second = walls
    # started at once: the second's wall time, from its start to its exit, holds the first's
    assert second["wall_s"] > first["wall_s"]
    # the second was ready before the first was done, and waited for it
    assert first["turn_s"] == 0 and second["turn_s"] > 1.0, walls
    assert "waiting for the pytest process before this one to finish" in out
    # the second's cases ran after the first had exited: all the first printed comes before the second's title
    assert out.index("mlpbench: second") > out.rindex("test_case[gelu_mul/"), out[-3000:]
    assert "test_case[silu_mul/" in out[out.index("mlpbench: second"):]
    cases = {b["extra_info"]["case"].split("/")[0] for b in json.loads(json_path.read_text())["benchmarks"]}
    assert cases == {"gelu_mul", "silu_mul"}


def test_a_process_waits_for_its_turn(tmp_path, monkeypatch):
    import threading

    from mlpbench.compile import precompile

    turn = tmp_path / "turn1"
    threading.Timer(0.3, turn.touch).start()
    assert precompile.wait_for_file(str(turn)) >= 0.25
    assert precompile.wait_for_file(str(turn)) == 0.0  # there already
    assert precompile.wait_for_file(str(tmp_path / "gone" / "turn2")) == 0.0  # its run has ended
