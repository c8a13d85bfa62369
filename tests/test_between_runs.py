"""Between-run noise: measured from A/A runs, and the gate's threshold drawn from it."""

import json
import math

import pytest

from mlpbench.judging import between_runs, gate
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


# --- every variant: cases measured in some runs only, and cases inheriting a measured neighbour's figure

def test_a_case_measured_in_some_runs_only_is_measured_from_those():
    runs = _runs([100e-6, 104e-6, 98e-6])
    runs[1] = {}  # the second run did not measure it
    (entry,) = between_runs.measure(runs).values()
    assert entry["runs"] == 2 and "allowance" not in entry  # two runs: no spread
    runs = _runs([100e-6, 104e-6, 98e-6, 101e-6])
    runs[1] = {}
    (entry,) = between_runs.measure(runs).values()
    assert entry["runs"] == 3 and entry["medians_s"] == [100e-6, 98e-6, 101e-6] and "allowance" in entry


def _measured(allowances: dict[str, float]) -> dict:
    return {c: {"allowance": a, between_runs.HOST_ENTRY: {"allowance": 10 * a}} for c, a in allowances.items()}


def test_an_unmeasured_case_inherits_the_nearest_measured_case_of_its_kind():
    measured = _measured({"gelu_mul/ours/bf16/t1-h16384": 0.01, "gelu_mul/ours/bf16/t8192-h14336": 0.02,
                          "gelu_mul/ours/fp16/t4096-h16384": 0.05, "gelu_mul/eager/bf16/t4096-h16384": 0.07})
    reference = {"gelu_mul/ours/bf16/t1-h16384": 1.3e-6, "gelu_mul/ours/bf16/t8192-h14336": 161e-6,
                 "gelu_mul/ours/fp16/t4096-h16384": 93e-6, "gelu_mul/eager/bf16/t4096-h16384": 168e-6,
                 "gelu_mul/ours/bf16/t4096-h16384": 93e-6, "gelu_mul/ours/bf16/t333-h3000": 3.1e-6}
    got = between_runs.inherit(measured, reference)
    assert set(got) == {"gelu_mul/ours/bf16/t4096-h16384", "gelu_mul/ours/bf16/t333-h3000"}
    # same op, variant and dtype first (not fp16's case of the same shape, nor eager's), nearest in time
    big, small = got["gelu_mul/ours/bf16/t4096-h16384"], got["gelu_mul/ours/bf16/t333-h3000"]
    assert big == {"inherits": "gelu_mul/ours/bf16/t8192-h14336", "allowance": 0.02,
                   between_runs.HOST_ENTRY: {"inherits": "gelu_mul/ours/bf16/t8192-h14336", "allowance": 0.2}}
    assert small["inherits"] == "gelu_mul/ours/bf16/t1-h16384"


def test_without_its_dtype_measured_a_case_inherits_its_op_and_variant_then_its_variant():
    measured = _measured({"mlp/ours/bf16/t1-d768-h3072": 0.03, "swiglu_mlp/liger/fp32/t333-d768-h3000": 0.04})
    reference = {"mlp/ours/bf16/t1-d768-h3072": 15e-6, "swiglu_mlp/liger/fp32/t333-d768-h3000": 160e-6,
                 "mlp/ours/fp32/t8192-d768-h3072": 2.5e-3, "mlp/liger/fp32/t8192-d768-h3072": 2.5e-3,
                 "mlp/maxautotune/bf16/t1-d768-h3072": 15e-6}
    got = between_runs.inherit(measured, reference)
    assert got["mlp/ours/fp32/t8192-d768-h3072"]["inherits"] == "mlp/ours/bf16/t1-d768-h3072"
    assert got["mlp/liger/fp32/t8192-d768-h3072"]["inherits"] == "swiglu_mlp/liger/fp32/t333-d768-h3000"
    assert "mlp/maxautotune/bf16/t1-d768-h3072" not in got  # no measured case of that variant: nothing to inherit


def test_inherited_entries_are_what_the_gate_loads(tmp_path):
    measured = _measured({"gelu_mul/ours/bf16/t1-h16384": 0.01})
    reference = {"gelu_mul/ours/bf16/t1-h16384": 1.3e-6, "gelu_mul/ours/bf16/t333-h3000": 3.1e-6}
    cases = measured | between_runs.inherit(measured, reference)
    path = between_runs.path_for(tmp_path, "h200")
    between_runs.write(path, "h200", ["aa-1.json"], cases, reference="ref.json")
    assert between_runs.load(tmp_path, "h200") == {"gelu_mul/ours/bf16/t1-h16384": 0.01,
                                                   "gelu_mul/ours/bf16/t333-h3000": 0.01}
    assert between_runs.load(tmp_path, "h200", between_runs.HOST)["gelu_mul/ours/bf16/t333-h3000"] == pytest.approx(0.1)
    assert json.loads(path.read_text())["reference"] == "ref.json"


def test_a_format_2_file_still_loads(tmp_path):
    path = between_runs.path_for(tmp_path, "h200")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 2, "cases": {CASE: {
        "allowance": 0.02, between_runs.HOST_ENTRY: {"runs": 4, "box_id": None, "allowance": 0.4}}}}))
    assert between_runs.load(tmp_path, "h200") == {CASE: 0.02}
    assert between_runs.load(tmp_path, "h200", between_runs.HOST) == {CASE: 0.4}


def test_inheriting_prefers_the_op_and_variant_then_the_variant_and_dtype_then_the_variant():
    measured = _measured({"mlp/ours/fp16/t1-d768-h3072": 0.01, "swiglu_mlp/ours/bf16/t1-d4096-h14336": 0.02})
    reference = {"mlp/ours/fp16/t1-d768-h3072": 15e-6, "swiglu_mlp/ours/bf16/t1-d4096-h14336": 90e-6,
                 "mlp/ours/bf16/t1-d2048-h16384": 80e-6, "silu_mul/ours/bf16/t1-h14336": 16e-6,
                 "silu_mul/ours/fp32/t1-h14336": 80e-6}
    got = between_runs.inherit(measured, reference)
    # its op and variant, though the other case has its dtype and is nearer in time
    assert got["mlp/ours/bf16/t1-d2048-h16384"]["inherits"] == "mlp/ours/fp16/t1-d768-h3072"
    # no silu_mul/ours measured: its variant and dtype, though the other case is nearer in time
    assert got["silu_mul/ours/bf16/t1-h14336"]["inherits"] == "swiglu_mlp/ours/bf16/t1-d4096-h14336"
    # no ours of fp32: its variant alone, the nearest in time
    assert got["silu_mul/ours/fp32/t1-h14336"]["inherits"] == "swiglu_mlp/ours/bf16/t1-d4096-h14336"


def test_a_case_measured_too_few_times_inherits_and_keeps_its_own_figures():
    measured = {"mlp/ours/bf16/t1-d768-h3072": {"runs": 2, "medians_s": [1e-5, 1.1e-5],
                                                 between_runs.HOST_ENTRY: {"allowance": 0.4}},
                "mlp/ours/bf16/t16-d768-h3072": {"allowance": 0.02, between_runs.ONE_BOX: {"allowance": 0.01}}}
    reference = {"mlp/ours/bf16/t1-d768-h3072": 15e-6, "mlp/ours/bf16/t16-d768-h3072": 16e-6}
    got = between_runs.inherit(measured, reference)["mlp/ours/bf16/t1-d768-h3072"]
    assert got["allowance"] == 0.02 and got["inherits"] == "mlp/ours/bf16/t16-d768-h3072"
    assert got[between_runs.ONE_BOX] == {"inherits": "mlp/ours/bf16/t16-d768-h3072", "allowance": 0.01}
    assert got[between_runs.HOST_ENTRY] == {"allowance": 0.4}  # its own, not inherited
    assert got["runs"] == 2  # what was measured of it stays


def test_the_host_figure_comes_from_the_nearest_case_that_has_one():
    measured = {"gelu_mul/ours/bf16/t8192-h14336": {"allowance": 0.02},  # nearest, but no host figure
                "gelu_mul/ours/bf16/t1-h16384": {"allowance": 0.01, between_runs.HOST_ENTRY: {"allowance": 0.7}}}
    reference = {"gelu_mul/ours/bf16/t8192-h14336": 161e-6, "gelu_mul/ours/bf16/t1-h16384": 1.3e-6,
                 "gelu_mul/ours/bf16/t4096-h16384": 93e-6}
    got = between_runs.inherit(measured, reference)["gelu_mul/ours/bf16/t4096-h16384"]
    assert got["inherits"] == "gelu_mul/ours/bf16/t8192-h14336"
    assert got[between_runs.HOST_ENTRY]["inherits"] == "gelu_mul/ours/bf16/t1-h16384"


def test_device_time_within_boxes_is_kept_for_one_box_comparisons(tmp_path):
    runs = [{CASE: {"device_time_s": m, "box_id": b}} for m, b in
            zip([100e-6, 101e-6, 110e-6, 111e-6], [1, 1, 2, 2])]
    (entry,) = between_runs.measure(runs).values()
    assert entry["boxes"] == 2 and entry[between_runs.ONE_BOX]["dof"] == 2
    assert entry[between_runs.ONE_BOX]["allowance"] < entry["allowance"] / 3  # the step between boxes is left out
    between_runs.write(between_runs.path_for(tmp_path, "h200"), "h200", [], {CASE: entry})
    assert between_runs.load(tmp_path, "h200", one_box=True)[CASE] == pytest.approx(entry[between_runs.ONE_BOX]["allowance"])
    assert between_runs.load(tmp_path, "h200")[CASE] == pytest.approx(entry["allowance"])
    # the spread within boxes keeps its degrees of freedom (4 runs, 2 boxes); the one over every box, runs - 1
    assert between_runs.load_dof(tmp_path, "h200", one_box=True) == {CASE: 2}
    assert between_runs.load_dof(tmp_path, "h200") == {CASE: 3}


def test_an_inherited_figure_has_no_degrees_of_freedom_of_its_own(tmp_path):
    donor, heir = "gelu_mul/ours/bf16/t1-h16384", "gelu_mul/ours/bf16/t333-h3000"
    runs = [{donor: {"device_time_s": m, "box_id": b}} for m, b in zip([1.30e-6, 1.31e-6, 1.33e-6, 1.32e-6], [1, 1, 2, 2])]
    measured = between_runs.measure(runs)
    cases = measured | between_runs.inherit(measured, {donor: 1.3e-6, heir: 3.1e-6})
    between_runs.write(between_runs.path_for(tmp_path, "h200"), "h200", [], cases)
    assert between_runs.load_dof(tmp_path, "h200", one_box=True) == {donor: 2}  # the heir's are another case's
    assert heir in between_runs.load(tmp_path, "h200", one_box=True)
    assert between_runs.load_dof(tmp_path / "nowhere", "h200") == {}


def test_unknown_boxes_are_not_counted_as_boxes():
    runs = [{CASE: {"device_time_s": 1e-4, **({"box_id": b} if b is not None else {})}} for b in (None, 0, 5)]
    (entry,) = between_runs.measure(runs).values()
    assert entry["boxes"] == 1


def test_a_copy_of_the_results_finds_the_noise_of_the_repository_and_a_missing_file_is_said(tmp_path, monkeypatch):
    own = tmp_path / "own"
    (own / between_runs.FOLDER).mkdir(parents=True)
    (own / between_runs.FOLDER / "h100.json").write_text(json.dumps(
        {"version": 3, "machine": "h100", "cases": {"mlp/eager/bf16/t1-d768-h3072": {"allowance": 0.05}}}))
    monkeypatch.setenv("MLPBENCH_OWN_RESULTS", str(own))
    copy = tmp_path / "elsewhere"  # a copy of results/asv with no between-runs/ beside it
    copy.mkdir()
    assert between_runs.locate(copy, "h100") == own / between_runs.FOLDER / "h100.json"
    assert between_runs.load(copy, "h100") == {"mlp/eager/bf16/t1-d768-h3072": 0.05}
    beside = copy / between_runs.FOLDER
    beside.mkdir()
    (beside / "h100.json").write_text(json.dumps({"version": 3, "machine": "h100", "cases": {}}))
    assert between_runs.load(copy, "h100") == {}  # the file beside the results read comes first
    assert between_runs.locate(copy, "h200") is None
    line = between_runs.missing_line("h200", copy)
    assert "h200" in line and str(copy / between_runs.FOLDER / "h200.json") in line and "floors" in line
