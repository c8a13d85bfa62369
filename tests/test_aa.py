"""scripts/aa.py: every variant's between-run noise from A/A runs on several boxes, and its out-of-sample check."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from mlpbench import atomic
from mlpbench.judging import between_runs

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("aa", ROOT / "scripts" / "aa.py")
aa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(aa)

EAGER, OURS = "mlp/eager/bf16/t8192-d768-h3072", "gelu_mul/ours/bf16/t1-h16384"
BOX_A, BOX_B, BOX_C = 0xA, 0xB, 0xC


def _info(case, device, host, box, seed, flops, moved):
    rng = np.random.default_rng(seed)
    dev = list(device * (1 + 0.001 * rng.standard_normal(20)))
    rounds = list(host * (1 + 0.002 * rng.standard_normal(5)))
    return {"case": case, "device_time_s": float(np.median(dev)), "device_time_samples_s": dev,
            "host_time_back_to_back_s": float(np.median(rounds)), "host_time_back_to_back_samples_s": rounds,
            "box_id": box, "flops": flops, "bytes": moved}


def _run(path: Path, box: int, seed: int, eager=(250e-6, 260e-6), ours=(1.3e-6, 20e-6)) -> Path:
    infos = [_info(EAGER, *eager, box, seed, 1.2e11, 7.9e7), _info(OURS, *ours, box, seed + 100, 0, 2e5)]
    path.write_text(json.dumps({"commit_info": {"id": "3ad7bbbe" * 5, "dirty": False},
                                "benchmarks": [{"extra_info": i} for i in infos]}))
    return path


@pytest.fixture
def runs(tmp_path):
    # calibration: two boxes, two fresh processes each; the eager MLP's device time moves ~1% between
    # processes, our kernel's host time ~3% within a box and 40% between boxes
    cal = [_run(tmp_path / "1.json", BOX_A, 1, (250e-6, 260e-6), (1.30e-6, 20.0e-6)),
           _run(tmp_path / "2.json", BOX_A, 2, (253e-6, 262e-6), (1.30e-6, 20.6e-6)),
           _run(tmp_path / "3.json", BOX_B, 3, (248e-6, 258e-6), (1.31e-6, 28.0e-6)),
           _run(tmp_path / "4.json", BOX_B, 4, (251e-6, 261e-6), (1.30e-6, 28.9e-6))]
    # out of sample, a third box: run 6's eager MLP is 12% slower with nothing changed
    later = [_run(tmp_path / "5.json", BOX_C, 5, (250e-6, 260e-6), (1.30e-6, 24.0e-6)),
             _run(tmp_path / "6.json", BOX_C, 6, (280e-6, 261e-6), (1.30e-6, 24.5e-6))]
    return cal + later


def test_noise_is_measured_from_the_calibration_runs_and_written_for_the_gate(runs, tmp_path):
    between, out = between_runs.path_for(tmp_path, "h200"), tmp_path / "answer.md"
    assert aa.main([*map(str, runs), "--calibration", "4", "--between", str(between), "--output", str(out)]) == 0
    doc = json.loads(between.read_text())
    assert doc["version"] == 3 and doc["runs"] == list(map(str, runs[:4]))
    ours = doc["cases"][OURS]
    host = ours[between_runs.HOST_ENTRY]
    # host noise within boxes: the 40% step between boxes is not in it
    assert host["dof"] == 2 and host["allowance"] < 0.15 and ours["boxes"] == 2
    assert between_runs.load(tmp_path, "h200", between_runs.HOST)[OURS] == pytest.approx(host["allowance"])
    page = out.read_text()
    assert "| 5 | `" in page and "out of sample" in page and "| µs-sized |" in page and "| GEMM-bound |" in page


def test_out_of_sample_flags_are_counted_apart_and_named(runs, tmp_path):
    out = tmp_path / "answer.md"
    aa.main([*map(str, runs), "--calibration", "4", "--output", str(out)])
    page = out.read_text()
    # two cases, each later run against each of the four calibration runs: 16 pairs; run 6's eager MLP
    # against each calibration run: four regressions with the same code
    device = next(line for line in page.splitlines() if line.startswith("| device time"))
    cells = [c.strip() for c in device.strip("|").split("|")]
    assert cells[1] == "16" and cells[5].startswith("4 ")
    assert page.count(f"| {EAGER} | device | run 6 vs run") == 4
    host = next(line for line in page.splitlines() if line.startswith("| back-to-back host time"))
    # each case's run 6 against run 5, the one other run of box C
    assert [c.strip() for c in host.strip("|").split("|")][1] == "2"


def test_cases_of_the_reference_run_inherit_and_are_listed(runs, tmp_path):
    ref = tmp_path / "ref.json"
    infos = [_info(EAGER, 250e-6, 260e-6, BOX_A, 9, 1.2e11, 7.9e7), _info(OURS, 1.3e-6, 20e-6, BOX_A, 9, 0, 2e5),
             _info("gelu_mul/ours/bf16/t333-h3000", 3.1e-6, 20e-6, BOX_A, 9, 0, 4e6)]
    ref.write_text(json.dumps({"benchmarks": [{"extra_info": i} for i in infos]}))
    between, out = tmp_path / "between" / "h200.json", tmp_path / "answer.md"
    aa.main([*map(str, runs), "--calibration", "4", "--reference", str(ref), "--between", str(between),
             "--output", str(out)])
    entry = json.loads(between.read_text())["cases"]["gelu_mul/ours/bf16/t333-h3000"]
    assert entry["inherits"] == OURS
    assert "| gelu_mul/ours/bf16/t333-h3000 | gelu_mul/ours/bf16/t1-h16384 |" in out.read_text()


def test_into_writes_the_page_between_a_readmes_markers(runs, tmp_path, capsys):
    begin, end = atomic.section_markers("aa.py")
    readme, out = tmp_path / "README.md", tmp_path / "answer.md"
    readme.write_text(f"# A study\n\n{begin}\nold\n{end}\n\nAfter.\n")
    assert aa.main([*map(str, runs), "--calibration", "4", "--output", str(out), "--into", str(readme)]) == 0
    assert atomic.read_section(readme, "aa.py") == out.read_text() and readme.read_text().endswith("\n\nAfter.\n")
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    assert aa.main([*map(str, runs), "--into", str(bare)]) == 2
    assert f"aa: {bare}: no section for aa.py" in capsys.readouterr().err


def test_too_few_calibration_runs_is_bad_input(runs):
    assert aa.main([*map(str, runs), "--calibration", "2"]) == 2


def test_host_pairs_take_calibration_runs_of_the_same_box_and_skip_records_without_host_time(tmp_path):
    cal = [_run(tmp_path / f"{k}.json", box, k) for k, box in ((1, BOX_A), (2, BOX_A), (3, BOX_B), (4, BOX_B))]
    later = _run(tmp_path / "5.json", BOX_A, 5)
    doc = json.loads(later.read_text())
    for key in ("host_time_back_to_back_s", "host_time_back_to_back_samples_s"):
        del doc["benchmarks"][1]["extra_info"][key]  # our kernel's record in run 5 has no host time
    later.write_text(json.dumps(doc))
    out = tmp_path / "answer.md"
    assert aa.main([*map(str, cal + [later]), "--calibration", "4", "--output", str(out)]) == 0
    host = next(line for line in out.read_text().splitlines() if line.startswith("| back-to-back host time"))
    assert [c.strip() for c in host.strip("|").split("|")][1] == "2"  # the eager MLP's run 5 against runs 1 and 2


def test_without_the_noise_at_least_as_many_pairs_are_flagged(runs, tmp_path):
    out = tmp_path / "answer.md"
    aa.main([*map(str, runs), "--calibration", "4", "--output", str(out)])
    device = next(line for line in out.read_text().splitlines() if line.startswith("| device time"))
    without, with_ = (int(c.strip().split()[0]) for c in device.strip("|").split("|")[2:4])
    assert without >= with_ >= 4


def _codegen(block, sha="s"):
    return {"kernels": [{"name": "triton_poi_fused_gelu_mul_0", "source_sha256": sha, "config": {"XBLOCK": block}}],
            "settings": {}}


def test_only_other_picks_count_as_the_autotuners_move():
    a = {"codegen_fingerprint": 1, "codegen": _codegen(1024)}
    assert aa.picks_only(a, {"codegen_fingerprint": 2, "codegen": _codegen(512)})
    assert not aa.picks_only(a, {"codegen_fingerprint": 2, "codegen": _codegen(512, sha="t")})  # the source changed
    assert not aa.picks_only(a, dict(a))  # the same code: nothing to excuse
