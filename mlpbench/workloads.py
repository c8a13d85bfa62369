"""What a case computes, as one object: inputs, the callable that is timed, its float64 reference,
FLOPs and bytes; and the check that gates every timing on that reference.

A `Workload` is built by the case's op (mlpbench/ops/). The reference is always the same
computation in float64 on the same (dtype-rounded) inputs and weights, so a correctness failure
means the variant computed something else, not that the inputs differed.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Callable

import torch

from . import environment
from .ops import FP8
from .registry import OPS, Case

# fp8: the GEMM operands' dtype; an fp8 case's inputs and outputs are bf16 (mlpbench/ops/_fp8.py).
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, FP8: torch.float8_e4m3fn}

# Relative error ‖out − ref‖ / ‖ref‖ allowed per dtype. fp32 GEMMs accumulate over up to 24576
# terms (≈1e-5 seen); bf16 keeps 8 mantissa bits and rounds every intermediate (≈3e-3 seen);
# fp16 keeps 11. fp8 cases state theirs in their Workload (mlpbench/ops/_fp8.py: from e4m3's
# precision and bf16's output rounding, the reference making the same quantizations), so this module
# needs nothing from the ops above it. NaN or inf never passes.
TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 2e-3}


class CorrectnessError(AssertionError):
    """A variant's output did not match the float64 reference; the case must not be timed."""


@dataclass
class Workload:
    case: Case
    fn: Callable  # the timed call: fn(*inputs) -> Tensor or tuple of Tensors
    make_inputs: Callable[[int], tuple]  # seed -> one input set
    reference: Callable[[tuple], tuple]  # float64 outputs for an input set (computed before fn runs)
    flops: int
    bytes: int  # fewest bytes one call must move through device memory
    source: str  # where the implementation came from
    extra: dict = field(default_factory=dict)
    tolerance: float | None = None  # the relative error allowed, when not TOLERANCE[dtype] (see `tolerance`)


def randn(shape, dtype, device, gen, scale=1.0, requires_grad=False):
    # Drawn on the device, in the case's dtype: a CPU draw of a large shape costs seconds, and of an
    # impossible one would exhaust host memory instead of failing cleanly on the GPU.
    t = torch.randn(shape, generator=gen, dtype=dtype, device=device).mul_(scale)
    return t.requires_grad_(requires_grad)


def generator(seed: int, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def element_size(case: Case) -> int:
    return torch.finfo(TORCH_DTYPES[case.dtype]).bits // 8


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def tolerance(workload: Workload) -> float:
    """The relative error `check` allows: the workload's own where its op sets one (a whole model's
    logits, mlpbench/ops/_model.py), else its dtype's."""
    return workload.tolerance if workload.tolerance is not None else TOLERANCE[workload.case.dtype]


def check(workload: Workload, seed: int = 1234) -> float:
    """Run the variant once on fresh inputs and compare with float64. Returns the max relative error.

    This first call is also where torch.compile compiles, so compilation stays out of every timing.
    Raises CorrectnessError when any output is off by more than the dtype's tolerance.
    """
    inputs = workload.make_inputs(seed)
    expected = workload.reference(inputs)  # before fn: some variants overwrite their inputs
    got = _as_tuple(workload.fn(*inputs))
    if len(got) != len(expected):
        raise CorrectnessError(f"{workload.case.id}: {len(got)} outputs, reference has {len(expected)}")
    tol = tolerance(workload)
    worst = 0.0
    for k, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape:
            raise CorrectnessError(f"{workload.case.id}: output {k} has shape {tuple(g.shape)}, expected {tuple(e.shape)}")
        g64 = g.detach().to(torch.float64)
        if not torch.isfinite(g64).all():
            raise CorrectnessError(f"{workload.case.id}: output {k} has NaN or inf")
        denom = e.norm().item() or 1.0
        err = (g64 - e.to(g64.device)).norm().item() / denom
        worst = max(worst, err)
        if not err <= tol:
            raise CorrectnessError(
                f"{workload.case.id}: output {k} relative error {err:.3g} > tolerance {tol:g} for {workload.case.dtype}"
            )
    return worst


def build(case: Case, device: str, **options) -> Workload:
    """The case's workload, built by its op; `options` go to the variant (`dynamic=True`: compile probes)."""
    # Kernel modules are imported only here, while a case is built: Triton's interpreter goes on first.
    environment.interpret_triton_without_gpu()
    op = OPS[case.op]
    variant = op.variant(case.variant)
    make = variant.maker(case.dtype)  # its fp8 path for fp8 cases (Variant.fp8)
    # wraps: what the variant's make declares of itself (an fp8 peer's scale rule) reaches the op's build
    return op.build(case, device, functools.wraps(make)(lambda base: make(base, device, **options)))
