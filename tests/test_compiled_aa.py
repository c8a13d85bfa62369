"""scripts/compiled_aa.py: the A/A table of compiled cases across fresh processes."""

import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("compiled_aa", ROOT / "scripts" / "compiled_aa.py")
compiled_aa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compiled_aa)

CASE = "gelu_mul/compiled/fp16/t8192-h3072"


def _run(path: Path, median: float, block: int, fingerprint: int, seed: int) -> Path:
    samples = list(median * (1 + 0.001 * np.random.default_rng(seed).standard_normal(20)))
    kernel = {"name": "triton_poi_fused_gelu_mul_0", "source_sha256": "s", "candidates": 4,
              "config": {"XBLOCK": block, "num_warps": 4}}
    info = {"case": CASE, "device_time_s": float(np.median(samples)), "device_time_samples_s": samples,
            "codegen": {"kernels": [kernel], "settings": {}, "mode": "default", "fingerprint": fingerprint},
            "codegen_fingerprint": fingerprint}
    path.write_text(json.dumps({"benchmarks": [{"extra_info": info}]}))
    return path


def test_moves_with_other_picks_are_explained_and_others_are_not(tmp_path):
    runs = [_run(tmp_path / "1.json", 36.5e-6, 1024, 1, 1), _run(tmp_path / "2.json", 36.6e-6, 1024, 1, 2),
            _run(tmp_path / "3.json", 51.9e-6, 512, 2, 3), _run(tmp_path / "4.json", 45.0e-6, 1024, 1, 4)]
    md, counts = compiled_aa.table(runs)
    assert counts == {"cases": 1, "flagged": 2, "explained": 1, "picks differ": 1}
    assert "XBLOCK 512 instead of 1024" in md and "unexplained" in md
    assert "36.5 / 36.6 / 51.9 / 45.0" in md


def test_the_alone_table_sets_each_case_against_the_runs_after_the_others(tmp_path):
    runs = [_run(tmp_path / "1.json", 36.8e-6, 1024, 1, 1), _run(tmp_path / "2.json", 37.0e-6, 1024, 1, 2)]
    alone = [_run(tmp_path / "alone.json", 36.3e-6, 1024, 1, 5), _run(tmp_path / "moved.json", 51.9e-6, 512, 2, 6)]
    md = compiled_aa.alone_table(alone, runs)
    lines = md.splitlines()
    assert len(lines) == 4
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[0] == CASE and len(cells[2].split(" / ")) == 2 and cells[4] == "yes"
    assert 0.975 < float(cells[3]) < 0.99  # 36.3 against the median of 36.8 and 37.0 (the upper one)
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert float(cells[3]) > 1.3 and cells[4].startswith("no: triton_poi_fused_gelu_mul_0: XBLOCK=512")
