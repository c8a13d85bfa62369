"""What each case computes: inputs, the callable that is timed, its float64 reference, FLOPs and bytes.

A `Workload` is built from a registry `Case`. The reference is always the same computation in
float64 on the same (dtype-rounded) inputs and weights, so a correctness failure means the variant
computed something else, not that the inputs differed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import sources
from .models import GeGLUMLP, gelu_mul_reference
from .registry import Case

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# Relative error ‖out − ref‖ / ‖ref‖ allowed per dtype. fp32 GEMMs accumulate over up to 24576
# terms (≈1e-5 seen); bf16 keeps 8 mantissa bits and rounds every intermediate (≈3e-3 seen);
# fp16 keeps 11. NaN or inf never passes.
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


def _compiled(fn, dynamic: bool = False):
    """torch.compile for one case, specialised to its static shape as in the blog (or dynamic=True).

    Cases share code objects (GeGLUMLP.forward, gelu_mul_reference), and Dynamo keeps its cache per
    code object: without a reset, a second shape would turn into one dynamic-shape graph and, past
    Dynamo's recompile limit (8), later cases would silently run eagerly.
    """
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=dynamic)


def _randn(shape, dtype, device, gen, scale=1.0, requires_grad=False):
    # Drawn on the device, in the case's dtype: a CPU draw of a large shape costs seconds, and of an
    # impossible one would exhaust host memory instead of failing cleanly on the GPU.
    t = torch.randn(shape, generator=gen, dtype=dtype, device=device).mul_(scale)
    return t.requires_grad_(requires_grad)


def _gen(seed: int, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


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
    tol = TOLERANCE[workload.case.dtype]
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


# --- linear -------------------------------------------------------------------------------------

def _linear(case: Case, device: str, dynamic: bool = False) -> Workload:
    t, i, o = (case.shape.as_dict()[k] for k in ("t", "i", "o"))
    dtype = TORCH_DTYPES[case.dtype]
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the device: CPU init of large weights takes seconds
        lin = nn.Linear(i, o, bias=True).to(dtype=dtype).requires_grad_(False)
    fn = _compiled(lin, dynamic) if case.variant == "compiled" else lin
    w64, b64 = lin.weight.double(), lin.bias.double()
    es = torch.finfo(dtype).bits // 8
    return Workload(
        case,
        fn,
        make_inputs=lambda seed: (_randn((t, i), dtype, device, _gen(seed, device)),),
        reference=lambda inp: (F.linear(inp[0].double(), w64, b64),),
        flops=2 * t * i * o + t * o,  # the GEMM, plus the bias add done in its epilogue
        bytes=es * (t * i + i * o + o + t * o),  # x, W, b read once; y written once
        source=f"torch {torch.__version__}" + (" + torch.compile (Inductor)" if case.variant == "compiled" else ""),
    )


# --- mlp ----------------------------------------------------------------------------------------

def _mlp(case: Case, device: str, dynamic: bool = False) -> Workload:
    t, d, h = (case.shape.as_dict()[k] for k in ("t", "d", "h"))
    dtype = TORCH_DTYPES[case.dtype]
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the device: CPU init of large weights takes seconds
        eager = GeGLUMLP(d, h).to(dtype=dtype).requires_grad_(False)
    if case.variant == "eager":
        fn, source = eager, f"torch {torch.__version__}"
    elif case.variant == "compiled":
        fn, source = _compiled(eager, dynamic), f"torch {torch.__version__} + torch.compile (Inductor)"
    elif case.variant == "liger":
        fn, source = sources.liger_mlp(eager, d, h).requires_grad_(False), sources.liger_description()
    elif case.variant == "ours":
        fn, source = sources.ours_mlp(eager, torch.device(device).type), sources.ours_source()
    else:
        raise KeyError(case.variant)
    wg, wu, wd = (getattr(eager, n).weight.double() for n in ("gate_proj", "up_proj", "down_proj"))

    def reference(inp):
        x = inp[0].double()
        return (F.linear(F.gelu(F.linear(x, wg), approximate="tanh") * F.linear(x, wu), wd),)

    es = torch.finfo(dtype).bits // 8
    return Workload(
        case,
        fn,
        make_inputs=lambda seed: (_randn((t, d), dtype, device, _gen(seed, device)),),
        reference=reference,
        flops=3 * 2 * t * d * h,  # three GEMMs; the elementwise step's few FLOPs per element are left out
        # x read, three weights read, y written; the [t, h] intermediates are not counted because a
        # perfectly fused MLP would not need to write them.
        bytes=es * (2 * t * d + 3 * d * h),
        source=source,
    )


# --- gelu_mul and gelu_mul_train ----------------------------------------------------------------

def _gelu_mul_impl(variant: str, dynamic: bool = False):
    if variant == "eager":
        return gelu_mul_reference, f"torch {torch.__version__} (gelu kernel, then mul kernel)"
    if variant == "compiled":
        return _compiled(gelu_mul_reference, dynamic), f"torch {torch.__version__} + torch.compile (Inductor)"
    if variant == "liger":
        return sources.liger_gelu_mul(), sources.liger_description()
    if variant == "ours":
        return sources.ours().gelu_mul, sources.ours_source()
    raise KeyError(variant)


def _gelu_mul_ref64(g, u):
    return F.gelu(g.detach().double(), approximate="tanh") * u.detach().double()


def _gelu_mul(case: Case, device: str, dynamic: bool = False) -> Workload:
    t, h = (case.shape.as_dict()[k] for k in ("t", "h"))
    dtype = TORCH_DTYPES[case.dtype]
    impl, source = _gelu_mul_impl(case.variant, dynamic)
    es = torch.finfo(dtype).bits // 8

    def make_inputs(seed):
        g = _gen(seed, device)
        return _randn((t, h), dtype, device, g, scale=2.0), _randn((t, h), dtype, device, g)

    return Workload(
        case,
        impl,
        make_inputs=make_inputs,
        reference=lambda inp: (_gelu_mul_ref64(*inp),),
        flops=0,  # memory-bound: read as GB/s, not FLOP/s
        bytes=3 * t * h * es,  # gate and up read once, out written once
        source=source,
    )


def _gelu_mul_train(case: Case, device: str, dynamic: bool = False) -> Workload:
    t, h = (case.shape.as_dict()[k] for k in ("t", "h"))
    dtype = TORCH_DTYPES[case.dtype]
    impl, source = _gelu_mul_impl(case.variant, dynamic)
    es = torch.finfo(dtype).bits // 8

    def make_inputs(seed):
        g = _gen(seed, device)
        return (
            _randn((t, h), dtype, device, g, scale=2.0, requires_grad=True),
            _randn((t, h), dtype, device, g, requires_grad=True),
            _randn((t, h), dtype, device, g),
        )

    def fn(gate, up, grad_out):
        out = impl(gate, up)
        d_gate, d_up = torch.autograd.grad(out, (gate, up), grad_out)
        return out, d_gate, d_up

    def reference(inp):
        g = inp[0].detach().double().requires_grad_(True)
        u = inp[1].detach().double().requires_grad_(True)
        out = F.gelu(g, approximate="tanh") * u
        d_gate, d_up = torch.autograd.grad(out, (g, u), inp[2].double())
        return out.detach(), d_gate, d_up

    return Workload(
        case,
        fn,
        make_inputs=make_inputs,
        reference=reference,
        flops=0,
        # forward: gate, up read, out written; backward: grad_out, gate, up read, two grads written
        bytes=8 * t * h * es,
        source=source,
        # Liger's backward writes the gradients into the saved gate/up buffers (in place): after the
        # first timed call the inputs hold gradients. Timing of this memory-bound step does not
        # depend on the values; correctness is checked on fresh inputs before any timing.
        extra={"note": "liger backward overwrites its inputs"} if case.variant == "liger" else {},
    )


BUILDERS: dict[str, Callable[..., Workload]] = {
    "linear": _linear,
    "mlp": _mlp,
    "gelu_mul": _gelu_mul,
    "gelu_mul_train": _gelu_mul_train,
}


def build(case: Case, device: str, *, dynamic: bool = False) -> Workload:
    """The case's workload; `dynamic` asks torch.compile for dynamic shapes (compile-tax probes only)."""
    return BUILDERS[case.op](case, device, dynamic)
