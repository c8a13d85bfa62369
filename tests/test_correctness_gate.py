"""The float64 gate: wrong results fail and are never timed; right ones pass with their error."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from mlpbench import registry, runner, workloads

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["pytester"]


def _case(case_id):
    return registry.case_by_id(case_id)


@pytest.mark.parametrize("case_id", [
    "gelu_mul/eager/fp32/t333-h3000",
    "gelu_mul/eager/bf16/t333-h3000",
    "gelu_mul_train/eager/fp32/t333-h3000",
    "linear/eager/fp16/t1024-i32-o64",
    "mlp/eager/bf16/t64-d128-h512",
])
def test_eager_cases_match_float64(case_id):
    case = _case(case_id)
    err = workloads.check(workloads.build(case, "cpu"))
    assert 0 <= err <= workloads.TOLERANCE[case.dtype]


def _off_by_one_percent(gate, up):
    return torch.nn.functional.gelu(gate, approximate="tanh") * up * 1.01


def _timing(fn):
    """workloads.build with the timed callable replaced by `fn`: a variant that computes something else."""
    real = workloads.build

    def build(case, device, **options):
        wl = real(case, device, **options)
        wl.fn, wl.source = fn, "broken"
        return wl

    return build


def test_a_wrong_variant_fails_the_gate(monkeypatch):
    monkeypatch.setattr(workloads, "build", _timing(_off_by_one_percent))
    with pytest.raises(workloads.CorrectnessError, match=r"relative error 0\.01.* > tolerance"):
        runner.prepare(_case("gelu_mul/eager/fp32/t333-h3000"), "cpu")


def test_nan_never_passes(monkeypatch):
    def with_nan(gate, up):
        out = torch.nn.functional.gelu(gate, approximate="tanh") * up
        out.view(-1)[7] = float("nan")
        return out

    monkeypatch.setattr(workloads, "build", _timing(with_nan))
    with pytest.raises(workloads.CorrectnessError, match="NaN"):
        runner.prepare(_case("gelu_mul/eager/bf16/t333-h3000"), "cpu")


def test_wrong_variant_is_reported_failed_and_not_timed(pytester):
    """Through the real benchmark suite: the case fails and no timing record is written."""
    shutil.copy(ROOT / "benchmarks" / "test_cases.py", pytester.path / "test_cases.py")
    pytester.makeconftest("""
pytest_plugins = ["mlpbench.pytest_plugin"]
import torch
from mlpbench import workloads

_real = workloads.build

def _broken(case, device, **options):
    wl = _real(case, device, **options)
    wl.fn = lambda g, u: torch.nn.functional.gelu(g, approximate="tanh") * u + 0.5
    return wl

workloads.build = _broken
""")
    out = pytester.path / "bench.json"
    outcomes = pytester.path / "outcomes.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--tier=quick", "--op=gelu_mul", "--variant=eager", "--dtype=fp32",
        f"--benchmark-json={out}", f"--outcomes={outcomes}",
    )
    (entry,) = json.loads(outcomes.read_text())["outcomes"]
    assert entry["outcome"] == "failed" and "CorrectnessError" in entry["reason"]
    assert "relative error" in entry["reason"]
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CorrectnessError*relative error*"])
    # --benchmark-json opens its file when options are parsed; with nothing timed it stays empty.
    text = out.read_text() if out.exists() else ""
    assert text == "" or json.loads(text)["benchmarks"] == []
    result.stderr.fnmatch_lines(["*no benchmarks have been run*"])


@pytest.mark.parametrize("variant", ["eager", "dualgemm"])
def test_the_training_step_is_gated_on_every_gradient(variant):
    """mlp_train's outputs are y and the gradients of x and of each weight (the dual GEMM's gate and up
    gradients taken from its interleaved parameter's rows); each is held to float64, so a weight
    gradient 1% off fails the case, named by its output."""
    case = _case(f"mlp_train/{variant}/fp32/t64-d128-h512")
    wl = workloads.build(case, "cpu")
    assert workloads.check(wl) <= workloads.tolerance(wl)
    right = wl.fn

    def gate_gradient_off(x, grad_out):
        out = list(right(x, grad_out))
        assert len(out) == 5 and out[2].shape == (512, 128)  # y, dx, d gate, d up, d down
        out[2] = out[2] * 1.01
        return tuple(out)

    wl.fn = gate_gradient_off
    with pytest.raises(workloads.CorrectnessError, match=r"output 2 relative error 0\.01"):
        workloads.check(wl)
