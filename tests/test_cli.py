import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlpbench import cli, registry

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv, bad", [
    (["run", "--op", "conv"], f"unknown op 'conv'; valid: {', '.join(registry.OPS)}"),
    (["run", "--variant", "fast"], "unknown variant 'fast'; valid:"),
    (["run", "--dtype", "fp4"], "unknown dtype 'fp4'; valid: fp32, bf16, fp16, fp8"),
    (["run", "--tier", "huge"], "unknown tier 'huge'; valid: quick, standard, full"),
    (["run", "--shape", "t1-x1"], "unknown shape 't1-x1'"),
    (["asv", "--tier", "huge"], "unknown tier 'huge'"),
])
def test_bad_values_exit_2_naming_them(argv, bad, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert bad in err
    assert "Traceback" not in err


def test_unknown_command_exits_2_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "fly"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "invalid choice: 'fly'" in proc.stderr and "Traceback" not in proc.stderr


def test_run_writes_json_and_prints_a_table(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "run", "--tier", "quick", "--op", "gelu_mul", "--variant", "eager",
         "--dtype", "fp32", "--results", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = [f for f in tmp_path.glob("*/*-quick-*.json") if not f.name.endswith(".outcomes.json")]
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    (bench,) = doc["benchmarks"]
    info = bench["extra_info"]
    assert info["case"] == "gelu_mul/eager/fp32/t333-h3000"
    for key in ("op", "variant", "dtype", "shape", "tier", "device", "host_time_s", "flops", "bytes",
                "max_rel_err", "timing_method"):
        assert key in info, key
    assert info["host_time_s"] > 0 and info["bytes"] == 3 * 333 * 3000 * 4
    env = doc["machine_info"]["mlpbench"]
    for key in ("gpu", "driver", "cuda", "torch", "triton", "liger_kernel", "kernels"):
        assert key in env
    assert "| eager | fp32 | t333-h3000 |" in proc.stdout


def test_check_and_report_import_neither_torch_nor_triton(tmp_path):
    """Reading results needs no GPU stack: a box without torch can gate and report."""
    from fixture_builders import device_times, pytest_record, pytest_run

    results = tmp_path / "results"
    medians = {"gelu_mul/eager/bf16/t8192-h3072": 60e-6, "gelu_mul/ours/bf16/t8192-h3072": 36.5e-6}
    device_times(results / "asv", "h200", "a" * 40, 1, medians, seed=1)
    device_times(results / "asv", "h200", "b" * 40, 2, {**medians, "gelu_mul/ours/bf16/t8192-h3072": 36.5e-6 * 1.2},
                 seed=2)
    pytest_run(results / "pytest", "h200", "20990101T000000Z",
               [pytest_record(c, m, bytes=3 * 8192 * 3072 * 2) for c, m in medians.items()],
               ceilings={"copy_bandwidth_Bps": 4e12, "gemm_bf16_flops": 8e14})
    code = f"""
import contextlib, io, sys
from mlpbench import cli
with contextlib.redirect_stdout(io.StringIO()):
    check = cli.main(["check", "--results", {str(results / "asv")!r}, "--base", "aaaa", "--head", "bbbb"])
    report = cli.main(["report", "--results", {str(results)!r}, "--output", {str(tmp_path / "report")!r},
                       "--pages", {str(tmp_path / "pages")!r}])
print(check, report, [m for m in ("torch", "triton") if m in sys.modules])
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check, report, heavy = proc.stdout.split(" ", 2)
    # the planted slowdown of our kernel fails the gate; the report is written
    assert check == "1" and report == "0", proc.stdout + proc.stderr[-3000:]
    assert heavy.strip() == "[]", f"imported {heavy.strip()}"
    assert (tmp_path / "report" / "report.html").is_file() and (tmp_path / "pages" / "h200.md").is_file()


@pytest.mark.slow
def test_run_measures_small_ops_in_one_process_and_writes_one_file(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "run", "--tier", "quick", "--op", "linear", "--op", "silu_mul",
         "--variant", "eager", "--dtype", "fp32", "--results", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "mlpbench: ops linear, silu_mul" in proc.stdout  # few cases: one process (run_suite.op_groups)
    (path,) = [f for f in tmp_path.glob("*/*-quick-*.json") if not f.name.endswith(".outcomes.json")]
    doc = json.loads(path.read_text())
    infos = [b["extra_info"] for b in doc["benchmarks"]]
    assert {(i["op"], i["shard"]) for i in infos} == {("linear", 0), ("silu_mul", 0)}
    (part,) = doc["mlpbench_run"]["parts"]
    assert part["part"] == "ops linear, silu_mul"
    # a process of its own: its interpreter's start and its exit, timed across the two processes
    assert 0 < part["boot_s"] < part["wall_s"] and 0 <= part["end_s"] < part["wall_s"] and "written_at" not in part
    # every case's outcome is in the run's own file
    assert {o["case"] for o in doc["outcomes"]} == {i["case"] for i in infos}
    assert not list(tmp_path.glob("*/.*part*")) and not list(tmp_path.glob("*/.*outcomes*"))  # per-process files gone
