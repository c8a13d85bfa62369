"""The fp8 dtype: e4m3 weights and activations with row-wise scales, bf16 in and out.

One place says how every fp8 variant of ours quantizes, so that they all compute the same thing and
the float64 reference can compute it too (a peer with a rule of its own, torchao, gets a reference by
its rule: `scale_rule`):

- weights: quantized once at setup (outside any timing), per output channel: each row of an
  nn.Linear weight [out, in] gets scale = max(amax of the row, tiny) / 448 (float32, shape [out]),
  and w_q = round-to-nearest e4m3 of w / scale, clamped to ±448;
- activations: quantized per row (per token) the same way, dynamically, inside the timed call; the
  gated MLP quantizes its input x and its intermediate h = act(gate)·up before the down projection;
- GEMMs: torch._scaled_mm with row-wise scales (scale_a [M, 1], scale_b [1, N], float32), output
  bf16; act·mul runs on the bf16 outputs of the gate and up GEMMs.

The float64 reference (`quantized_linear_reference`, `quantized_mlp_reference`) is the same
computation from the dequantized operands: the dequantized weights, and the dequantized per-row
quantization of x and of h, each made in float64 by the same rule. What it leaves out is what
differs between correct implementations: bf16 rounding of the GEMM outputs, of act·mul and of the
result, and the fp32 accumulation order. See `TOLERANCE` for the error those leave.

fp8 runs only where torch._scaled_mm does in e4m3: CUDA GPUs of compute capability 8.9 or newer
(Ada, Hopper). Nothing here imports torch at import time (mlpbench/ops/__init__.py).
"""

from __future__ import annotations

import functools

from . import FP8, Variant

E4M3_MAX = 448.0  # the largest finite float8_e4m3fn
MIN_CAPABILITY = (8, 9)  # torch._scaled_mm's e4m3 GEMMs: Ada (8.9) and Hopper (9.0) and newer
# Relative error ‖out − ref‖ / ‖ref‖ allowed for fp8 cases, the reference making every quantization
# the variants make (above). e4m3 keeps 3 mantissa bits: a step of 2**-3 of the value at worst, so one
# rounding moves a value by at most 2**-4. bf16 keeps 8: a rounding moves a value by at most 2**-9.
# - The gated MLP (TOLERANCE): the variants round gate, up and act·mul to bf16 before quantizing h,
#   the reference does not, and those few bf16 ulps move some of h's elements across an e4m3 rounding
#   boundary, each such element then one e4m3 step from the reference's. The rule: half of one e4m3
#   rounding of every element, 2**-4 / 2 (the error is a norm over many elements, not a worst case),
#   plus bf16's output rounding, 2**-8 (twice 2**-9).
# - The Linear (LINEAR_TOLERANCE): x is quantized from the same bf16 values by the same float32 rule
#   in variant and reference, and nothing is re-quantized after a GEMM, so what separates them is the
#   output's bf16 rounding and the fp32 accumulation order: bf16's own tolerance.
# Both fail a variant that applies a wrong scale or multiplies by the unquantized weights, and pass
# the correct computation with room (tests/test_fp8.py). A variant that skips a quantization is more
# accurate than the reference, not wrong, and the gated MLP's tolerance does not tell it apart.
TOLERANCE = 2**-4 / 2 + 2**-8
LINEAR_TOLERANCE = 1e-2
NO_FP8_PATH = "no FP8 path"  # why a variant has no fp8 cases (registry: it yields none)


@functools.cache
def _cuda_capability():
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(), torch.cuda.get_device_capability()


def unsupported_reason(device: str) -> str | None:
    """Why fp8 cases cannot run on `device`, or None where they can."""
    need = f"fp8 needs a CUDA GPU of compute capability {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer " \
           "(Ada, Hopper: torch._scaled_mm's e4m3 GEMMs)"
    if device != "cuda":
        return f"{need}; this is a {device}"
    found = _cuda_capability()
    if found is None:
        return f"{need}; torch sees no CUDA GPU"
    name, capability = found
    if tuple(capability) < MIN_CAPABILITY:
        return f"{need}; this {name} is {capability[0]}.{capability[1]}"
    return None


def _row_scale(x, scale_dtype=None):
    """float32 [..., 1]: max(row amax, tiny) / 448, divided in float32, or where `scale_dtype` is
    given, in that dtype (torchao's rule: amax / 448 in the input's own dtype, then float32)."""
    import torch

    if scale_dtype is None:
        amax = x.float().abs().amax(dim=-1, keepdim=True)
        return amax.clamp(min=torch.finfo(torch.float32).tiny) / E4M3_MAX
    # rounding is monotonic, so the amax of x rounded to scale_dtype is the rounded amax of x
    scale = (x.abs().amax(dim=-1, keepdim=True).to(scale_dtype) / E4M3_MAX).float()
    return scale.clamp(min=torch.finfo(torch.float32).tiny / E4M3_MAX)


def quantize_rows(x, scale_dtype=None):
    """(x_q, scale): x [..., k] quantized per row to e4m3, scale float32 [..., 1] = max(row amax,
    tiny) / 448, x_q = e4m3(clamp(x / scale, ±448)). The rule every fp8 variant of ours and the
    reference use (a zero row gets the smallest normal float32 over 448 as its scale and quantizes
    to zeros). `scale_dtype`: the scale divided in that dtype instead (see _row_scale), for a peer
    whose rule that is, so that its reference quantizes as it does."""
    import torch

    xf = x.float()
    scale = _row_scale(x, scale_dtype)
    # clamp: x / scale can round past 448, and a CUDA cast of a value beyond e4m3's range gives NaN
    return (xf / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale


def dequantize_rows(x_q, scale):
    """x_q · scale in float64: what a quantized operand stands for."""
    import torch

    return x_q.to(torch.float64) * scale.to(torch.float64)


def quantize_rows_float64(x, scale_dtype=None):
    """The per-row quantization of quantize_rows applied to a float64 tensor, dequantized, in
    float64: the reference's own quantization of an intermediate it computed in float64."""
    import torch

    if scale_dtype is None:
        amax = x.abs().amax(dim=-1, keepdim=True)
        scale = (amax.clamp(min=torch.finfo(torch.float32).tiny) / E4M3_MAX).to(torch.float32)
    else:
        scale = _row_scale(x, scale_dtype)
    q = (x / scale.double()).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return dequantize_rows(q, scale)


def scaled_mm(a_q, a_scale, w_q, w_scale, bias=None):
    """a_q [M, K] e4m3 (row-major) times w_q [N, K] e4m3ᵀ, scaled by a_scale [M, 1] and w_scale [N]
    (float32), in torch._scaled_mm's row-wise mode (its b operand column-major: w_q.t() of the
    row-major weight), bias bf16 [N] or None; out bf16 [M, N]."""
    import torch

    return torch._scaled_mm(a_q, w_q.t(), scale_a=a_scale, scale_b=w_scale[None, :], bias=bias,
                            out_dtype=torch.bfloat16)


def quantized_weight(linear, scale_dtype=None):
    """(w_q [out, in] e4m3, scale [out] float32) of an nn.Linear's weight, per output channel."""
    w_q, scale = quantize_rows(linear.weight.detach(), scale_dtype)
    return w_q.contiguous(), scale.reshape(-1).contiguous()


def _module_classes():
    from torch import nn

    class Fp8Linear(nn.Module):
        """y = x W_qᵀ · scales + b: the eager fp8 Linear, x quantized per row in the call."""

        def __init__(self, linear):
            super().__init__()
            w_q, w_scale = quantized_weight(linear)
            self.register_buffer("w_q", w_q)
            self.register_buffer("w_scale", w_scale)
            self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().bfloat16())
            self.bf16 = (linear,)  # the bf16 module it was quantized from (torchao quantizes it itself)

        def forward(self, x):
            x_q, x_scale = quantize_rows(x)
            return scaled_mm(x_q, x_scale, self.w_q, self.w_scale, self.bias)

    class Fp8GatedMLP(nn.Module):
        """down(act(gate(x))·up(x)) with fp8 GEMMs: x and h quantized per row in the call."""

        def __init__(self, mlp, activation: str, tokens: int):
            super().__init__()
            from ._gated import act_mul

            for name in ("gate", "up", "down"):
                w_q, w_scale = quantized_weight(getattr(mlp, f"{name}_proj"))
                self.register_buffer(f"w_{name}_q", w_q)
                self.register_buffer(f"w_{name}_scale", w_scale)
            self.activation = activation
            self.step = act_mul(activation)
            self.bf16 = (mlp,)
            self.tokens = tokens  # the case's token count: our kernel says which path it takes at it

        def forward(self, x):
            x_q, x_scale = quantize_rows(x)
            gate = scaled_mm(x_q, x_scale, self.w_gate_q, self.w_gate_scale)
            up = scaled_mm(x_q, x_scale, self.w_up_q, self.w_up_scale)
            h_q, h_scale = quantize_rows(self.step(gate, up))
            return scaled_mm(h_q, h_scale, self.w_down_q, self.w_down_scale)

    return Fp8Linear, Fp8GatedMLP


@functools.cache
def modules():
    """(Fp8Linear, Fp8GatedMLP): the eager fp8 modules, made once (they need torch)."""
    return _module_classes()


def dequantized(w_q, w_scale):
    """A quantized weight [out, in] in float64."""
    return dequantize_rows(w_q, w_scale[:, None])


def quantized_linear_reference(x, w_q, w_scale, bias=None, scale_dtype=None):
    """float64 of the fp8 Linear on input x (bf16): x's per-row quantization and the weight,
    dequantized, and the bias."""
    import torch.nn.functional as F

    x_q, x_scale = quantize_rows(x, scale_dtype)
    return F.linear(dequantize_rows(x_q, x_scale), dequantized(w_q, w_scale),
                    None if bias is None else bias.double())


def quantized_mlp_reference(x, module, requantize_h: bool = True, scale_dtype=None):
    """float64 of the fp8 gated MLP on input x (bf16): x's per-row quantization dequantized, the
    dequantized weights, act·mul in float64, and h re-quantized per row (quantize_rows_float64)
    before the down projection as every variant does. `requantize_h=False`: h left in float64 (for
    the tests, which show what the re-quantization is worth). `scale_dtype`: every scale by that
    rule (see _row_scale), the weights quantized by it again from `module`'s bf16 MLP."""
    import torch.nn.functional as F

    if scale_dtype is None:
        weights = {n: (getattr(module, f"w_{n}_q"), getattr(module, f"w_{n}_scale")) for n in ("gate", "up", "down")}
    else:
        (bf16,) = module.bf16
        weights = {n: quantized_weight(getattr(bf16, f"{n}_proj"), scale_dtype) for n in ("gate", "up", "down")}
    x_q, x_scale = quantize_rows(x, scale_dtype)
    x64 = dequantize_rows(x_q, x_scale)
    gate = F.linear(x64, dequantized(*weights["gate"]))
    up = F.linear(x64, dequantized(*weights["up"]))
    h = module.step(gate, up)
    if requantize_h:
        h = quantize_rows_float64(h, scale_dtype)
    return F.linear(h, dequantized(*weights["down"]))


# --- The fp8 cases' workloads -----------------------------------------------------------------

def scale_rule(make):
    """The dtype a variant's make divides its scales in (its `fp8_scale_dtype`, a torch dtype
    name), or None for quantize_rows' float32 rule. A peer that quantizes by its own rule is held
    to a reference that quantizes by that rule: otherwise every element its scales round onto a
    neighbouring e4m3 value would read as error."""
    import torch

    name = getattr(make, "fp8_scale_dtype", None)
    return None if name is None else getattr(torch, name)


def linear_workload(case, device, make):
    """nn.Linear(i, o, bias=True) in fp8 at case's [t, i] bf16 input: the bf16 Linear of the bf16
    case (same seed), its weight quantized per output channel once, x per row in the call."""
    import torch
    from torch import nn

    from .. import workloads as w

    t, i, o = (case.shape.as_dict()[k] for k in ("t", "i", "o"))
    torch.manual_seed(0)
    with torch.device(device):
        lin = nn.Linear(i, o, bias=True).to(dtype=torch.bfloat16).requires_grad_(False)
    base = modules()[0](lin)
    fn, source = make(base)
    rule = scale_rule(make)
    w_q, w_scale = (base.w_q, base.w_scale) if rule is None else quantized_weight(lin, rule)
    return w.Workload(
        case, fn,
        make_inputs=lambda seed: (w.randn((t, i), torch.bfloat16, device, w.generator(seed, device)),),
        reference=lambda inp: (quantized_linear_reference(inp[0], w_q, w_scale, base.bias, rule),),
        flops=2 * t * i * o + t * o,
        # x (bf16) read, W (e4m3) and its scales (float32) and b (bf16) read once, y (bf16) written once
        bytes=2 * t * i + i * o + 4 * o + 2 * o + 2 * t * o,
        source=source,
        tolerance=LINEAR_TOLERANCE,
    )


def mlp_workload(case, device, make, layer_name: str, activation: str):
    """The gated MLP in fp8 at case's [t, d] bf16 input: the bf16 MLP of the bf16 case (same seed),
    its three weights quantized per output channel once, x and h per row in the call."""
    import torch

    from .. import workloads as w
    from ._gated import mlp_class

    t, d, h = (case.shape.as_dict()[k] for k in ("t", "d", "h"))
    torch.manual_seed(0)
    with torch.device(device):
        eager = mlp_class(layer_name, activation)(d, h).to(dtype=torch.bfloat16).requires_grad_(False)
    base = modules()[1](eager, activation, t)
    fn, source = make(base)
    if isinstance(fn, torch.nn.Module):
        fn.requires_grad_(False)
    return w.Workload(
        case, fn,
        make_inputs=lambda seed: (w.randn((t, d), torch.bfloat16, device, w.generator(seed, device)),),
        reference=lambda inp: (quantized_mlp_reference(inp[0], base, scale_dtype=scale_rule(make)),),
        flops=3 * 2 * t * d * h,
        # x read and y written (bf16), three e4m3 weights and their float32 scales read; the [t, h]
        # intermediates are not counted, as for the other dtypes.
        bytes=2 * 2 * t * d + 3 * d * h + 4 * (2 * h + d),
        source=source,
        tolerance=TOLERANCE,
    )


# --- The variants' fp8 paths ---------------------------------------------------------------------

FP8_KERNEL_FUNCTIONS = ("quantize_rows_fp8", "gated_dual_gemm_fp8", "fp8_fallback_reason")


def kernel_reason(repo: str) -> str | None:
    """Why our kernel repository `repo` cannot run the fp8 MLP: the functions it lacks, or None."""
    from .. import environment, sources

    environment.interpret_triton_without_gpu()  # before any kernel module is imported
    kernel = sources.local_kernel(repo)
    missing = [f for f in FP8_KERNEL_FUNCTIONS if not hasattr(kernel, f)]
    if missing:
        return (f"kernels_local/{repo} has no {', '.join(missing)}: its FP8 kernel is not there "
                "(the harness is ready for it)")
    return None


def our_mlp(repo: str):
    """make(base, device) for our fp8 MLP from an Fp8GatedMLP `base`: x quantized by the
    repository's quantize_rows_fp8, gate, up and act·mul in its gated_dual_gemm_fp8, h quantized
    by it again, then torch._scaled_mm for the down projection, with the base's weights."""
    def make(base, device):
        import torch

        from .. import sources

        kernel = sources.local_kernel(repo)
        b = base

        def fp8_mlp(x):
            x_q, x_scale = kernel.quantize_rows_fp8(x)
            h = kernel.gated_dual_gemm_fp8(x_q, x_scale, b.w_gate_q, b.w_gate_scale, b.w_up_q, b.w_up_scale,
                                           b.activation)
            h_q, h_scale = kernel.quantize_rows_fp8(h)
            return scaled_mm(h_q, h_scale, b.w_down_q, b.w_down_scale)

        # Whether the Triton FP8 path is taken at this case's token count goes into the source string
        probe = torch.empty((b.tokens, b.w_gate_q.shape[1]), dtype=torch.float8_e4m3fn, device=b.w_gate_q.device)
        why = kernel.fp8_fallback_reason(probe, b.w_gate_q)
        # The reason names the path that runs instead ("...; computed by ...")
        return fp8_mlp, (f"; FP8 Triton path not taken: {why}" if why else "; FP8 Triton path")

    return make


def torchao_reason() -> str | None:
    """Why torchao's float8 path cannot run here, beyond a missing package (the runner says that):
    an import that fails (a torchao built for another torch), or None."""
    import importlib.util

    if importlib.util.find_spec("torchao") is None:
        return None
    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure to import is the reason
        return f"torchao does not import here: {type(exc).__name__}: {exc}"
    return None


def torchao_make(base, device, **_):
    """torchao's float8 inference path on a copy of the bf16 module the fp8 base was quantized
    from: quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())), as
    torchao documents it, with set_inductor_config=False (it would otherwise change Inductor's
    settings for every later compiled case in the process). Weights per output row, activations per
    row, dynamically, in each Linear's call; run eagerly."""
    import copy

    import torch
    from torch import nn
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    from .. import sources

    (source,) = base.bf16
    model = copy.deepcopy(source)
    if isinstance(model, nn.Linear):
        model = nn.Sequential(model)  # quantize_ swaps the Linears inside a module
    try:
        quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow(), set_inductor_config=False))
    except Exception as exc:  # noqa: BLE001 - torchao says so when it does not support this torch or GPU
        raise RuntimeError(f"torchao's quantize_ failed here (torch {torch.__version__}): "
                           f"{type(exc).__name__}: {exc}") from exc
    return model, f"torchao {sources.version('torchao')} Float8DynamicActivationFloat8WeightConfig(PerRow)"


# torchao's _choose_scale_float8 divides amax by 448 in the tensor's own dtype, bf16 here, where ours
# divides in float32: the scales differ by up to a bf16 rounding, and the elements they move across
# an e4m3 rounding boundary with them (tests/test_fp8.py holds the rule to torchao's own function).
torchao_make.fp8_scale_dtype = "bfloat16"


def torchao() -> Variant:
    """torchao's float8 dynamic-activation, float8-weight inference path (PerRow): fp8 only, an
    optional dependency (pip install -e .[fp8])."""
    return Variant("torchao", "peer", torchao_make,
                   origin="torchao: quantize_ with Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())",
                   requires="torchao", skip_reason=torchao_reason, only_dtypes=(FP8,), fp8=torchao_make)
