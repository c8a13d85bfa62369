"""Host time in the gate: back-to-back host time gated on one box, never across boxes (fabricated
ASV results, no GPU needed)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlpbench.judging import between_runs, gate
from mlpbench.record import METRICS, NAMES, Record

ROOT = Path(__file__).resolve().parent.parent
COLS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
        "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
AXES = [["'eager'"], ["'bf16'"], ["'t8192-h3072'"]]
CASE = "gelu_mul/eager/bf16/t8192-h3072"
A, B, C = "a" * 40, "b" * 40, "c" * 40
BOX1, BOX2 = 0x1111111111111, 0x2222222222222
DEVICE = 36.5e-6
BACK_TO_BACK = "standard.GeluMulDevice.track_host_time_back_to_back"
SINGLE = "standard.GeluMulHost.track_host_time"


def _samples(rng, median, n, cv):
    return [float(x) for x in median * (1 + cv * rng.standard_normal(n))]


def _row(samples):
    return [[float(np.median(samples))], AXES, "v4", 0, 1.0, None, None, None, None, [1], [len(samples)], [samples]]


def _write(root: Path, commit: str, date: int, *, b2b: float, single: float, box: int | None, seed: int,
           device: float = DEVICE, cv: float = 0.002) -> None:
    """One v4 ASV result file of the eager GeLU·mul case: device time (20 samples), back-to-back host
    time (5 rounds, as timing.back_to_back_host_times takes them), single-call host time (20 samples)
    and, unless `box` is None, the box that measured them."""
    rng = np.random.default_rng(seed)
    results = {
        "standard.GeluMulDevice.track_device_time": _row(_samples(rng, device, 20, cv)),
        BACK_TO_BACK: _row(_samples(rng, b2b, 5, cv)),
        SINGLE: _row(_samples(rng, single, 20, cv)),
    }
    if box is not None:
        results["standard.GeluMulHost.track_box_id"] = [[float(box)], AXES, "v4", 0, 1.0]
    doc = {"commit_hash": commit, "date": date, "params": {"machine": "h200", "python": "3.12"},
           "result_columns": COLS, "results": results, "version": 2, "env_name": "existing"}
    path = root / "asv" / "h200" / f"{commit[:8]}-existing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _check(root: Path, *args):
    return subprocess.run([sys.executable, "-m", "mlpbench.cli", "check", "--results", str(root / "asv"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def _verdicts(root: Path, base=A, head=B) -> dict[str, gate.Verdict]:
    return {v.benchmark: v for v in gate.compare(gate.load(root / "asv"), base[:7], head[:7], codegen_root=root)}


# --- (a) a back-to-back slowdown on one box fails the gate -------------------------------------------

def test_a_back_to_back_host_slowdown_on_one_box_fails_the_gate(tmp_path):
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1)
    _write(tmp_path, B, 2, b2b=60e-6 * 1.3, single=80e-6, box=BOX1, seed=2)
    v = _verdicts(tmp_path)[BACK_TO_BACK]
    assert v.verdict == "regression" and v.boxes == "same box"
    assert v.base_box == v.head_box == f"{BOX1:013x}"
    assert v.threshold == pytest.approx(gate.HOST_FLOOR) and v.threshold_from == "host floor"
    assert _verdicts(tmp_path)["standard.GeluMulDevice.track_device_time"].verdict == "unchanged"

    proc = _check(tmp_path, "--base", A[:7], "--head", B[:7])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    regressions = proc.stdout.split("### Regressions")[1].split("###")[0]
    (line,) = [l for l in regressions.splitlines() if BACK_TO_BACK in l]
    assert "(host floor)" in line and f"{BOX1:013x} (same box)" in line

    proc = _check(tmp_path, "--base", A[:7], "--head", B[:7], "--json")
    (row,) = [r for r in json.loads(proc.stdout) if r["benchmark"] == BACK_TO_BACK]
    assert row["verdict"] == "regression" and row["boxes"] == "same box"
    assert row["threshold_from"] == "host floor" and row["base_box"] == row["head_box"] == f"{BOX1:013x}"


def test_a_back_to_back_improvement_on_one_box_is_an_improvement(tmp_path):
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1)
    _write(tmp_path, B, 2, b2b=60e-6 / 1.3, single=80e-6, box=BOX1, seed=2)
    assert _verdicts(tmp_path)[BACK_TO_BACK].verdict == "improvement"


# --- (b) the same slowdown across two boxes, or with a box unknown, does not fail, and says why -------

@pytest.mark.parametrize("base_box, head_box, why", [
    (BOX1, BOX2, "different boxes"),
    (BOX1, None, "box unknown"),   # head recorded no box
    (None, None, "box unknown"),   # results from before boxes were recorded
    (0, 0, "box unknown"),         # envinfo.BOX_UNKNOWN on both: nothing identified either box
])
def test_a_back_to_back_slowdown_not_measured_on_one_box_is_listed_not_failing(tmp_path, base_box, head_box, why):
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=base_box, seed=1)
    _write(tmp_path, B, 2, b2b=60e-6 * 1.3, single=80e-6, box=head_box, seed=2)
    v = _verdicts(tmp_path)[BACK_TO_BACK]
    assert v.verdict == f"not compared ({why})" and v.boxes == why
    assert v.ratio == pytest.approx(1.3, rel=0.02)  # the figures are still shown
    proc = _check(tmp_path, "--base", A[:7], "--head", B[:7])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 regressed" in proc.stdout and "2 host-time figures not compared" in proc.stdout
    listed = proc.stdout.split("### Host time not compared")[1]
    (line,) = [l for l in listed.splitlines() if BACK_TO_BACK in l]
    shown = [f"{b:013x}" if b else "unknown" for b in (base_box, head_box)]
    assert f"{shown[0]} → {shown[1]}" in line and f"not compared ({why})" in line and "(host floor)" in line


def test_judge_never_compares_back_to_back_host_time_whose_boxes_it_was_not_told():
    def point(value):
        return gate.Point("h200", A, 1, BACK_TO_BACK, CASE, "v4", value, None)

    assert gate.judge(point(1e-4), point(2e-4)).verdict == "not compared (box unknown)"
    assert gate.judge(point(1e-4), point(2e-4), boxes=(BOX1, BOX1)).verdict == "regression"


# --- (c) a host slowdown within its noise floor passes ----------------------------------------------

def test_a_host_slowdown_within_the_host_floor_passes(tmp_path):
    slowdown = 1.06  # past device time's floor, within host time's
    assert gate.FLOOR < slowdown - 1 < gate.HOST_FLOOR
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1, device=DEVICE)
    _write(tmp_path, B, 2, b2b=60e-6 * slowdown, single=80e-6, box=BOX1, seed=2, device=DEVICE * slowdown)
    verdicts = _verdicts(tmp_path)
    assert verdicts["standard.GeluMulDevice.track_device_time"].verdict == "regression"  # the same move, on the GPU
    assert verdicts[BACK_TO_BACK].verdict == "unchanged" and verdicts[BACK_TO_BACK].threshold_from == "host floor"


def test_a_host_slowdown_within_the_measured_between_run_host_noise_passes(tmp_path):
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1)
    _write(tmp_path, B, 2, b2b=60e-6 * 1.2, single=80e-6, box=BOX1, seed=2)
    assert _verdicts(tmp_path)[BACK_TO_BACK].verdict == "regression"  # past the floor, no measured noise
    between_runs.write(between_runs.path_for(tmp_path, "h200"), "h200", ["aa-1.json"], {CASE: {
        "same_code_runs": 5, "runs": 5, "medians_s": [DEVICE] * 5, "log_sd": 0.0, "allowance": 0.0,
        between_runs.HOST_ENTRY: {"runs": 5, "box_id": BOX1, "medians_s": [], "log_sd": 0.1, "allowance": 0.3}}})
    v = _verdicts(tmp_path)[BACK_TO_BACK]
    assert v.verdict == "unchanged" and v.threshold == pytest.approx(0.3)
    assert v.threshold_from == "between-run noise"
    # the host figure's noise is not device time's: the device verdict keeps its own threshold
    assert _verdicts(tmp_path)["standard.GeluMulDevice.track_device_time"].threshold_from != "between-run noise"
    assert _check(tmp_path, "--base", A[:7], "--head", B[:7]).returncode == 0


def test_noisy_host_samples_set_the_threshold(tmp_path):
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1, cv=0.08)
    _write(tmp_path, B, 2, b2b=60e-6 * 1.12, single=80e-6, box=BOX1, seed=2, cv=0.08)
    v = _verdicts(tmp_path)[BACK_TO_BACK]
    assert v.threshold_from == "within-run noise" and v.threshold > gate.HOST_FLOOR
    assert v.verdict == "unchanged"


# --- (d) single-call host time never fails ----------------------------------------------------------

@pytest.mark.parametrize("head_box, verdict", [(BOX1, "slower (not gated)"), (BOX2, "not compared (different boxes)"),
                                               (None, "not compared (box unknown)")])
def test_single_call_host_time_never_fails(tmp_path, head_box, verdict):
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1)
    _write(tmp_path, B, 2, b2b=60e-6, single=80e-6 * 2, box=head_box, seed=2)
    v = _verdicts(tmp_path)[SINGLE]
    assert v.verdict == verdict and v.ratio == pytest.approx(2, rel=0.02)
    proc = _check(tmp_path, "--base", A[:7], "--head", B[:7])
    assert proc.returncode == 0 and "0 regressed" in proc.stdout, proc.stdout + proc.stderr


# --- a same-box reference for the nightly -----------------------------------------------------------

@pytest.fixture
def three_commits(tmp_path):
    """a on box 1, b on box 2 (the previous commit), c on box 1 with host time queued back to back 30%
    slower than a's: b alone cannot judge c's host time."""
    _write(tmp_path, A, 1, b2b=60e-6, single=80e-6, box=BOX1, seed=1)
    _write(tmp_path, B, 2, b2b=50e-6, single=70e-6, box=BOX2, seed=2)
    _write(tmp_path, C, 3, b2b=60e-6 * 1.3, single=80e-6, box=BOX1, seed=3)
    return tmp_path


def test_host_time_is_compared_with_the_latest_commit_the_same_box_measured(three_commits):
    points = gate.load(three_commits / "asv")
    assert gate.box_base(points, C) == A
    verdicts = gate.compare(points, B, C, codegen_root=three_commits)
    assert {v.benchmark: v.verdict for v in verdicts}[BACK_TO_BACK] == "not compared (different boxes)"
    merged, host_base = gate.host_on_one_box(points, verdicts, B, C, codegen_root=three_commits)
    assert host_base == A
    by_name = {v.benchmark: v for v in merged}
    assert by_name[BACK_TO_BACK].verdict == "regression" and by_name[BACK_TO_BACK].host_base == A
    assert by_name[SINGLE].host_base == A and by_name[SINGLE].boxes == "same box"
    device = by_name["standard.GeluMulDevice.track_device_time"]
    assert device.host_base is None and device.base == pytest.approx(DEVICE, rel=0.01)  # still against b
    assert f"{BOX1:013x} (same box, against {A[:8]})" in gate.markdown(merged)


def test_no_same_box_reference_leaves_the_verdicts_as_they_were(three_commits):
    points = [p for p in gate.load(three_commits / "asv") if p.commit != A]
    assert gate.box_base(points, C) is None
    verdicts = gate.compare(points, B, C)
    merged, host_base = gate.host_on_one_box(points, verdicts, B, C)
    assert host_base is None and merged == verdicts


# --- between-run noise of host time from A/A runs ----------------------------------------------------

def _runs(medians, boxes):
    return [{CASE: {"device_time_s": DEVICE * (1 + 0.001 * k), "host_time_back_to_back_s": m,
                    **({"box_id": b} if b is not None else {})}}
            for k, (m, b) in enumerate(zip(medians, boxes))]


def test_host_noise_is_the_spread_within_boxes_pooled():
    medians = [60e-6, 61e-6, 59e-6, 90e-6, 92e-6]  # the last two: another, slower box
    (entry,) = between_runs.measure(_runs(medians, [BOX1, BOX1, BOX1, BOX2, BOX2])).values()
    host = entry[between_runs.HOST_ENTRY]
    assert host["box_ids"] == [BOX1] * 3 + [BOX2] * 2 and host["runs"] == 5 and host["dof"] == 3
    groups = [[math.log(m) for m in medians[:3]], [math.log(m) for m in medians[3:]]]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups)
    sd = (ss / 3) ** 0.5
    assert host["log_sd"] == pytest.approx(sd) and host["allowance"] == pytest.approx(3 * sd)
    # the 50% step between the boxes is not host noise: host time is never compared across boxes
    assert host["allowance"] < 0.1
    assert entry["same_code_runs"] == 5 and entry["boxes"] == 2  # device time's spread uses every run


def test_runs_without_a_box_are_used_together_and_say_so():
    (entry,) = between_runs.measure(_runs([60e-6, 61e-6, 59e-6], [None, 0, None])).values()
    host = entry[between_runs.HOST_ENTRY]
    assert host["box_ids"] == [None, 0, None] and host["dof"] == 2 and "allowance" in host


def test_too_few_runs_per_box_give_no_host_allowance():
    # three runs on three boxes: no box measured the case twice, so nothing is known of its spread within one
    (entry,) = between_runs.measure(_runs([60e-6, 61e-6, 90e-6], [BOX1, BOX2, BOX2 + 1])).values()
    assert "allowance" not in entry[between_runs.HOST_ENTRY] and entry[between_runs.HOST_ENTRY]["dof"] == 0
    assert "allowance" in entry  # device time: three runs, whichever boxes


def test_between_runs_files_of_format_1_load_without_host_noise_and_unknown_formats_are_named(tmp_path):
    path = between_runs.path_for(tmp_path, "h200")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "cases": {CASE: {"allowance": 0.05}}}))
    assert between_runs.load(tmp_path, "h200") == {CASE: 0.05}
    assert between_runs.load(tmp_path, "h200", between_runs.HOST) == {}
    path.write_text(json.dumps({"version": 9, "cases": {}}))
    with pytest.raises(ValueError, match="format version 9"):
        between_runs.load(tmp_path, "h200")
    with pytest.raises(ValueError, match="'host_time_s'"):
        between_runs.load(tmp_path, "h200", "host_time_s")


def test_a_written_between_runs_file_round_trips_both_figures(tmp_path):
    measured = between_runs.measure(_runs([60e-6, 62e-6, 59e-6], [BOX1] * 3))
    path = between_runs.path_for(tmp_path, "h200")
    between_runs.write(path, "h200", ["aa-1.json"], measured)
    assert json.loads(path.read_text())["version"] == between_runs.VERSION == 3
    host, device = measured[CASE][between_runs.HOST_ENTRY]["allowance"], measured[CASE]["allowance"]
    assert host > 3 * device  # the fixture's host medians spread wider than its device medians
    assert between_runs.load(tmp_path, "h200", between_runs.HOST) == {CASE: pytest.approx(host)}
    assert between_runs.load(tmp_path, "h200") == {CASE: pytest.approx(device)}


# --- the box identity -------------------------------------------------------------------------------

def test_box_identity():
    from mlpbench import envinfo

    gpus = ["GPU-cefa5aa9-751a-930f-d627-1da6b685ff14"]
    box = envinfo.box_identity(gpus, "", "vm", "Xeon", 16)
    assert 0 < box < 2**52 and float(box) == box  # ASV stores floats: the id survives
    assert box == envinfo.box_identity(gpus, "", "vm", "Xeon", 16)
    # GPU boxes: the GPUs tell them apart, whatever the hostname or machine-id (shared by images)
    assert box == envinfo.box_identity(gpus, "image-id", "container-7f3a", "Xeon", 16)
    assert box != envinfo.box_identity(["GPU-00000000-0000-0000-0000-000000000001"], "", "vm", "Xeon", 16)
    assert box != envinfo.box_identity(gpus, "", "vm", "Xeon", 8)  # fewer cores: another box for host time
    # boxes without GPUs: machine-id and hostname; a hostname alone identifies nothing
    cpu = envinfo.box_identity([], "3d1219c7", "vm", "Xeon", 2)
    assert cpu and cpu != envinfo.box_identity([], "3d1219c7", "other", "Xeon", 2)
    assert envinfo.box_identity([], "", "vm", "Xeon", 2) == envinfo.BOX_UNKNOWN == 0
    assert envinfo.environment()["box_id"] == envinfo.box_id()


def test_every_metric_reads_a_record_field_and_records_carry_the_box():
    assert all(m.field in NAMES for m in METRICS.values() if m.field)
    assert Record().set(box_id=BOX1).extra_info() == {"box_id": BOX1}
    assert set(gate.ONE_BOX) == {"track_host_time_back_to_back", "track_host_time", "time_host"}
    assert gate.BACK_TO_BACK not in gate.NOT_GATED and gate.BACK_TO_BACK not in gate.HOST_TIME
