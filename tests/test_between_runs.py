"""Between-run noise: measured from A/A runs, and the gate's threshold drawn from it."""

import json
import math

import pytest

from mlpbench import between_runs, gate
from tests.test_gate import A, B, _check, _write

CASE = "gelu_mul/ours/bf16/t8192-h3072"


def _runs(medians, fingerprints=None):
    fingerprints = fingerprints or [7] * len(medians)
    return [{CASE: {"device_time_s": m, "codegen_fingerprint": f}} for m, f in zip(medians, fingerprints)]


def test_allowance_is_three_standard_deviations_of_the_log_median():
    (entry,) = between_runs.measure(_runs([100e-6, 104e-6, 98e-6, 101e-6])).values()
    logs = [math.log(m) for m in (100e-6, 104e-6, 98e-6, 101e-6)]
    mean = sum(logs) / 4
    sd = (sum((v - mean) ** 2 for v in logs) / 3) ** 0.5
    assert entry["log_sd"] == pytest.approx(sd) and entry["allowance"] == pytest.approx(3 * sd)
    assert entry["same_code_runs"] == 4


def test_only_runs_with_the_most_common_generated_code_count():
    # The 150 µs run picked another configuration: a codegen change, not noise.
    (entry,) = between_runs.measure(_runs([100e-6, 101e-6, 150e-6, 100e-6], [1, 1, 2, 1])).values()
    assert entry["same_code_runs"] == 3 and entry["medians_s"] == [100e-6, 101e-6, 100e-6]
    assert entry["allowance"] < 0.03


def test_too_few_same_code_runs_give_no_allowance():
    (entry,) = between_runs.measure(_runs([100e-6, 110e-6, 150e-6], [1, 1, 2])).values()
    assert "allowance" not in entry and entry["same_code_runs"] == 2


@pytest.fixture
def asv(tmp_path):
    """results/asv with a 5% slower head (per-process samples tight: the within-run rule flags it)."""
    _write(tmp_path / "asv", A, 1, [36.5e-6, 220e-6], seed=1)
    _write(tmp_path / "asv", B, 2, [36.5e-6 * 1.05, 220e-6], seed=2)
    return tmp_path


def _between(root, allowance):
    between_runs.write(between_runs.path_for(root, "h200"), "h200", ["aa-1.json"],
                       {CASE: {"same_code_runs": 5, "runs": 5, "medians_s": [], "log_sd": allowance / 3,
                               "allowance": allowance}})


def test_a_move_within_the_between_run_noise_is_not_flagged(asv):
    assert _check("--results", str(asv / "asv"), "--base", "aaaa", "--head", "bbbb").returncode == 1
    _between(asv, 0.06)
    proc = _check("--results", str(asv / "asv"), "--base", "aaaa", "--head", "bbbb", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (v,) = [v for v in json.loads(proc.stdout) if v["param"] == CASE and v["benchmark"].endswith("device_time")]
    assert v["verdict"] == "unchanged" and v["threshold"] == pytest.approx(0.06)
    assert v["threshold_from"] == "between-run noise"


def test_a_move_past_the_between_run_noise_is_still_a_regression(asv):
    _between(asv, 0.03)
    proc = _check("--results", str(asv / "asv"), "--base", "aaaa", "--head", "bbbb")
    assert proc.returncode == 1
    line = next(l for l in proc.stdout.splitlines() if CASE in l and "regression" in l)
    assert "3.0% (between-run noise)" in line


def test_a_given_threshold_overrides_the_between_run_noise(asv):
    _between(asv, 0.06)
    assert _check("--results", str(asv / "asv"), "--base", "aaaa", "--head", "bbbb", "--threshold", "2").returncode == 1


def test_an_unreadable_between_runs_file_is_bad_input_naming_it(asv):
    path = between_runs.path_for(asv, "h200")
    path.parent.mkdir(parents=True)
    path.write_text("{ cut")
    proc = _check("--results", str(asv / "asv"), "--base", "aaaa", "--head", "bbbb")
    assert proc.returncode == 2 and "between-runs/h200.json" in proc.stderr and "Traceback" not in proc.stderr


def test_only_device_time_takes_the_allowance():
    point = gate.Point("h200", A, 1, "x.GeluMulDevice.track_peak_memory", CASE, "v", 1.0, None)
    assert gate.allowance(point, {"h200": {CASE: 0.5}}) is None
    point = gate.Point("h200", A, 1, "x.GeluMulDevice.track_device_time", CASE, "v", 1.0, None)
    assert gate.allowance(point, {"h200": {CASE: 0.5}}) == 0.5
    assert gate.allowance(point, {"a100": {CASE: 0.5}}) is None


def test_history_judges_each_step_as_compare_does(asv):
    # `check --last N` reads the same between-run noise as `check --base --head`
    assert _check("--results", str(asv / "asv"), "--last", "2").returncode == 1
    _between(asv, 0.06)
    proc = _check("--results", str(asv / "asv"), "--last", "2")
    assert proc.returncode == 0 and "no regression over the last 2 commits" in proc.stdout, proc.stdout + proc.stderr
