"""scripts/compiled_aa.py: the A/A table of compiled cases across fresh processes."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from mlpbench import atomic, registry

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
    assert {k: counts[k] for k in ("cases", "flagged", "explained", "picks differ")} == {
        "cases": 1, "flagged": 2, "explained": 1, "picks differ": 1}
    assert "XBLOCK 512 instead of 1024" in md and "unexplained" in md
    assert "36.5 / 36.6 / 51.9 / 45.0" in md


def test_between_run_noise_from_the_first_runs_and_the_later_runs_counted_apart(tmp_path):
    # Runs 1-4 share their code and spread ~2.5%: that sets the threshold (3 standard deviations of
    # the log median, ~6%). Run 5 (same code, 4% slower) is within it; run 6 (other pick) is not.
    medians = (36.5e-6, 37.4e-6, 36.0e-6, 37.0e-6)
    runs = [_run(tmp_path / f"{k}.json", m, 1024, 1, k) for k, m in enumerate(medians, 1)]
    runs += [_run(tmp_path / "5.json", 38.0e-6, 1024, 1, 5), _run(tmp_path / "6.json", 51.9e-6, 512, 2, 6)]
    between = tmp_path / "between" / "h200.json"
    assert compiled_aa.main([*map(str, runs), "--calibration", "4", "--between", str(between),
                             "--output", str(tmp_path / "aa.md")]) == 0
    entry = json.loads(between.read_text())["cases"][CASE]
    assert entry["same_code_runs"] == 4 and 0.04 < entry["allowance"] < 0.08
    page = (tmp_path / "aa.md").read_text()
    assert "(between-run noise)" in page and "unexplained" not in page
    assert "Runs 5–6 were not used to measure the between-run noise: against run 1 the gate flagged 1 of 2 case pairs" in page
    assert "run 6: regression" in page and "run 5:" not in page
    assert compiled_aa.main([*map(str, runs), "--calibration", "7"]) == 2


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


def _info(case: str, median: float, block: int | None, fingerprint: int, seed: int) -> dict:
    """A record of `case` with its generated code: one Triton kernel at XBLOCK `block` (None: none)."""
    samples = list(median * (1 + 0.001 * np.random.default_rng(seed).standard_normal(20)))
    kernels = [] if block is None else [{"name": "triton_poi_fused_gelu_mul_0", "source_sha256": "s",
                                         "candidates": 4, "config": {"XBLOCK": block, "num_warps": 4}}]
    return {"case": case, "device_time_s": float(np.median(samples)), "device_time_samples_s": samples,
            "codegen": {"kernels": kernels, "settings": {}, "mode": "default", "fingerprint": fingerprint},
            "codegen_fingerprint": fingerprint}


def _file(path: Path, infos: list[dict]) -> Path:
    path.write_text(json.dumps({"benchmarks": [{"extra_info": i} for i in infos]}))
    return path


STEADY, MOVES, NO_KERNEL = ("gelu_mul/compiled/fp16/t8192-h3072", "mlp/compiled/bf16/t8192-d768-h3072",
                            "linear/compiled/bf16/t1024-i32-o64")
HEAD = ("| case | device µs per run | spread | distinct picks | launch configurations | threshold (from) "
        "| gate vs run 1 |")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_page_has_one_row_per_compiled_case_and_the_gates_verdict(tmp_path):
    """scripts/compiled_aa.py end to end on four fabricated runs: run 4 alone moves one case, with
    another pick of its kernel's block size; eager cases and a case missing from a run stay out."""
    runs = []
    for k in range(1, 5):
        moved = k == 4
        infos = [_info(STEADY, 36.5e-6, 1024, 1, seed=k), _info(NO_KERNEL, 2.9e-6, None, 3, seed=10 + k),
                 _info(MOVES, (320e-6 if moved else 230e-6), 512 if moved else 1024, 22 if moved else 2, seed=20 + k),
                 _info("gelu_mul/eager/fp16/t8192-h3072", 60e-6, None, 0, seed=30 + k)]
        if k != 2:
            infos.append(_info("gelu_mul/compiled/bf16/t8192-h3072", 36e-6, 1024, 4, seed=40 + k))
        runs.append(_file(tmp_path / f"run-{k}.json", infos))
    alone = _file(tmp_path / "alone.json", [_info(STEADY, 36.4e-6, 1024, 1, seed=50)])
    pinned_info = _info(MOVES, 231e-6, 1024, 2, seed=60)
    pinned_info["codegen"]["pinned_from"] = str(runs[0])
    pinned = _file(tmp_path / "pinned.json", [pinned_info])
    between, out = tmp_path / "between" / "h200.json", tmp_path / "aa.md"
    args = [*map(str, runs), "--calibration", "3", "--between", str(between), "--alone", str(alone),
            "--pinned", str(pinned)]
    assert compiled_aa.main([*args, "--output", str(out)]) == 0
    page = out.read_text()

    main, *sections = page.split("\n## ")
    assert main.startswith("# Compiled cases across fresh processes\n")
    assert f"Generated by `python scripts/compiled_aa.py {' '.join(args)}`" in main
    assert "Runs: " + ", ".join(f"`{r}`" for r in runs) in main
    assert "3 compiled cases in every run" in main
    assert ("Run 4 was not used to measure the between-run noise: against run 1 the gate flagged 1 of 3 case "
            "pairs, 1 of them with a change in the generated code.") in main
    table = [line for line in main.splitlines() if line.startswith("|")]
    assert table[0] == HEAD and len(table) == 2 + 3
    rows = {_cells(line)[0]: _cells(line) for line in table[2:]}
    order = [c.id for c in registry.all_cases() if c.id in rows]
    assert [_cells(line)[0] for line in table[2:]] == order and set(order) == {STEADY, MOVES, NO_KERNEL}
    assert len(rows[STEADY]) == len(rows[NO_KERNEL]) == 7  # MOVES: test_two_picks_stay_in_one_cell
    assert rows[STEADY][-1] == "unchanged" and rows[NO_KERNEL][-1] == "unchanged"
    assert rows[NO_KERNEL][4] == "—" and rows[STEADY][3] == "1" and rows[MOVES][3] == "2"
    verdict = rows[MOVES][-1]
    assert verdict.startswith("run 4: regression") and "XBLOCK 512 instead of 1024" in verdict, verdict

    titles = [s.split("\n", 1)[0] for s in sections]
    assert titles == ["Alone against after the others", "Pinned to an earlier run's picks"]
    for section, case in zip(sections, (STEADY, MOVES)):
        lines = [line for line in section.splitlines() if line.startswith("|")]
        assert len(lines) == 3 and _cells(lines[2])[0] == case, section
    assert _cells([line for line in sections[1].splitlines() if line.startswith("|")][2])[4] == "yes"

    written = json.loads(between.read_text())
    assert written["runs"] == [str(r) for r in runs[:3]]
    assert written["cases"][MOVES]["same_code_runs"] == 3


def test_into_writes_the_page_between_a_readmes_markers_and_refuses_a_file_without_them(tmp_path, capsys):
    runs = [_run(tmp_path / f"{k}.json", 230e-6, 1024, 1, seed=k) for k in range(1, 4)]
    begin, end = atomic.section_markers("compiled_aa.py")
    readme, out = tmp_path / "README.md", tmp_path / "aa.md"
    readme.write_text(f"# A study\n\n**Answer**, below:\n\n{begin}\n{end}\n")
    assert compiled_aa.main([*map(str, runs), "--output", str(out), "--into", str(readme)]) == 0
    assert atomic.read_section(readme, "compiled_aa.py") == out.read_text()
    assert readme.read_text().startswith("# A study\n\n**Answer**, below:\n\n")
    bare, between = tmp_path / "bare.md", tmp_path / "between" / "h200.json"
    bare.write_text("no markers\n")
    assert compiled_aa.main([*map(str, runs), "--between", str(between), "--into", str(bare)]) == 2
    assert f"compiled_aa: {bare}: no section for compiled_aa.py" in capsys.readouterr().err
    assert bare.read_text() == "no markers\n" and not between.exists()


def test_the_studys_readme_holds_the_sections_the_method_links_to():
    section = atomic.read_section(ROOT / "studies/compiled-aa/README.md", "compiled_aa.py")
    assert section.startswith("# Compiled cases across fresh processes\n")
    method = (ROOT / "docs/method.md").read_text()
    for heading, anchor in (("Alone against after the others", "alone-against-after-the-others"),
                            ("Pinned to an earlier run's picks", "pinned-to-an-earlier-runs-picks")):
        assert f"\n## {heading}\n" in section and f"../studies/compiled-aa/README.md#{anchor})" in method


def test_two_picks_stay_in_one_cell(tmp_path):
    runs = [_file(tmp_path / f"{k}.json", [_info(MOVES, 230e-6, block, k, seed=k)])
            for k, block in ((1, 1024), (2, 512))]
    md, _ = compiled_aa.table(runs)
    assert len(_cells(md.splitlines()[2])) == len(_cells(HEAD)), md
