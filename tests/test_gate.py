"""The regression gate on small fabricated ASV results (no GPU, no git repository needed)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixture_builders import device_times
from mlpbench.judging import gate

ROOT = Path(__file__).resolve().parent.parent
COLS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
        "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
CASES = ["'gelu_mul/ours/bf16/t8192-h3072'", "'mlp/eager/bf16/t8192-d768-h3072'"]


def _write(folder: Path, commit: str, date: int, medians, seed: int, cv=0.001, kernels=(1, 5)):
    rng = np.random.default_rng(seed)
    samples = [list(m * (1 + cv * rng.standard_normal(20))) for m in medians]
    results = {
        "asv_cases.Device.track_device_time": [
            [float(np.median(s)) for s in samples], [CASES], "v2", 0, 1.0, None, None, None, None,
            [1, 1], [20, 20], samples],
        "asv_cases.Device.track_kernels_per_call": [list(kernels), [CASES], "v2", 0, 1.0],
    }
    doc = {"commit_hash": commit, "date": date, "params": {"machine": "h200", "python": "3.12"},
           "result_columns": COLS, "results": results, "version": 2, "env_name": "existing"}
    path = folder / "h200" / f"{commit[:8]}-existing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


A, B, C = "a" * 40, "b" * 40, "c" * 40


@pytest.fixture
def results(tmp_path):
    _write(tmp_path, A, 1, [36.5e-6, 220e-6], seed=1)
    _write(tmp_path, B, 2, [36.5e-6, 220e-6], seed=2)  # same code, new samples
    _write(tmp_path, C, 3, [36.5e-6 * 1.05, 220e-6], seed=3)  # our kernel 5% slower
    return tmp_path


def _check(*args):
    return subprocess.run([sys.executable, "-m", "mlpbench.cli", "check", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_unchanged_exits_0(results):
    proc = _check("--results", str(results), "--base", "aaaa", "--head", "bbbb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 regressed" in proc.stdout


def test_a_planted_5_percent_slowdown_exits_1_and_is_named(results):
    proc = _check("--results", str(results), "--base", "bbbb", "--head", "cccc")
    assert proc.returncode == 1
    assert "### Regressions" in proc.stdout
    line = next(l for l in proc.stdout.splitlines() if "gelu_mul/ours/bf16/t8192-h3072" in l)
    assert "regression" in line and "1.05" in line
    assert "mlp/eager" not in proc.stdout.split("### Regressions")[1]


def test_json_output_for_machines(results):
    proc = _check("--results", str(results), "--base", "bbbb", "--head", "cccc", "--json")
    verdicts = json.loads(proc.stdout)
    reg = [v for v in verdicts if v["verdict"] == "regression"]
    assert [v["param"] for v in reg] == ["gelu_mul/ours/bf16/t8192-h3072"]
    assert reg[0]["ci_low"] > 1 and reg[0]["test"].startswith("bootstrap")


def test_a_slowdown_under_the_threshold_is_not_flagged(results):
    proc = _check("--results", str(results), "--base", "bbbb", "--head", "cccc", "--threshold", "10")
    assert proc.returncode == 0


def test_a_lost_fusion_is_flagged_without_samples(tmp_path):
    _write(tmp_path, A, 1, [36.5e-6, 220e-6], seed=1, kernels=(1, 4))
    _write(tmp_path, B, 2, [36.5e-6, 220e-6], seed=2, kernels=(1, 5))
    verdicts = gate.compare(gate.load(tmp_path), "a", "b")
    (v,) = [v for v in verdicts if v.verdict == "regression"]
    assert v.benchmark.endswith("track_kernels_per_call") and v.test.startswith("threshold only")


def test_history_names_the_commit_that_stepped_up(results):
    proc = _check("--results", str(results), "--last", "3")
    assert proc.returncode == 1
    assert proc.stdout.startswith("cccccccc: asv_cases.Device.track_device_time(gelu_mul/ours/bf16/t8192-h3072)")


def test_a_results_folder_copied_away_from_git_works(results, tmp_path_factory):
    copy = tmp_path_factory.mktemp("elsewhere") / "asv"
    shutil.copytree(results, copy)
    assert _check("--results", str(copy), "--base", "bbbb", "--head", "cccc").returncode == 1


@pytest.mark.parametrize("args, message", [
    (["--base", "dddd", "--head", "cccc"], "revision 'dddd' matches no commit"),
    (["--base", "aaaa"], "give --base and --head, or --last N"),
    (["--base", "aaaa", "--head", "bbbb", "--machine", "a100"], "machine 'a100' has no results"),
    (["--last", "1"], "need at least 2 commits"),
])
def test_bad_input_exits_2(results, args, message):
    proc = _check("--results", str(results), *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_unreadable_base_exits_2_and_corrupt_files_are_named(results):
    (results / "h200" / "aaaaaaaa-existing.json").write_text("{ truncated")
    (results / "h200" / "notes.json").write_text("[1, 2]")
    proc = _check("--results", str(results), "--base", "aaaa", "--head", "bbbb")
    assert proc.returncode == 2
    assert "aaaaaaaa-existing.json" in proc.stderr and "notes.json" in proc.stderr
    assert "revision 'aaaa' matches no commit" in proc.stderr


@pytest.fixture
def only_truncated(tmp_path_factory):
    """A results folder whose only file was cut off while ASV wrote it."""
    folder = tmp_path_factory.mktemp("truncated")
    full = _write(folder, A, 1, [36.5e-6, 220e-6], seed=1)
    full.write_text(full.read_text()[:300])
    return folder


@pytest.fixture
def only_failed(tmp_path_factory):
    """Two commits whose every benchmark failed: ASV stores null for each value."""
    folder = tmp_path_factory.mktemp("failed")
    for commit, date in ((A, 1), (B, 2)):
        path = _write(folder, commit, date, [36.5e-6, 220e-6], seed=1)
        doc = json.loads(path.read_text())
        for row in doc["results"].values():
            row[0] = [None] * len(row[0])
        path.write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("folder", ["only_truncated", "only_failed"])
@pytest.mark.parametrize("mode", ["base-head", "last", "base-results"])
def test_nothing_readable_for_the_commits_asked_for_exits_2(request, results, folder, mode):
    empty = request.getfixturevalue(folder)
    args = {"base-head": ["--results", str(empty), "--base", "aaaa", "--head", "bbbb"],
            "last": ["--results", str(empty), "--last", "3"],
            "base-results": ["--results", str(results), "--base-results", str(empty), "--base", "aaaa",
                             "--head", "bbbb"]}[mode]
    proc = _check(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no regression" not in proc.stdout and "Traceback" not in proc.stderr
    assert "mlpbench: error:" in proc.stderr


def test_history_over_one_readable_commit_exits_2_and_skips_unreadable_ones(results):
    (results / "h200" / "bbbbbbbb-existing.json").write_text("{ cut")
    (results / "h200" / "cccccccc-existing.json").unlink()
    proc = _check("--results", str(results), "--last", "3")
    assert proc.returncode == 2 and "found 1" in proc.stderr
    _write(results, C, 3, [36.5e-6 * 1.05, 220e-6], seed=3)
    proc = _check("--results", str(results), "--last", "3")  # a and c readable, b skipped by name
    assert proc.returncode == 1 and "bbbbbbbb-existing.json" in proc.stderr
    assert proc.stdout.startswith("cccccccc:")


def test_base_results_with_last_exits_2(results):
    proc = _check("--results", str(results), "--base-results", str(results), "--last", "3")
    assert proc.returncode == 2 and "--base-results goes with --base and --head" in proc.stderr


def test_missing_results_folder_exits_2(tmp_path):
    proc = _check("--results", str(tmp_path / "nope"), "--base", "a", "--head", "b")
    assert proc.returncode == 2 and "does not exist" in proc.stderr


# Our kernels and their peers at two shapes, fabricated device times.
PEERS = {"gelu_mul/eager/bf16/t8192-h3072": 60e-6, "gelu_mul/compiled/bf16/t8192-h3072": 37e-6,
         "gelu_mul/liger/bf16/t8192-h3072": 40e-6, "gelu_mul/ours/bf16/t8192-h3072": 36.5e-6,
         "mlp/eager/bf16/t8192-d768-h3072": 230e-6, "mlp/ours/bf16/t8192-d768-h3072": 200e-6}
X, Y, Z = "d" * 40, "e" * 40, "f" * 40


@pytest.fixture
def aa_history(tmp_path):
    """Commit X run twice (asv/, asv-aa/: the second run 1% off on the gelu_mul peers, under every floor),
    commit Z of the same code in asv/, and branch commit Y, our kernels 20% slower (asv-slowdown/)."""
    device_times(tmp_path / "asv", "h200", X, 1, PEERS, seed=1)
    device_times(tmp_path / "asv", "h200", Z, 3, PEERS, seed=2)
    shifted = {c: m * (1.01 if c.startswith("gelu_mul/") and "/ours/" not in c else 1.0) for c, m in PEERS.items()}
    device_times(tmp_path / "asv-aa", "h200", X, 1, shifted, seed=3)
    slowed = {c: m * (1.2 if "/ours/" in c else 1.0) for c, m in PEERS.items()}
    device_times(tmp_path / "asv-slowdown", "h200", Y, 2, slowed, seed=4)
    return tmp_path


def test_runs_of_identical_code_show_no_device_regression(aa_history):
    verdicts = gate.compare(gate.load(aa_history / "asv"), X[:7], Z[:7])
    assert len(verdicts) == len(PEERS) and all(v.verdict == "unchanged" for v in verdicts), verdicts


def test_detection_trials_find_planted_slowdowns_on_quiet_samples():
    from mlpbench.judging import detection

    rng = np.random.default_rng(0)
    samples = {"gelu_mul/ours/bf16/t8192-h3072": list(36.5e-6 * (1 + 0.001 * rng.standard_normal(20)))}
    df = detection.trials(samples, n_trials=20, slowdowns=(0.0, 0.05))
    rate = df.groupby("slowdown")["flagged"].mean()
    assert rate[0.0] == 0 and rate[0.05] == 1
    assert list(detection.summary(df).index) == ["≥ 20 µs"]


def test_an_aa_run_of_one_commit_is_read_from_a_second_folder(results, tmp_path_factory):
    """Two runs of the same commit share its hash, so the base run comes from its own folder."""
    second = tmp_path_factory.mktemp("second-run")
    _write(second, A, 1, [36.5e-6, 220e-6], seed=7)
    proc = _check("--results", str(second), "--base-results", str(results), "--base", "aaaa", "--head", "aaaa")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 benchmarks compared: 0 regressed" in proc.stdout
    _write(second, A, 1, [36.5e-6 * 1.05, 220e-6], seed=7)
    proc = _check("--results", str(second), "--base-results", str(results), "--base", "aaaa", "--head", "aaaa")
    assert proc.returncode == 1 and "gelu_mul/ours/bf16/t8192-h3072" in proc.stdout


def test_compile_time_and_host_time_beside_device_time_are_reported_not_gated(tmp_path):
    def point(name, value):
        return gate.Point("h200", "x" * 40, 0, f"asv_cases.MlpHost.{name}", "'mlp/eager/bf16/t1-d768-h3072'",
                          "v3", value, None)

    host = gate.judge(point("time_host", 100e-6), point("time_host", 130e-6), gated=False)
    assert host.verdict == "slower (not gated)"
    compile_ = gate.judge(point("track_cold_compile", 10.0), point("track_cold_compile", 8.0))
    assert compile_.verdict == "faster (not gated)"
    md = gate.markdown([host, compile_])
    assert "0 regressed" in md and "not gated" in md
    peak = gate.judge(point("track_peak_memory", 1e9), point("track_peak_memory", 1.5e9))
    assert peak.verdict == "regression"

    # Through compare: host time of a case with device time is not gated (and compared on one box
    # only: both commits name the same box); without it (a CPU), it is.
    path = _write(tmp_path, A, 1, [36.5e-6, 220e-6], seed=1)
    doc = json.loads(path.read_text())
    doc["results"]["asv_cases.DeviceHost.time_host"] = [[1e-4, 1e-4], [CASES], "v2", 0, 1.0]
    doc["results"]["asv_cases.DeviceHost.track_box_id"] = [[7.0, 7.0], [CASES], "v2", 0, 1.0]
    doc["results"]["asv_cases.CpuHost.time_host"] = [[1e-4], [["'linear/eager/fp32/t1024-i32-o64'"]], "v2", 0, 1.0]
    path.write_text(json.dumps(doc))
    _write(tmp_path, B, 2, [36.5e-6, 220e-6], seed=1)
    doc["commit_hash"], doc["date"] = B, 2
    for k in ("asv_cases.DeviceHost.time_host", "asv_cases.CpuHost.time_host"):
        doc["results"][k][0] = [v * 1.3 for v in doc["results"][k][0]]
    (tmp_path / "h200" / f"{B[:8]}-existing.json").write_text(json.dumps(doc))
    verdicts = {(v.benchmark, v.param): v.verdict for v in gate.compare(gate.load(tmp_path), "a", "b")}
    assert verdicts[("asv_cases.DeviceHost.time_host", CASES[0].strip("'"))] == "slower (not gated)"
    assert verdicts[("asv_cases.CpuHost.time_host", "linear/eager/fp32/t1024-i32-o64")] == "regression"


def test_host_time_is_told_by_method_name_in_old_and_new_result_files(tmp_path):
    """Benchmarks moved from module asv_cases to standard, and time_host became track_host_time:
    host time beside device time stays ungated under either name (on one box: both name box 7)."""
    for commit, date, scale in ((A, 1, 1.0), (B, 2, 1.3)):
        path = _write(tmp_path, commit, date, [36.5e-6, 220e-6], seed=1)
        doc = json.loads(path.read_text())
        doc["results"] = {"standard.GeluMulDevice.track_device_time": doc["results"]["asv_cases.Device.track_device_time"],
                          "standard.GeluMulHost.track_host_time": [[1e-4 * scale, 1e-4 * scale], [CASES], "v2", 0, 1.0],
                          "standard.GeluMulHost.track_box_id": [[7.0, 7.0], [CASES], "v2", 0, 1.0]}
        path.write_text(json.dumps(doc))
    verdicts = {(v.benchmark, v.param): v.verdict for v in gate.compare(gate.load(tmp_path), "a", "b")}
    assert verdicts[("standard.GeluMulHost.track_host_time", CASES[0].strip("'"))] == "slower (not gated)"


def test_compiled_cases_have_the_higher_floor():
    def point(case, value):
        return gate.Point("h200", "x" * 40, 0, "asv_cases.GeluMulDevice.track_device_time", case, "v3", value,
                          tuple(value * (1 + 1e-4 * k) for k in range(-5, 5)))

    for variant, verdict in (("ours", "regression"), ("compiled", "unchanged")):
        case = f"gelu_mul/{variant}/bf16/t8192-h14336"
        v = gate.judge(point(case, 166e-6), point(case, 166e-6 * 1.025))
        assert v.verdict == verdict, (variant, v)


def test_between_run_trials_use_one_run_as_base_and_the_other_as_head():
    from mlpbench.judging import detection

    rng = np.random.default_rng(1)
    run1 = {"gelu_mul/ours/bf16/t8192-h3072": list(36.5e-6 * (1 + 0.001 * rng.standard_normal(20)))}
    run2 = {"gelu_mul/ours/bf16/t8192-h3072": list(36.5e-6 * (1 + 0.001 * rng.standard_normal(20)))}
    rate = detection.between_runs(run1, run2, n_trials=20, slowdowns=(0.0, 0.05)).groupby("slowdown")["flagged"].mean()
    assert rate[0.0] == 0 and rate[0.05] == 1
    shifted = {k: [x * 1.04 for x in v] for k, v in run2.items()}  # a real 4% step between the runs
    assert detection.between_runs(run1, shifted, n_trials=20, slowdowns=(0.0,))["flagged"].all()


def test_an_aa_pair_flags_nothing_and_the_slowed_branch_only_our_kernels(aa_history):
    """Two runs of one commit share its hash, so the A/A run and the branch are gated against asv/."""
    base = gate.load(aa_history / "asv")
    aa = gate.compare(gate.load(aa_history / "asv-aa"), X[:7], X[:7], base_points=base)
    assert len(aa) == len(PEERS) and all(v.verdict == "unchanged" for v in aa), aa
    slow = gate.compare(gate.load(aa_history / "asv-slowdown"), X[:7], Y[:7], base_points=base)
    assert len(slow) == len(PEERS)
    flagged = {v.param for v in slow if v.verdict == "regression"}
    assert flagged == {c for c in PEERS if "/ours/" in c}
    assert all(v.verdict == "unchanged" for v in slow if "/ours/" not in v.param)


def _write_compiled(folder: Path, commit: str, date: int, median: float, fingerprint: int, seed: int):
    """A v4 result file: the compiled GeLU·mul case's device time and its codegen fingerprint."""
    rng = np.random.default_rng(seed)
    samples = list(median * (1 + 0.001 * rng.standard_normal(20)))
    axes = [["'compiled'"], ["'bf16'"], ["'t8192-h3072'"]]
    results = {
        "standard.GeluMulDevice.track_device_time": [[float(np.median(samples))], axes, "v4", 0, 1.0, None, None,
                                                     None, None, [1], [20], [samples]],
        "standard.GeluMulCodegen.track_codegen": [[float(fingerprint)], axes, "v4", 0, 1.0],
    }
    doc = {"commit_hash": commit, "date": date, "params": {"machine": "h200", "python": "3.12"},
           "result_columns": COLS, "results": results, "version": 2, "env_name": "existing"}
    path = folder / "asv" / "h200" / f"{commit[:8]}-existing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _kernel(block, source="src-a"):
    return {"name": "triton_poi_fused_gelu_mul_0", "source_sha256": source, "candidates": 4,
            "config": {"XBLOCK": block, "num_warps": 4 if block == 1024 else 8, "num_stages": 1},
            "autotune_cache_state": "miss", "coordinate_descent": False}


@pytest.mark.parametrize("head_kernel, verdict, exit_code", [
    (_kernel(512), "slower (autotuner's pick)", 0),           # the autotuner moved, not the commit
    (_kernel(512, source="src-b"), "regression", 1),          # the commit changed what Inductor compiles
])
def test_a_compiled_case_that_moved_with_its_generated_code_is_attributed(tmp_path, head_kernel, verdict, exit_code):
    from mlpbench.compile import codegen_record

    base = {"kernels": [_kernel(1024)], "settings": {"max_autotune": False}, "mode": "default", "fingerprint": 11}
    head = {"kernels": [head_kernel], "settings": {"max_autotune": False}, "mode": "default", "fingerprint": 22}
    for record in (base, head):
        codegen_record.store(record, tmp_path)
    _write_compiled(tmp_path, A, 1, 36.5e-6, 11, seed=1)
    _write_compiled(tmp_path, B, 2, 51.9e-6, 22, seed=2)
    (v,) = gate.compare(gate.load(tmp_path / "asv"), A[:7], B[:7], codegen_root=tmp_path)
    assert v.verdict == verdict and v.compiles
    assert "XBLOCK 512 instead of 1024, num_warps 8 instead of 4" in v.cause
    assert ("its Triton source changed" in v.cause) == (verdict == "regression")
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "check", "--results", str(tmp_path / "asv"),
                           "--base", A[:7], "--head", B[:7]], capture_output=True, text=True)
    assert proc.returncode == exit_code, proc.stderr
    assert "XBLOCK 512 instead of 1024" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "check", "--results", str(tmp_path / "asv"),
                           "--base", A[:7], "--head", B[:7], "--json"], capture_output=True, text=True)
    assert json.loads(proc.stdout)[0]["verdict"] == verdict


def test_a_compiled_case_whose_code_did_not_change_is_a_plain_regression(tmp_path):
    _write_compiled(tmp_path, A, 1, 36.5e-6, 11, seed=1)
    _write_compiled(tmp_path, B, 2, 51.9e-6, 11, seed=2)
    (v,) = gate.compare(gate.load(tmp_path / "asv"), A[:7], B[:7], codegen_root=tmp_path)
    assert v.verdict == "regression" and v.cause is None


def test_a_machine_without_a_noise_file_is_warned_of_in_the_markdown_and_the_json(results):
    proc = _check("--results", str(results), "--base", "aaaa", "--head", "bbbb")
    assert proc.stdout.startswith("**Warning:** no between-run noise for h200 ("), proc.stdout[:300]
    assert "floors and within-run noise alone" in proc.stdout.splitlines()[0]
    verdicts = json.loads(_check("--results", str(results), "--base", "aaaa", "--head", "bbbb", "--json").stdout)
    assert verdicts and all(v["noise"].startswith("warning: no between-run noise for h200") for v in verdicts)


def test_a_noise_file_beside_the_results_is_named_by_each_verdict(tmp_path):
    asv = tmp_path / "results" / "asv"
    _write(asv, A, 1, [36.5e-6, 220e-6], seed=1)
    _write(asv, B, 2, [36.5e-6, 220e-6], seed=2)
    noise = tmp_path / "results" / "between-runs" / "h200.json"
    noise.parent.mkdir()
    noise.write_text(json.dumps({"version": 3, "machine": "h200", "cases": {}}))
    proc = _check("--results", str(asv), "--base", "aaaa", "--head", "bbbb", "--json")
    assert {v["noise"] for v in json.loads(proc.stdout)} == {str(noise)}
    assert "Warning" not in _check("--results", str(asv), "--base", "aaaa", "--head", "bbbb").stdout
