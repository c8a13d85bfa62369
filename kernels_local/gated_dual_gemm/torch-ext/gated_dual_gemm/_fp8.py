"""FP8 (e4m3) inference path of the gated dual GEMM, for Hopper: row-wise quantization and the
gate|up kernel on float8 operands.

    x_q, x_scale = quantize_rows_fp8(x)                 x: [..., k] -> x_q e4m3 [..., k], x_scale float32 [..., 1]
    h = gated_dual_gemm_fp8(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation)
      = act(acc_g · xs · wgs) · (acc_u · xs · wus)      acc_* = x_q · w_*_qᵀ in float32; h bfloat16 [t, hidden]

The scale rule (quantize_rows_fp8, and quantize_rows_fp8_reference, the same rule in PyTorch):

    scale = max(amax(|row|), FP8_TINY) / 448        (float32, IEEE division)
    x_q   = clamp(x / scale, -448, 448) -> e4m3     (IEEE division, rounded to nearest, ties to even)

448 is e4m3's largest finite value (torch.float8_e4m3fn has no infinity); FP8_TINY (1e-12) keeps an
all-zero row's scale a normal float32 and its x_q zero.  Weights take the same rule per output row
(quantize_rows_fp8(w) gives w_q [hidden, dim] and a [hidden, 1] scale; pass scale.view(-1) or as is).

_gate_up_fp8_kernel is the bf16 two-weight kernel (_dual_gemm._gate_up_kernel) on float8e4nv tiles:
x's tile and both weights' tiles (nn.Linear layout [hidden, dim], row-major, so each weight tile is
a K-major B operand, what Hopper's FP8 wgmma requires) come through tensor descriptors (TMA) where
rows are 16-byte aligned, else masked pointer loads; two float32 accumulators take tl.dot of the
float8 tiles; the epilogue applies x's row scales and the weights' column scales, then act·mul in
float32, and stores bfloat16.  Triton's FP8 dot on sm_90 accumulates with Hopper's fast (reduced
precision) FP8 accumulation by default (max_num_imprecise_acc = 2**30): see TOLERANCE in the README.

fp8_fallback_reason says why the kernel is not taken (None when it is); gated_dual_gemm_fp8 then
computes the same thing with torch._scaled_mm (row-wise scales, bf16 out) twice and act·mul in
PyTorch, or where that cannot run (a CPU, dim or hidden not multiples of 16) from operands
dequantized to float32.

Inference only: no autograd, no torch.library op (under torch.compile, call it from a function
wrapped in torch.compiler.disable).
"""

import functools
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from . import _dual_gemm
from ._dual_gemm import ACTIVATIONS, TensorDescriptor, _act, _aligned, _check_config, _on_device, _rows, _sm_count, _tile
from ._fast_launch import launcher, plain, plan_key, remember, token

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0  # e4m3's largest finite value
FP8_TINY = 1e-12  # the smallest amax a scale is made from: an all-zero row gets FP8_TINY / 448
_FLOAT8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                if hasattr(torch, n))
_QUANTIZE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# --------------------------------------------------------------------------- #
# Launch configuration (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, persistent), as
# CONFIGS; keyed by tokens: "decode" up to FP8_DECODE_TOKENS rows, "prefill" above.
# --------------------------------------------------------------------------- #
# BLOCK_K 128: a 128-byte row of e4m3 per tile row (the widest shared-memory swizzle) and four
# wgmma K steps of 32. prefill: two 128 × 128 float32 accumulators are 128 registers per thread at
# 8 warps, as in bf16's CONFIGS; three stages of x (128 × 128 B) and both weight tiles take 144 KiB
# of shared memory, h's 128 × 128 bf16 tile for the TMA store 32 KiB more. decode: 64-row tiles, one
# warpgroup, four stages (160 KiB): few tokens leave most of a 128-row tile empty. Not yet chosen
# by a sweep: run `scripts/dual_gemm_sweep.py --fp8` on the GPU and put its `best` configurations here.
CONFIGS_FP8 = {
    "decode": (64, 128, 128, 8, 4, 4, 0),
    "prefill": (128, 128, 128, 8, 8, 3, 2),
}
FP8_DECODE_TOKENS = 64


def fp8_config(tokens: int) -> tuple:
    """The CONFIGS_FP8 entry for `tokens` rows."""
    return CONFIGS_FP8["decode" if tokens <= FP8_DECODE_TOKENS else "prefill"]


def _check_fp8_config(config) -> tuple:
    _check_config(config)
    if config[2] < 32:
        raise ValueError(f"_config BLOCK_K={config[2]}: an FP8 dot needs K tiles of at least 32")
    return config


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """x as [rows, k] with a contiguous last dimension (_rows), rows of length 0 included."""
    if x.shape[-1] == 0:
        return x.new_empty((math.prod(x.shape[:-1]), 0))
    return _rows(x)


# --------------------------------------------------------------------------- #
# Row quantization
# --------------------------------------------------------------------------- #
@triton.jit
def _e4m3_grid(y):
    """y (float32, |y| <= 448) rounded to the nearest e4m3 value, ties to even, still in float32.
    Used under the CPU interpreter, whose float32 -> float8 cast mis-rounds values that carry into
    the next power of two (31.6 -> 16); casting an exact e4m3 value is exact there. Normal range
    (|y| >= 2^-6): keep 3 of float32's 23 mantissa bits, rounding in the integer domain (a carry
    goes into the exponent); below, multiples of 2^-9 by adding and subtracting 2^14, whose ulp
    that is."""
    bits = y.to(tl.uint32, bitcast=True)
    mag = bits & 0x7FFFFFFF
    sign = bits ^ mag
    normal = ((mag + 0x7FFFF + ((mag >> 20) & 1)) >> 20) << 20
    a = mag.to(tl.float32, bitcast=True)
    small = (a + 16384.0) - 16384.0
    r = tl.where(a < 0.015625, small, normal.to(tl.float32, bitcast=True))
    return (r.to(tl.uint32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit
def _to_e4m3(v, scale, ROUND_FP32: tl.constexpr):
    y = tl.math.div_rn(v, scale[:, None])  # IEEE division, as PyTorch's (Triton's `/` is approximate on a GPU)
    y = tl.minimum(tl.maximum(y, -448.0), 448.0)
    if ROUND_FP32:
        y = _e4m3_grid(y)
    return y.to(tl.float8e4nv)  # round to nearest even (cvt.rn.satfinite on sm_89+)


@triton.jit
def _quantize_rows_kernel(x, q, s, rows, k, stride_x, stride_q,
                          TINY: tl.constexpr, BLOCK_K: tl.constexpr, ROWS: tl.constexpr, ONE_PASS: tl.constexpr,
                          ROUND_FP32: tl.constexpr):
    """ROWS rows per program. ONE_PASS: a row fits one BLOCK_K block, loaded once; else two loops
    over BLOCK_K chunks, the row's amax first, then the quantized values (x read twice)."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    r_in = r < rows
    cols = tl.arange(0, BLOCK_K)
    xr = x + r[:, None] * stride_x
    qr = q + r[:, None] * stride_q
    if ONE_PASS:
        mask = r_in[:, None] & (cols[None, :] < k)
        v = tl.load(xr + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.max(tl.abs(v), axis=1)
        scale = tl.math.div_rn(tl.maximum(amax, TINY), 448.0)
        tl.store(s + r, scale, mask=r_in)
        tl.store(qr + cols[None, :], _to_e4m3(v, scale, ROUND_FP32), mask=mask)
    else:
        amax = tl.zeros((ROWS,), dtype=tl.float32)
        for start in range(0, k, BLOCK_K):
            c = start + cols
            mask = r_in[:, None] & (c[None, :] < k)
            v = tl.load(xr + c[None, :], mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.max(tl.abs(v), axis=1))
        scale = tl.math.div_rn(tl.maximum(amax, TINY), 448.0)
        tl.store(s + r, scale, mask=r_in)
        for start in range(0, k, BLOCK_K):
            c = start + cols
            mask = r_in[:, None] & (c[None, :] < k)
            v = tl.load(xr + c[None, :], mask=mask, other=0.0).to(tl.float32)
            tl.store(qr + c[None, :], _to_e4m3(v, scale, ROUND_FP32), mask=mask)


MAX_ONE_PASS = 16384  # longest row loaded once (16 warps: 32 float32 values per thread)


def _quantize_plan(rows: int, k: int):
    """(grid, constexprs, num_warps): about 4096 elements per program, whole rows when they fit."""
    block = triton.next_power_of_2(k)
    one_pass = block <= MAX_ONE_PASS
    if not one_pass:
        block = 8192
    per = max(1, min(4096 // block, triton.next_power_of_2(rows)))
    elements = per * block
    warps = 4 if elements <= 2048 else 8 if elements <= 8192 else 16
    constexprs = dict(TINY=FP8_TINY, BLOCK_K=block, ROWS=per, ONE_PASS=one_pass, ROUND_FP32=_dual_gemm._INTERPRETED)
    return (triton.cdiv(rows, per),), constexprs, warps


def quantize_rows_fp8_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """quantize_rows_fp8's rule in PyTorch (float32 arithmetic): what the tests hold the kernel to,
    and what quantize_rows_fp8 runs where the kernel cannot (see _quantize_reason)."""
    xf = x.float()
    if x.shape[-1] == 0:
        amax = xf.new_zeros((*x.shape[:-1], 1))
    else:
        amax = xf.abs().amax(dim=-1, keepdim=True)
    # Divided by a tensor, not a Python number: on CUDA PyTorch divides by a scalar as a product
    # with its reciprocal, which is not always the IEEE quotient the kernel computes.
    scale = amax.clamp_min(FP8_TINY) / torch.full_like(amax, FP8_MAX)
    return (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def _device_capability(device: torch.device) -> tuple[int, int]:
    return _capability(device.index if device.index is not None else torch.cuda.current_device())


def _quantize_reason(x: torch.Tensor):
    """Why quantize_rows_fp8 runs the PyTorch rule instead of its kernel, or None."""
    if x.device.type == "cpu" and _dual_gemm._INTERPRETED:
        return None
    if x.device.type != "cuda":
        return f"x is on {x.device}: the kernel runs on a CUDA GPU (or under TRITON_INTERPRET=1 on a CPU)"
    if _device_capability(x.device) < (8, 9):
        return "compute capability {}.{} < 8.9: no float8 conversion instructions".format(*_device_capability(x.device))
    return None


# Eager calls are planned per key, as the bf16 kernel's are (_dual_gemm._planned): checks, the
# fallback decision and the launch configuration once, then each call allocates and launches only.
_QUANTIZE_PLANS = {}
_FP8_PLANS = {}


def quantize_rows_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_q, scale): x [..., k] (float32, bfloat16 or float16) quantized per row to e4m3, one Triton
    kernel. x_q: torch.float8_e4m3fn, x's shape; scale: float32 [..., 1], x ≈ x_q · scale.

    scale = max(amax |row|, FP8_TINY) / 448, x_q = clamp(x / scale, -448, 448) rounded to nearest
    (ties to even). Rows of any length; a last dimension that is not contiguous is copied once."""
    if plain((x,), _dual_gemm._INTERPRETED):
        key = plan_key((x,))
        plan = _QUANTIZE_PLANS.get(key)
        if plan is None:
            plan = _make_quantize_plan(x)
            remember(_QUANTIZE_PLANS, key, plan)
        if plan:
            plan_id, grid, scalars, constexprs, warps, scale_shape = plan
            q = x.new_empty(x.shape, dtype=FP8_DTYPE)
            scale = x.new_empty(scale_shape, dtype=torch.float32)
            with _on_device(x.device):
                launcher(_quantize_rows_kernel).planned(plan_id, grid, (x, q, scale), scalars, constexprs,
                                                        num_warps=warps)
            return q, scale
    return _quantize_rows(x)


def _check_quantize(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize_rows_fp8: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _QUANTIZE_DTYPES:
        raise TypeError(f"quantize_rows_fp8: unsupported dtype {x.dtype}; supported: torch.float32, torch.bfloat16, "
                        "torch.float16")
    if x.dim() < 1:
        raise ValueError("quantize_rows_fp8: x must have at least one dimension (the rows' length)")


def _make_quantize_plan(x: torch.Tensor):
    """What quantize_rows_fp8 launches for x's key (shape, strides, dtype, device), after its checks;
    False where the general path runs (no rows, the PyTorch rule, rows that _rows had to copy)."""
    _check_quantize(x)
    k = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    if rows == 0 or k == 0 or _quantize_reason(x) is not None:
        return False
    x2 = _rows(x)
    if x2.data_ptr() != x.data_ptr():  # rows that _rows had to copy
        return False
    grid, constexprs, warps = _quantize_plan(rows, k)
    return token(), grid, (rows, k, x2.stride(0), k), constexprs, warps, (*x.shape[:-1], 1)


def _quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """quantize_rows_fp8's general path: every check and launch decision on each call."""
    _check_quantize(x)
    k = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    if rows == 0 or k == 0 or _quantize_reason(x) is not None:
        return quantize_rows_fp8_reference(x)
    x2 = _rows(x)
    q = torch.empty(x.shape, dtype=FP8_DTYPE, device=x.device)
    scale = torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
    grid, constexprs, warps = _quantize_plan(rows, k)
    with _on_device(x.device):
        launcher(_quantize_rows_kernel)(grid, (x2, q, scale, rows, k, x2.stride(0), k), constexprs,
                                        num_warps=warps)
    return q, scale


# --------------------------------------------------------------------------- #
# The dual GEMM on float8 operands
# --------------------------------------------------------------------------- #
@triton.jit
def _gate_up_fp8_kernel(
    x, wg, wu, out,  # tensor descriptors (TMA) or pointers; x [M, K], wg and wu [N, K] e4m3; out [M, N] bf16
    xs, wgs, wus,  # float32 scales: x's per row (stride stride_xs), the weights' per output column
    M, N, K,
    stride_xm, stride_wg, stride_wu, stride_om, stride_xs,
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS: tl.constexpr,
    FLATTEN: tl.constexpr,
    TMA: tl.constexpr,  # loads through descriptors (x, wg, wu)
    TMA_OUT: tl.constexpr,  # with TMA: h stored through a descriptor, else masked pointer stores
):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _tile(tile, tiles_m, per_group, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        rm = (off_m + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (off_n + tl.arange(0, BLOCK_N)).to(tl.int64)
        acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(k_steps):
            off_k = step * BLOCK_K
            if TMA:
                a = x.load([off_m, off_k])  # out-of-bounds rows and columns read as zeros
                bg = wg.load([off_n, off_k])  # BLOCK_N × BLOCK_K, K contiguous: bg.T is a K-major B operand
                bu = wu.load([off_n, off_k])
            else:
                rk = off_k + tl.arange(0, BLOCK_K)
                k_in = rk[None, :] < K
                a = tl.load(x + rm[:, None] * stride_xm + rk[None, :], mask=(rm[:, None] < M) & k_in, other=0.0)
                bg = tl.load(wg + rn[:, None] * stride_wg + rk[None, :], mask=(rn[:, None] < N) & k_in, other=0.0)
                bu = tl.load(wu + rn[:, None] * stride_wu + rk[None, :], mask=(rn[:, None] < N) & k_in, other=0.0)
            acc_g = tl.dot(a, bg.T, acc_g)
            acc_u = tl.dot(a, bu.T, acc_u)
        s_x = tl.load(xs + rm * stride_xs, mask=rm < M, other=0.0)
        s_g = tl.load(wgs + rn, mask=rn < N, other=0.0)
        s_u = tl.load(wus + rn, mask=rn < N, other=0.0)
        g = acc_g * s_x[:, None] * s_g[None, :]
        u = acc_u * s_x[:, None] * s_u[None, :]
        h = _act(g, ACT) * u  # float32, rounded once to bf16 on store
        if TMA_OUT:
            out.store([off_m, off_n], h.to(out.dtype))
        else:
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            tl.store(out + rm[:, None] * stride_om + rn[None, :], h.to(out.dtype.element_ty), mask=mask)


def _fp8_reason(x2: torch.Tensor, w_gate_q: torch.Tensor, w_up_q: torch.Tensor):
    """Why the Triton kernel is not taken for these operands (valid ones: see _check_fp8), or None."""
    device = x2.device
    if device.type == "cpu" and _dual_gemm._INTERPRETED:
        pass  # the kernel runs in Triton's interpreter (the tests)
    elif device.type != "cuda":
        return f"no CUDA: x_q is on {device} (the kernel runs on a CUDA GPU, or under TRITON_INTERPRET=1 on a CPU)"
    else:
        cap = _device_capability(device)
        if cap < (8, 9):
            return "compute capability {}.{} < 8.9: no FP8 tensor cores".format(*cap)
        if cap[0] != 9:
            return ("compute capability {}.{}: the Triton FP8 kernel is written, tuned and tested for Hopper (9.x) "
                    "only".format(*cap))
    for name, t in (("x_q", x2), ("w_gate_q", w_gate_q), ("w_up_q", w_up_q)):
        if t.dtype != FP8_DTYPE:
            return f"{name}.dtype={t.dtype}: the kernel takes torch.float8_e4m3fn"
    k = w_gate_q.shape[1]
    if k % 16:
        return (f"dim={k} is not a multiple of 16: rows of float8 are not 16-byte aligned, which tensor "
                "descriptors (TMA) and torch._scaled_mm need")
    for name, w in (("w_gate_q", w_gate_q), ("w_up_q", w_up_q)):
        if w.stride(-1) != 1 and w.shape[-1] > 1:
            return (f"{name} has strides {tuple(w.stride())}: the kernel reads row-major [hidden, dim] weights "
                    "(nn.Linear's layout)")
    return None


_SCALED_MM_FAILED = set()  # (device, x dtype, w dtype) where torch._scaled_mm raised: dequantize there


def _scaled_mm_key(x2, w):
    return x2.device, x2.dtype, w.dtype


def _scaled_mm_runs(x2, w_gate_q, w_up_q) -> bool:
    """Whether the fallback can try torch._scaled_mm: CUDA, sm_89+, float8 operands (not e5m2 ×
    e5m2), dim and hidden multiples of 16, row-major weights (w.t() column-major, as it wants)."""
    if x2.device.type != "cuda" or not hasattr(torch, "_scaled_mm") or _device_capability(x2.device) < (8, 9):
        return False
    if _scaled_mm_key(x2, w_gate_q) in _SCALED_MM_FAILED or w_up_q.dtype != w_gate_q.dtype:
        return False
    if x2.dtype == w_gate_q.dtype == torch.float8_e5m2:
        return False
    n, k = w_gate_q.shape
    return k % 16 == 0 and n % 16 == 0 and w_gate_q.is_contiguous() and w_up_q.is_contiguous()


def _fallback_path(x2, w_gate_q, w_up_q) -> str:
    return ("torch._scaled_mm (row-wise scales) and act·mul in PyTorch" if _scaled_mm_runs(x2, w_gate_q, w_up_q)
            else "float32 dequantization")


def _act_mul_torch(g: torch.Tensor, u: torch.Tensor, act: int) -> torch.Tensor:
    g = g.float()
    a = F.gelu(g, approximate="tanh") if act == ACTIVATIONS["gelu_tanh"] else F.silu(g)
    return (a * u.float()).to(torch.bfloat16)


def _fallback(x2, xs, wg, wgs, wu, wus, act: int) -> torch.Tensor:
    """h [m, n] bf16 without the kernel: torch._scaled_mm twice where it runs, else dequantized float32."""
    if _scaled_mm_runs(x2, wg, wu):
        x2 = x2.contiguous()
        scale_a = xs.reshape(-1, 1).contiguous()
        try:
            g = torch._scaled_mm(x2, wg.t(), scale_a=scale_a, scale_b=wgs.reshape(1, -1).contiguous(),
                                 out_dtype=torch.bfloat16)
            u = torch._scaled_mm(x2, wu.t(), scale_a=scale_a, scale_b=wus.reshape(1, -1).contiguous(),
                                 out_dtype=torch.bfloat16)
            return _act_mul_torch(g, u, act)
        except torch.OutOfMemoryError:
            raise
        except RuntimeError:  # this build or GPU has no row-wise scaled GEMM for these dtypes
            _SCALED_MM_FAILED.add(_scaled_mm_key(x2, wg))
    xf = x2.float() * xs.reshape(-1, 1)
    g = xf @ (wg.float() * wgs.reshape(-1, 1)).T
    u = xf @ (wu.float() * wus.reshape(-1, 1)).T
    return _act_mul_torch(g, u, act)


def _check_fp8(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation) -> None:
    f = "gated_dual_gemm_fp8"
    named = (("x_q", x_q), ("x_scale", x_scale), ("w_gate_q", w_gate_q), ("w_gate_scale", w_gate_scale),
             ("w_up_q", w_up_q), ("w_up_scale", w_up_scale))
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{f}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device != x_q.device:
            raise ValueError(f"{f}: {name}.device={t.device} must match x_q.device={x_q.device}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{f}: activation={activation!r}; valid: {', '.join(map(repr, ACTIVATIONS))}")
    for name, t in (("x_q", x_q), ("w_gate_q", w_gate_q), ("w_up_q", w_up_q)):
        if t.dtype not in _FLOAT8:
            raise TypeError(f"{f}: {name}.dtype={t.dtype}: a float8 tensor is expected (torch.float8_e4m3fn, "
                            "from quantize_rows_fp8)")
    for name, t in (("x_scale", x_scale), ("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if t.dtype != torch.float32:
            raise TypeError(f"{f}: {name}.dtype={t.dtype} must be torch.float32")
    if w_gate_q.dim() != 2:
        raise ValueError(f"{f}: w_gate_q must be 2-D [hidden, dim], got shape {tuple(w_gate_q.shape)}")
    if w_up_q.shape != w_gate_q.shape:
        raise ValueError(f"{f}: w_up_q.shape={tuple(w_up_q.shape)} must match w_gate_q.shape={tuple(w_gate_q.shape)}")
    if x_q.dim() < 1 or x_q.shape[-1] != w_gate_q.shape[1]:
        raise ValueError(f"{f}: x_q.shape={tuple(x_q.shape)}: its last dimension must be w_gate_q.shape[1]="
                         f"{w_gate_q.shape[1]}")
    lead = tuple(x_q.shape[:-1])
    if tuple(x_scale.shape) not in ((*lead, 1), lead):
        raise ValueError(f"{f}: x_scale.shape={tuple(x_scale.shape)} must be {(*lead, 1)} (one scale per row of x_q)")
    n = w_gate_q.shape[0]
    for name, t in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if tuple(t.shape) not in ((n,), (n, 1)):
            raise ValueError(f"{f}: {name}.shape={tuple(t.shape)} must be ({n},) (one scale per output row)")


def fp8_fallback_reason(x_q: torch.Tensor, w_gate_q: torch.Tensor, w_up_q: torch.Tensor | None = None):
    """Why gated_dual_gemm_fp8 does not run its Triton kernel for these operands, and what it runs
    instead; None when the kernel runs. w_up_q defaults to w_gate_q (they share shape and layout)."""
    w_up_q = w_gate_q if w_up_q is None else w_up_q
    for name, t in (("x_q", x_q), ("w_gate_q", w_gate_q), ("w_up_q", w_up_q)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"fp8_fallback_reason: {name} must be a torch.Tensor, got {type(t).__name__}")
    if w_gate_q.dim() != 2 or x_q.dim() < 1 or x_q.shape[-1] != w_gate_q.shape[1]:
        raise ValueError(f"fp8_fallback_reason: x_q.shape={tuple(x_q.shape)} and w_gate_q.shape="
                         f"{tuple(w_gate_q.shape)} are not [..., dim] and [hidden, dim]")
    x2 = _as_rows(x_q)
    reason = _fp8_reason(x2, w_gate_q, w_up_q)
    return None if reason is None else f"{reason}; computed by {_fallback_path(x2, w_gate_q, w_up_q)}"


def _fp8_launch_plan(x2, wg, wu, act: int, config, use_tma):
    """((programs,), scalars, constexprs, options, blocks) of _gate_up_fp8_kernel for h [m, n]
    (allocated contiguous) from x2 [m, k]: blocks are the descriptors' (x, weights, h; h's None for
    pointer stores), or None for pointer loads."""
    bm, bn, bk, group, warps, stages, persistent = config
    m, k = x2.shape
    n = wg.shape[0]
    can_tma = (TensorDescriptor is not None and x2.is_cuda and not _dual_gemm._INTERPRETED
               and _device_capability(x2.device)[0] >= 9)
    aligned = all(_aligned(t) for t in (x2, wg, wu))
    tma = (can_tma and aligned) if use_tma is None else use_tma
    if tma and not aligned:
        raise ValueError("gated_dual_gemm_fp8: tensor descriptors need 16-byte aligned addresses and row strides "
                         f"(dim={k}); use pointer loads (_tma=False or None)")
    tma_out = tma and (n * 2) % 16 == 0  # h: bfloat16, contiguous
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    sms = _sm_count(x2.device.index if x2.device.index is not None else torch.cuda.current_device()) \
        if x2.is_cuda else 4  # under the interpreter, 4 "SMs": persistent programs still walk several tiles
    programs = min(tiles, sms) if persistent else tiles
    scalars = (m, n, k, x2.stride(0), wg.stride(0), wu.stride(0), n)
    constexprs = dict(ACT=act, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, PROGRAMS=programs,
                      FLATTEN=persistent == 1, TMA=tma, TMA_OUT=tma_out)
    blocks = ([bm, bk], [bn, bk], [bm, bn] if tma_out else None) if tma else None
    return (programs,), scalars, constexprs, {"num_warps": warps, "num_stages": stages}, blocks


def _fp8_operands(x, x_shape, x_stride, wg, wu, out, blocks) -> tuple:
    """x (read as x_shape [m, k] with row stride x_stride), the weights and h, or their descriptors."""
    if blocks is None:
        return x, wg, wu, out
    x_block, w_block, out_block = blocks
    return (TensorDescriptor(x, x_shape, [x_stride, 1], x_block),
            TensorDescriptor(wg, list(wg.shape), [wg.stride(0), 1], w_block),
            TensorDescriptor(wu, list(wu.shape), [wu.stride(0), 1], w_block),
            out if out_block is None else TensorDescriptor(out, list(out.shape), [out.shape[1], 1], out_block))


def _launch_fp8(x2, xs, wg, wgs, wu, wus, out, act: int, config, use_tma) -> None:
    grid, scalars, constexprs, options, blocks = _fp8_launch_plan(x2, wg, wu, act, config, use_tma)
    args = (*_fp8_operands(x2, list(x2.shape), x2.stride(0), wg, wu, out, blocks), xs, wgs, wus, *scalars,
            xs.stride(0))
    with _on_device(x2.device):
        launcher(_gate_up_fp8_kernel)(grid, args, constexprs, **options)


def _make_fp8_plan(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation: str):
    """What gated_dual_gemm_fp8 launches for this key, after its checks; False where the general
    path runs (nothing to compute, the fallback, rows or scales that need a copy)."""
    _check_fp8(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation)
    n, k = w_gate_q.shape
    x2 = _as_rows(x_q)
    m = x2.shape[0]
    if m == 0 or n == 0 or k == 0 or x2.data_ptr() != x_q.data_ptr():
        return False
    xs = x_scale.reshape(-1)
    scales = (xs, w_gate_scale.reshape(-1), w_up_scale.reshape(-1))
    if _fp8_reason(x2, w_gate_q, w_up_q) is not None or any(
            s.data_ptr() != t.data_ptr() for s, t in zip(scales, (x_scale, w_gate_scale, w_up_scale))) or \
            not (scales[1].is_contiguous() and scales[2].is_contiguous()):
        return False
    grid, scalars, constexprs, options, blocks = _fp8_launch_plan(x2, w_gate_q, w_up_q, ACTIVATIONS[activation],
                                                                  fp8_config(m), None)
    return (token(), (*x_q.shape[:-1], n), (m, n), [m, k], x2.stride(0), grid, (*scalars, xs.stride(0)),
            constexprs, options, blocks)


def _fp8_planned(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation: str):
    """h from the plan of this call's key, or None where the general path must run."""
    key = plan_key((x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale), activation)
    plan = _FP8_PLANS.get(key)
    if plan is None:
        plan = _make_fp8_plan(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation)
        remember(_FP8_PLANS, key, plan)
    if not plan:
        return None
    plan_id, out_shape, out2_shape, x_shape, x_stride, grid, scalars, constexprs, options, blocks = plan
    if blocks is not None and (x_q.data_ptr() | w_gate_q.data_ptr() | w_up_q.data_ptr()) % 16:
        return None  # an operand off the 16-byte alignment a descriptor needs (the plan's key holds strides only)
    out = x_q.new_empty(out2_shape, dtype=torch.bfloat16)
    tensors = (*_fp8_operands(x_q, x_shape, x_stride, w_gate_q, w_up_q, out, blocks), x_scale, w_gate_scale, w_up_scale)
    with _on_device(x_q.device):
        launcher(_gate_up_fp8_kernel).planned(plan_id, grid, tensors, scalars, constexprs, **options)
    return out.view(out_shape)


def gated_dual_gemm_fp8(x_q: torch.Tensor, x_scale: torch.Tensor, w_gate_q: torch.Tensor,
                        w_gate_scale: torch.Tensor, w_up_q: torch.Tensor, w_up_scale: torch.Tensor,
                        activation: str = "gelu_tanh", *, _config=None, _tma: bool | None = None,
                        _triton: bool | None = None) -> torch.Tensor:
    """h = act(acc_g·xs·wgs) · (acc_u·xs·wus) in bfloat16, acc_* = x_q · w_*_qᵀ accumulated in float32.

    x_q: [..., dim] e4m3 (quantize_rows_fp8), x_scale: float32 [..., 1]; w_gate_q, w_up_q: [hidden, dim]
    e4m3, row-major (nn.Linear's layout), w_*_scale: float32 [hidden] (or [hidden, 1]). activation:
    "gelu_tanh" or "silu". Returns [..., hidden] bfloat16. Where fp8_fallback_reason is not None,
    computes the same with torch._scaled_mm or dequantized float32 operands.

    For sweeps and tests: `_config` (7 ints, as CONFIGS_FP8's) and `_tma` (None automatic, False
    pointer loads, True descriptors) force the kernel, as `_triton=True` does (ValueError, with the
    reason, where it cannot run); `_triton=False` forces the fallback."""
    if _config is None and _tma is None and _triton is None and \
            plain((x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale), _dual_gemm._INTERPRETED):
        out = _fp8_planned(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation)
        if out is not None:
            return out
    _check_fp8(x_q, x_scale, w_gate_q, w_gate_scale, w_up_q, w_up_scale, activation)
    n, k = w_gate_q.shape
    out_shape = (*x_q.shape[:-1], n)
    x2 = _as_rows(x_q)
    m = x2.shape[0]
    if m == 0 or n == 0 or k == 0:  # nothing to compute, or act(0)·0
        return torch.zeros(out_shape, dtype=torch.bfloat16, device=x_q.device)
    act = ACTIVATIONS[activation]
    xs = x_scale.reshape(-1)
    wgs, wus = w_gate_scale.reshape(-1), w_up_scale.reshape(-1)
    reason = _fp8_reason(x2, w_gate_q, w_up_q)
    forced = _config is not None or _tma is not None or _triton is True
    if reason is not None and forced:
        raise ValueError(f"gated_dual_gemm_fp8: the Triton kernel cannot run here: {reason}")
    if reason is not None or _triton is False:
        return _fallback(x2, xs, w_gate_q, wgs, w_up_q, wus, act).view(out_shape)
    config = _check_fp8_config(tuple(_config)) if _config is not None else fp8_config(m)
    out = torch.empty((m, n), dtype=torch.bfloat16, device=x_q.device)
    _launch_fp8(x2, xs, w_gate_q, wgs.contiguous(), w_up_q, wus.contiguous(), out, act, config, _tma)
    return out.view(out_shape)
