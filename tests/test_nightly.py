"""The nightly script end to end on a CPU: a temporary repository, two commits, one slowed on purpose;
and its wall time against the previous night's, on fabricated history."""

import json
import os
import subprocess
import sys

import pytest
from project_copy import git, project_repo

CASE = "gelu_mul_train/eager/fp32/t333-h3000"
# One benchmark of the quick family, through ASV's own --bench: its setup_cache measures the quick
# GeLU·mul training cases (one compile), which keeps the test to seconds per run.
BENCH = r"^quick\.GeluMulTrainHost\.track_host_time\('eager', 'fp32'"
# Appended to the repository's ASV benchmarks in the second commit: the eager case built in the
# measuring process does its work five times (the others, measured in the same setup_cache, stay as
# they were: slowing them too only made the test slower). ASV imports benchmarks/ from the measured
# checkout, so the change is measured.
SLOWDOWN = '''
from mlpbench import workloads as _w
_build = _w.build
def _slow(case, device, **options):
    wl = _build(case, device, **options)
    if case.variant != "eager":
        return wl
    fn = wl.fn
    def five_times(*inputs):
        for _ in range(4):
            fn(*inputs)
        return fn(*inputs)
    wl.fn = five_times
    return wl
_w.build = _slow
'''


def _nightly(repo, home, *extra):
    env = os.environ | {"HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "nightly", "--repo", str(repo), "--bench", BENCH, "--machine", "cibox", "--threshold", "50", "--no-publish",
         "--summary", str(repo / "summary.md"), *extra],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900,
    )


@pytest.mark.slow
@pytest.mark.parametrize("slow_second", [True, False], ids=["slowed", "unchanged"])
def test_nightly_flags_the_slowed_commit_and_only_it(tmp_path, slow_second):
    repo, home = project_repo(tmp_path), tmp_path / "home"
    home.mkdir()

    first = _nightly(repo, home)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "First commit recorded" in (repo / "summary.md").read_text()

    if slow_second:
        with open(repo / "benchmarks" / "quick.py", "a") as fh:
            fh.write(SLOWDOWN)
    else:
        (repo / "NOTES").write_text("a commit that changes nothing measured\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")

    # The slowdown is planted in ASV's benchmark module, which the same-box re-measurement (pytest's
    # path) never runs: this checks the gate's verdict alone (tests/test_confirm.py checks confirmation).
    # Unchanged, the confirmation is on: nothing flagged, nothing measured again, no step named.
    second = _nightly(repo, home, *(["--no-confirm"] if slow_second else []))
    summary = (repo / "summary.md").read_text()
    if slow_second:
        assert second.returncode == 1, second.stdout[-3000:]
        assert "### Regressions" in summary and CASE in summary.split("### Regressions")[1]
    else:
        assert second.returncode == 0, second.stdout[-3000:]
        assert "0 regressed" in summary and "confirmation" not in summary
    assert "[nightly] record: done" in second.stdout


# --- the night's wall time against the previous night's (no ASV run: fabricated history) ----------

BENCH_RE = r"^quick\."


def _night(wall_s: float, commit: str = "a" * 40, bench: str = BENCH_RE) -> dict:
    return {"commit": commit, "date": "2026-12-01T02:17:00+00:00", "wall_s": wall_s, "bench": bench}


@pytest.mark.parametrize("growth, warned", [(0.25, True), (0.15, False)])
def test_a_night_more_than_20_percent_slower_than_the_previous_is_warned_of(growth, warned):
    from mlpbench import nightly

    history = [_night(3000.0, "0" * 40), _night(1000.0)]  # the previous night is the last
    lines = nightly.wall_time_lines(1000.0 * (1 + growth), history, BENCH_RE, {"record": 900.0})
    assert lines[0].startswith("Wall time: ")
    assert any(line.startswith("**Warning:**") for line in lines) == warned, lines
    if warned:
        assert "25% longer" in lines[-1] and "aaaaaaaa" in lines[-1]


def test_the_confirmation_is_named_apart_from_the_steps_the_total_sums():
    from mlpbench import nightly

    confirmed = nightly.wall_time_lines(10.0, [], BENCH_RE, {"record": 9.0, "confirm": 68.0, "gate": 0.5})
    assert confirmed[0] == "Wall time: 10.0 s (record 9.0 s, gate 0.5 s); then the same-box confirmation, 1 min 8 s, " \
        "not counted."
    assert nightly.wall_time_lines(10.0, [], BENCH_RE, {"record": 9.0})[0] == "Wall time: 10.0 s (record 9.0 s)."


def test_only_a_night_of_the_same_benchmarks_is_compared():
    from mlpbench import nightly

    lines = nightly.wall_time_lines(1100.0, [_night(1000.0), _night(100.0, bench=r"^standard\.")], BENCH_RE, {})
    assert not any(line.startswith("**Warning:**") for line in lines), lines
    lines = nightly.wall_time_lines(2000.0, [_night(1000.0, bench=r"^standard\.")], BENCH_RE, {})
    assert "No earlier night" in lines[-1]


def test_the_nightly_states_its_wall_time_and_keeps_it_per_machine(tmp_path, monkeypatch):
    """nightly.run with ASV and the gate stood in for: the summary states the night's wall time, warns
    against a much faster previous night, and appends this night to results/nightly/<machine>.json."""
    import argparse

    from mlpbench import nightly
    from mlpbench.results import Point

    head = "c" * 40
    monkeypatch.setattr(nightly.asv_run, "command", lambda args: (["asv", "run", "--bench", BENCH_RE], head, "cibox"))
    monkeypatch.setattr(nightly, "_step", lambda name, cmd, cwd: True)
    monkeypatch.setattr(nightly.gate, "load", lambda folder: [Point("cibox", head, 1, "quick.X.track_host_time", "p",
                                                                    "v1", 1.0, None)])
    kept = nightly.history_path(tmp_path, "cibox")
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps([_night(1e-9)]))
    args = argparse.Namespace(repo=tmp_path, summary=tmp_path / "summary.md", no_publish=True, threshold=None)
    assert nightly.run(args) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "Wall time: " in summary and "\n**Warning:** this night took" in summary
    nights = json.loads(kept.read_text())
    assert [n["commit"] for n in nights] == ["a" * 40, head]
    assert nights[-1]["bench"] == BENCH_RE and nights[-1]["wall_s"] >= 0 and nights[-1]["date"]


def test_an_unreadable_history_costs_the_comparison_only(tmp_path):
    from mlpbench import results

    path = tmp_path / "cibox.json"
    path.write_text("{not json")
    with pytest.warns(UserWarning, match="not a readable nightly history"):
        assert results.nightly_history(path) == []
    assert results.nightly_history(tmp_path / "missing.json") == []
