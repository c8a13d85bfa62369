"""The studies' scripts on fabricated runs: what they count and judge must follow from the data, the
branches demo.sh makes must carry exactly the plants it names, and a study's bundle must give back
the documents packed into it."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlpbench import bundle

ROOT = Path(__file__).resolve().parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


trials = _load("same_box_trials", "studies/same-box/trials.py")
targets = _load("paired_host_targets", "studies/paired-host/targets.py")
aa_runs = _load("between_boxes_runs", "studies/between-boxes/runs.py")

PLANTED, STEADY = "mlp/eager/bf16/t8192-d768-h3072", "mlp/ours/bf16/t8192-d768-h3072"


# --- studies/same-box/trials.py -------------------------------------------------------------------

def _round(seed, planted_scale):
    rng = np.random.default_rng(seed)
    offset = 1 + 0.002 * rng.standard_normal()  # a process's own offset, as a fresh process has

    def info(case, scale):
        dev = list(2.2e-4 * scale * offset * (1 + 0.002 * rng.standard_normal(20)))
        b2b = list(2.3e-4 * scale * offset * (1 + 0.002 * rng.standard_normal(5)))
        return {"case": case, "op": "mlp", "variant": case.split("/")[1], "dtype": "bf16",
                "shape_id": "t8192-d768-h3072", "box_id": 7, "device_time_samples_s": dev,
                "host_time_back_to_back_samples_s": b2b}

    return [info(PLANTED, planted_scale), info(STEADY, 1.0)], [], "h200-test"


def _sides(k=6, slowdown=1.20):
    return {"base": [_round(s, 1.0) for s in range(k)], "head": [_round(100 + s, slowdown) for s in range(k)]}


def test_trials_detect_a_plant_far_above_the_noise_and_flag_nothing_between_equals(tmp_path):
    counts = trials.trials(_sides(), size=3, draws=20, seed=1, results_root=tmp_path)
    for metric in ("device time", "back-to-back host time"):
        assert counts["detect"][(PLANTED, metric)] == 20
        assert counts["detect"][(STEADY, metric)] == 0
    assert counts["detect_disjoint_n"] == 2 and counts["detect_disjoint"][(PLANTED, "device time")] == 2
    # A/A: 20 draws from each side, one disjoint split of six rounds per side
    assert counts["aa_n"] == 40 and counts["aa_disjoint_n"] == 2
    assert sum(counts["aa"].values()) == 0


def test_trials_report_a_plant_inside_the_noise_as_undetected(tmp_path):
    # 0.1% against a process offset of 0.2% and the gate's floor: not a regression in any draw
    counts = trials.trials(_sides(slowdown=1.001), size=3, draws=10, seed=2, results_root=tmp_path)
    assert counts["detect"][(PLANTED, "device time")] == 0


def test_trials_table_names_every_case_the_planted_ones_and_refuses_too_few_rounds(tmp_path):
    sides = _sides(k=4)
    counts = trials.trials(sides, size=2, draws=5, seed=0, results_root=tmp_path)
    text = trials.markdown(tmp_path, sides, 2, 5, 0, [PLANTED, f"{STEADY}:device time"], counts)
    rows = [line for line in text.splitlines() if line.startswith("| mlp/")]
    # two disjoint detections: at least 22% (0.05 ** (1/2)), all that two trials can show
    assert len(rows) == 4 and f"| {PLANTED} | device time | yes | 5/5 (100%) | 2/2 (100%; ≥ 22%) |" in text
    assert f"| {PLANTED} | back-to-back host time | yes |" in text
    assert f"| {STEADY} | device time | yes | 0/5 (0%) | 0/2 (0%; ≥ 0%) |" in text
    assert f"| {STEADY} | back-to-back host time | no |" in text
    with pytest.raises(SystemExit, match="--size 5 needs 5 rounds"):
        trials.trials(sides, size=5, draws=1, seed=0, results_root=tmp_path)


def test_clopper_pearson_bounds_match_their_closed_forms():
    # all n detected: the least rate is alpha ** (1/n); none flagged: the most is 1 - alpha ** (1/n)
    for n in (2, 10, 59):
        assert trials.bound(n, n, lower=True) == pytest.approx(0.05 ** (1 / n), abs=1e-9)
        assert trials.bound(0, n, lower=False) == pytest.approx(1 - 0.05 ** (1 / n), abs=1e-9)
    # 59 disjoint trials with no false alarm are what "at most 5%" takes; 299, "at most 1%"
    assert trials.bound(0, 59, lower=False) < 0.05 < trials.bound(0, 58, lower=False)
    assert trials.bound(0, 299, lower=False) < 0.01 < trials.bound(0, 298, lower=False)
    # one of 20: between the exact one-sided bounds' known values (0.26% and 21.6%)
    assert trials.bound(1, 20, lower=True) == pytest.approx(0.00256, abs=1e-4)
    assert trials.bound(1, 20, lower=False) == pytest.approx(0.2161, abs=1e-3)


# --- studies/paired-host/targets.py ---------------------------------------------------------------

def _rec(case, device_us, host_us, vs_eager=None):
    info = {"case": case, "device_time_s": device_us * 1e-6, "host_time_back_to_back_s": host_us * 1e-6}
    if vs_eager is not None:
        info["host_time_back_to_back_vs_eager"] = vs_eager
    return {"extra_info": info}


def _doc(path, records):
    path.write_text(json.dumps({"benchmarks": records}))
    return str(path)


def test_targets_read_paired_ratios_as_quotients_and_need_every_run_to_meet_them(tmp_path):
    one = "gelu_mul/{}/bf16/t1-h16384"
    runs = []
    for k, (ours, compiled, liger) in enumerate(((0.9, 2.4, 2.5), (2.6, 2.5, 2.7), (0.8, 2.5, 2.6))):
        # unpaired medians say ours is slower than eager everywhere; the paired ratios say otherwise
        runs.append(_doc(tmp_path / f"r{k}.json", [
            _rec(one.format("eager"), 1.3, 20.0), _rec(one.format("ours"), 1.3, 60.0, ours),
            _rec(one.format("compiled"), 1.5, 50.0, compiled), _rec(one.format("liger"), 1.6, 52.0, liger)]))
    text = targets.report(runs)
    row = next(line for line in text.splitlines() if line.startswith(f"| {one.format('ours')} | ≤ faster"))
    # 0.9/2.4, 2.6/2.5, 0.8/2.5: median 0.375, but run 2 misses, so the target is missed; the device
    # quotient 1.3/1.5 beside it
    assert "| 0.375 | 1.040 | 0.320 | 0.375 | 0.867 | **missed** (2 of 3 runs met) |" in row
    moon = next(line for line in text.splitlines() if line.startswith(f"| {one.format('ours')} | moonshot"))
    assert "| 0.900 | 2.600 | 0.800 | 0.900 |" in moon and moon.endswith("| **missed** (2 of 3 runs met) |")
    assert "| gelu_mul/ours/bf16/t1-h16384 | 60.0 | 60.0 | 60.0 | 60.0 | **missed** (0 of 3 runs met) |" in text
    # missed: the bar (faster of compiled and liger) here, and the moonshot's two
    assert text.endswith("Required (all tables): 0 met, 1 missed. Moonshot: 0 met, 2 missed.\n")


def test_targets_fall_back_to_unpaired_medians_and_keep_strict_bounds_strict(tmp_path):
    pre = "llama_model/{}/bf16/t2048-d4096-h14336-l2"
    run = _doc(tmp_path / "r.json", [_rec(pre.format("eager"), 8000, 8600), _rec(pre.format("compiled"), 7400, 7500),
                                      _rec(pre.format("ourscompiled"), 7400, 7500),
                                      _rec(pre.format("dualgemmcompiled"), 7000, 7200)])
    text = targets.report([run])
    assert f"| {pre.format('ourscompiled')} | < compiled at prefill | 1.000 | 1.000 | 1.000 | **missed** (0 of 1 runs met) " \
        "(unpaired) |" in text
    assert f"| {pre.format('dualgemmcompiled')} | < compiled at prefill | 0.960 | 0.960 | 0.946 | met (unpaired) |" \
        in text
    assert "Required (all tables): 1 met, 1 missed. Moonshot: 0 met, 0 missed." in text


def test_targets_hold_large_mlps_to_their_own_device_time(tmp_path):
    big = "mlp/{}/bf16/t8192-d768-h3072"
    run = _doc(tmp_path / "r.json", [_rec(big.format("eager"), 220, 225), _rec(big.format("compiled"), 215, 220, 0.98),
                                      _rec(big.format("ours"), 210, 240, 1.07), _rec(big.format("dualgemm"), 178, 190, 0.84)])
    text = targets.report([run])
    assert f"| {big.format('ours')} | 1.143 | 1.143 | **missed** (0 of 1 runs met) |" in text
    assert f"| {big.format('dualgemm')} | 1.067 | 1.067 | met |" in text
    assert f"| {big.format('ours')} | ≤ compiled at 8192 tokens | 1.092 | 1.092 | 0.977 | **missed** (0 of 1 runs met) |" \
        in text
    # ours misses ≤ compiled and its own device time; dualgemm meets both
    assert "Required (all tables): 2 met, 2 missed." in text


# --- studies/same-box/demo.sh ---------------------------------------------------------------------

def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_demo_branches_carry_the_named_plants_and_a_bundle_of_them(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    subprocess.run(["bash", "studies/same-box/demo.sh"], cwd=repo, check=True, capture_output=True)
    base = _git(repo, "rev-parse", "HEAD").strip()
    plant = _git(repo, "diff", base, "demo/plant")
    assert plant.count("\n+    ") == 4 and ".clone().clone()\n" in plant and "< 3000" in plant
    assert _git(repo, "diff", "--stat", base, "demo/twin").strip().endswith("1 insertion(+)")
    chain = _git(repo, "log", "--format=%s", "demo/twin..demo/bisect").splitlines()
    assert len(chain) == 4 and "three times" in chain[2]
    bad = _git(repo, "diff", "demo/bisect~3", "demo/bisect~2")
    assert ".clone().clone().clone()" in bad and "_gated.py" in bad
    assert _git(repo, "diff", "demo/bisect~2", "demo/bisect", "--", "mlpbench", "kernels_local") == ""
    assert (repo / ".commits" / "main").read_text() == _git(repo, "cat-file", "commit", "HEAD")
    # the nightly takes the newest earlier commit as its base: each branch commit is dated after its parent
    dates = [int(d) for d in _git(repo, "log", "--format=%ct", "-6", "demo/bisect").split()]
    assert dates == sorted(dates, reverse=True) and len(set(dates)) == 6
    assert "demo/bisect" in _git(repo, "bundle", "list-heads", ".commits/demo.bundle")
    # a second run refuses rather than overwrite the branches
    again = subprocess.run(["bash", "studies/same-box/demo.sh"], cwd=repo, capture_output=True, text=True)
    assert again.returncode == 2 and "demo/plant exists" in again.stderr


# --- mlpbench/bundle.py ---------------------------------------------------------------------------

def test_a_bundle_gives_back_every_document_with_its_values(tmp_path):
    src = tmp_path / "src"
    docs = {"asv/h200/abc-py.json": {"results": {"x": [[1.2345678901234567e-05, None]]}, "version": 2},
            "runs/one.json": {"benchmarks": [{"extra_info": {"case": "a/b", "box_id": 2 ** 52 - 1}}]}}
    for name, doc in docs.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(json.dumps(doc, indent=4))
    packed = tmp_path / "data.json"
    bundle.main(["pack", str(packed), str(src), *(str(src / n) for n in docs)])
    assert bundle.read(packed) == docs
    bundle.main(["unpack", str(packed), str(tmp_path / "out")])
    for name, doc in docs.items():
        assert json.loads((tmp_path / "out" / name).read_text()) == doc


def test_a_bundle_refuses_names_outside_its_folder_and_another_layout(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"bundle": 1, "files": {"../escape.json": {}}}))
    with pytest.raises(SystemExit, match="not a relative path"):
        bundle.unpack(str(bad), str(tmp_path / "out"))
    bad.write_text(json.dumps({"bundle": 2, "files": {}}))
    with pytest.raises(SystemExit, match="bundle version 2"):
        bundle.read(bad)


# --- studies/between-boxes/runs.py ----------------------------------------------------------------

def test_strip_bundles_the_runs_in_order_and_targets_reads_every_ratio_from_it(tmp_path, capsys):
    cases = {case.format(v) for case, num, den in aa_runs.PAIRS for v in (num, den)}
    files = []
    for k in (1, 2):
        info = {c: {"case": c, "device_time_s": 1e-4 * k, "host_time_back_to_back_s": 2e-4,
                    "kernel_names": ["k"], "host_time_samples_s": [1.0]} for c in cases}
        for case, num, den in aa_runs.PAIRS:  # the numerator k-tenths faster in run k
            info[case.format(num)]["device_time_s"] = info[case.format(den)]["device_time_s"] * (1 - 0.1 * k)
        doc = {"benchmarks": [{"extra_info": e, "stats": {"data": [1]}, "params": {}} for e in info.values()],
               "machine_info": {"node": "box"}}
        files.append(tmp_path / f"run{k}.json")
        files[-1].write_text(json.dumps(doc))
    out = tmp_path / "data.json"
    aa_runs.strip(str(out), *map(str, files))
    kept = bundle.read(out)
    assert list(kept) == ["aa-1.json", "aa-2.json"] and kept["aa-2.json"]["stripped_from"] == "run2.json"
    first = kept["aa-1.json"]["benchmarks"][0]
    assert "stats" not in first and "params" not in first and kept["aa-1.json"]["machine_info"] == {"node": "box"}
    assert "kernel_names" not in first["extra_info"] and "device_time_s" in first["extra_info"]
    aa_runs.targets(str(out))
    page = capsys.readouterr().out
    assert "runs in the order given (aa-1.json, aa-2.json)" in page
    row = next(line for line in page.splitlines() if line.startswith("| mlp/·/bf16/t1-d768-h3072 | ours ÷ eager"))
    assert row.endswith("| 0.900 | 0.800 | 0.850 |")
