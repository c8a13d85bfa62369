"""A gated MLP's gate and up projections in one Triton kernel, act(gate)·up in its epilogue.

    h = act(x · Wgᵀ) · (x · Wuᵀ)       x: [M, K]    Wg, Wu: [N, K] (nn.Linear weights)    h: [M, N]
    act = gelu_tanh (GeGLU) or silu (SwiGLU)

Unfused, a GeGLU MLP writes gate and up ([M, N] each) to memory, reads them back for the
elementwise step and writes h: at the blog's shape (M 8192, N 3072, bf16) 100 MB of traffic and a
launch that a fused kernel does not have.  Two kernels compute it, tile by tile, writing only h
(act(gate)·up applied in float32 in the epilogue, rounded once to the inputs' dtype):

- _gate_up_interleaved_kernel, from weights laid out once at load time by interleave(): rows of
  gate and up alternate in one [2N, K] tensor, so a tile of h (BLOCK_M × BLOCK_N) is one GEMM tile
  of BLOCK_M × 2·BLOCK_N with a single float32 accumulator, gate and up in alternate columns, split
  in the epilogue.  The faster one (a single wide MMA per K step): what the layers use for inference,
  and for training once the interleaved weights are the parameter (interleave_gate_up(trainable=True)).
- _gate_up_kernel, from the weights as nn.Linear holds them: two float32 accumulators, gate and up,
  fed from the same x tile at every K step.  No load-time step; what direct calls and training on
  the Linear weights use.

Tiles are walked in grouped order (GROUP_M row tiles share each column tile's weights while they
are in L2) by a persistent grid of one program per SM when `persistent`, one program per tile
otherwise.  On Hopper, tiles arrive through the tensor memory accelerator (host-made tensor
descriptors, out-of-bounds rows and columns read as zeros and never written); elsewhere, or when a
stride or address is not 16-byte aligned, through masked pointer loads.

act needs no libdevice, so the same kernel runs under Triton's CPU interpreter:
    gelu_tanh(g) = g · sigmoid(2z),  z = √(2/π)·(g + 0.044715·g³)   (0.5·(1 + tanh z) = sigmoid 2z)
    silu(g)      = g · sigmoid(g)

float32 inputs are multiplied in IEEE float32 (no TF32), as PyTorch's matmul does by default.

Training: a call that wants a gradient runs the same kernels, which then also store gate and up
(SAVE); the backward forms d(gate) and d(up) in one elementwise kernel (_act_mul_grad_kernel) and
leaves x's and the weights' gradients to cuBLAS's GEMMs, recomputing nothing (see "Training" below).

The public functions are torch.library ops (one node each under torch.compile(fullgraph=True)),
differentiable through `register_autograd`.  On a GPU they are `triton_op`s: torch.compile
decomposes them, so Inductor's generated code runs the unfused path's GEMMs and act·mul kernel
itself; the fused kernel, which takes host-made tensor descriptors, stays behind an opaque
`custom_op` of its own.  Under the CPU interpreter all are `custom_op`s (see _define_ops).
"""

import contextlib
import functools
import math

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from ._fast_launch import launcher, plain, plan_key, remember, token, traceable

try:  # Triton decides at decoration time whether @triton.jit means "interpret".
    from triton.runtime.interpreter import InterpretedFunction as _InterpretedFunction
except ImportError:  # pragma: no cover
    _InterpretedFunction = ()

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - Triton before host-side descriptors
    TensorDescriptor = None

_SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ACTIVATIONS = {"gelu_tanh": 0, "silu": 1}


# --------------------------------------------------------------------------- #
# Launch configuration: the one place to tune after an H200 sweep.
# --------------------------------------------------------------------------- #
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, persistent) per dtype; persistent:
# 0 one program per tile, 1 one per SM with the tile and K loops flattened, 2 one per SM, not flattened.
# Two 128 × 128 float32 accumulators are 128 registers per thread at 8 warps; three stages of x
# (128 × 64) and both weight tiles (2 × 128 × 64) take 144 KiB of shared memory. Chosen by
# scripts/dual_gemm_sweep.py (tensor descriptors): a program per SM without flattening the loops was
# fastest for bf16 at the MLP shapes swept, and fp16 favoured one program per tile; flattening cost
# most where there are few tiles. float32 halves BLOCK_K so the same stages fit; it is never fused
# by default (fused_pays).
CONFIGS = {
    torch.bfloat16: (128, 128, 64, 8, 8, 3, 2),
    torch.float16: (128, 128, 64, 8, 8, 3, 0),
    torch.float32: (128, 128, 32, 8, 8, 3, 1),
}
# Fewer tokens than this take the unfused path (cuBLAS GEMMs, then one act·mul kernel): with
# BLOCK_M = 128 a few hundred tokens fill few tiles (24 at the blog's hidden size), where cuBLAS
# picks smaller tiles or splits K. At the blog's dims (bf16) the fused kernels' time is flat up to
# 512 tokens (one wave of 128-row tiles) while the unfused path's grows with the tokens, so the
# unfused path wins at few tokens and the fused one from a few hundred; this bound sits at the
# crossover found by `scripts/dual_gemm_sweep.py --crossover` (and its --layouts token sweep).
MIN_FUSED_TOKENS = 300
# The interleaved-weight kernel (_gate_up_interleaved_kernel), same tuple. Chosen by
# `scripts/dual_gemm_sweep.py --layouts`: one program per SM, tile and K loops flattened, was the
# fastest of the interleaved configurations tried at most shapes and dtypes swept and close to the
# best at the rest; it beats the two-accumulator kernel and comes close to cuBLAS's two GEMMs alone
# (no act·mul) at the large MLP shapes. float32 (fused on request only) keeps its accumulator at
# 64 registers per thread.
INTERLEAVED_CONFIGS = {
    torch.bfloat16: (128, 128, 64, 8, 8, 3, 1),
    torch.float16: (128, 128, 64, 8, 8, 3, 1),
    torch.float32: (64, 64, 32, 8, 4, 3, 1),
}
# The interleaved kernel when it also saves its accumulator (training). Staged in shared memory for
# a descriptor store, the 2·BLOCK_N-wide saved tile no longer lets three stages of 128 × 128 tiles
# fit an H200's 227 KiB; stored straight from registers (TRAIN_SAVE_TMA False) it takes no shared
# memory, so training keeps the inference tile and its three stages. That was the fastest candidate
# of `scripts/dual_gemm_sweep.py --train` at the 8192-token shapes (bf16; fp16 takes the same tiles,
# unswept), and close to the best at 333 tokens.
TRAIN_INTERLEAVED_CONFIGS = {
    torch.bfloat16: (128, 128, 64, 8, 8, 3, 1),
    torch.float16: (128, 128, 64, 8, 8, 3, 1),
    torch.float32: (64, 64, 32, 8, 4, 3, 1),
}
TRAIN_SAVE_TMA = False


def _check_config(config) -> tuple:
    if not isinstance(config, tuple) or len(config) != 7 or not all(isinstance(v, int) for v in config):
        raise ValueError(
            "_config must be 7 ints (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, persistent), "
            f"got {config!r}"
        )
    bm, bn, bk, group, warps, stages, _ = config
    for name, v in (("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk)):
        if v < 16 or v & (v - 1):
            raise ValueError(f"_config {name}={v} must be a power of two, at least 16")
    if group < 1 or warps not in (1, 2, 4, 8, 16) or stages < 1 or config[6] not in (0, 1, 2):
        raise ValueError(f"_config GROUP_M={group}, num_warps={warps}, num_stages={stages}, "
                         f"persistent={config[6]}: out of range")
    return config


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


# --------------------------------------------------------------------------- #
# Triton kernel
# --------------------------------------------------------------------------- #
@triton.jit
def _act(g, ACT: tl.constexpr):
    """act(g) in float32 (ACT 0: gelu_tanh, 1: silu), through sigmoid = 1 / (1 + exp(-y)).
    y → -inf gives exp = inf and g·0 = -0: no inf/inf."""
    if ACT == 0:
        y = 1.5957691216057308 * (g + 0.044715 * g * g * g)  # 2z
    else:
        y = g
    a = g / (1.0 + tl.exp(-y))
    return a


@triton.jit
def _tile(tile, tiles_m, per_group, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M consecutive row tiles walk the column tiles together, so each column
    tile's weights are read from L2 by GROUP_M row tiles. Returns (row tile, column tile)."""
    first_m = (tile // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows_in_group, (tile % per_group) // rows_in_group


@triton.jit
def _gate_up_kernel(
    x, wg, wu, out,  # tensor descriptors (TMA) or pointers
    pg, pu,  # SAVE: gate and up before act·mul ([M, N] each, for the backward); else unused
    M, N, K,
    stride_xm, stride_wg, stride_wu, stride_om, stride_pm,  # row strides (pointer path); last dimensions contiguous
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS: tl.constexpr,
    FLATTEN: tl.constexpr,
    TMA: tl.constexpr,
    IEEE: tl.constexpr,  # float32 inputs: full-precision products, not TF32
    UPCAST: tl.constexpr,  # the CPU interpreter's bfloat16 dot is wrong: float32 operands (the same products)
    SAVE: tl.constexpr = False,  # also store gate and up (rounded to the inputs' dtype): training
):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    k_steps = tl.cdiv(K, BLOCK_K)
    # FLATTEN: the tile and K loops become one software-pipelined loop, so the next tile's first
    # loads are in flight while this tile's epilogue runs.
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
                a = x.load([off_m, off_k])  # BLOCK_M × BLOCK_K of x, shared by both products
                bg = wg.load([off_n, off_k])  # BLOCK_N × BLOCK_K of each weight
                bu = wu.load([off_n, off_k])
            else:
                rk = off_k + tl.arange(0, BLOCK_K)
                k_in = rk[None, :] < K
                a = tl.load(x + rm[:, None] * stride_xm + rk[None, :], mask=(rm[:, None] < M) & k_in, other=0.0)
                bg = tl.load(wg + rn[:, None] * stride_wg + rk[None, :], mask=(rn[:, None] < N) & k_in, other=0.0)
                bu = tl.load(wu + rn[:, None] * stride_wu + rk[None, :], mask=(rn[:, None] < N) & k_in, other=0.0)
            if UPCAST:
                a, bg, bu = a.to(tl.float32), bg.to(tl.float32), bu.to(tl.float32)
            if IEEE:
                acc_g = tl.dot(a, bg.T, acc_g, input_precision="ieee")
                acc_u = tl.dot(a, bu.T, acc_u, input_precision="ieee")
            else:
                acc_g = tl.dot(a, bg.T, acc_g)
                acc_u = tl.dot(a, bu.T, acc_u)
        h = _act(acc_g, ACT) * acc_u  # float32, rounded once on store: BLOCK_M × BLOCK_N of h written
        if TMA:
            out.store([off_m, off_n], h.to(out.dtype))
            if SAVE:
                pg.store([off_m, off_n], acc_g.to(pg.dtype))
                pu.store([off_m, off_n], acc_u.to(pu.dtype))
        else:
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            tl.store(out + rm[:, None] * stride_om + rn[None, :], h.to(out.dtype.element_ty), mask=mask)
            if SAVE:
                at = rm[:, None] * stride_pm + rn[None, :]
                tl.store(pg + at, acc_g.to(pg.dtype.element_ty), mask=mask)
                tl.store(pu + at, acc_u.to(pu.dtype.element_ty), mask=mask)


@triton.jit
def _gate_up_interleaved_kernel(
    x, w, out,  # tensor descriptors (TMA) or pointers; w: [2N, K], gate row j at 2j, up row j at 2j + 1
    pre,  # SAVE: the accumulator as it is, gate and up in alternate columns ([M, 2N]); else unused
    M, N, K,
    stride_xm, stride_w, stride_om, stride_pm,
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS: tl.constexpr,
    FLATTEN: tl.constexpr,
    TMA: tl.constexpr,
    IEEE: tl.constexpr,
    UPCAST: tl.constexpr,
    SAVE: tl.constexpr = False,
    SAVE_TMA: tl.constexpr = True,  # with TMA: the saved tile through a descriptor, else stored from registers
):
    """The same product from interleaved weights: one GEMM of x against 2·BLOCK_N weight rows per
    tile, so each K step is a single BLOCK_M × 2·BLOCK_N × BLOCK_K dot (on Hopper one wgmma of
    N = 256 at BLOCK_N 128, x's tile read from shared memory once) into one float32 accumulator whose
    columns alternate gate and up. The epilogue splits that accumulator's column pairs (reshape to
    [BLOCK_M, BLOCK_N, 2], then split; in Hopper's MMA accumulator layout a thread holds adjacent
    columns in pairs) and writes act(gate)·up, BLOCK_M × BLOCK_N of h."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _tile(tile, tiles_m, per_group, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        rm = (off_m + tl.arange(0, BLOCK_M)).to(tl.int64)
        rw = (2 * off_n + tl.arange(0, 2 * BLOCK_N)).to(tl.int64)
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for step in range(k_steps):
            off_k = step * BLOCK_K
            if TMA:
                a = x.load([off_m, off_k])
                b = w.load([2 * off_n, off_k])
            else:
                rk = off_k + tl.arange(0, BLOCK_K)
                k_in = rk[None, :] < K
                a = tl.load(x + rm[:, None] * stride_xm + rk[None, :], mask=(rm[:, None] < M) & k_in, other=0.0)
                b = tl.load(w + rw[:, None] * stride_w + rk[None, :], mask=(rw[:, None] < 2 * N) & k_in, other=0.0)
            if UPCAST:
                a, b = a.to(tl.float32), b.to(tl.float32)
            if IEEE:
                acc = tl.dot(a, b.T, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b.T, acc)
        if SAVE:  # before the split: one store of the tile's 2·BLOCK_N columns, in the weights' order
            if TMA and SAVE_TMA:
                pre.store([off_m, 2 * off_n], acc.to(pre.dtype))
            else:
                tl.store(pre + rm[:, None] * stride_pm + rw[None, :], acc.to(pre.dtype.element_ty),
                         mask=(rm[:, None] < M) & (rw[None, :] < 2 * N))
        g, u = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        h = _act(g, ACT) * u
        if TMA:
            out.store([off_m, off_n], h.to(out.dtype))
        else:
            rn = (off_n + tl.arange(0, BLOCK_N)).to(tl.int64)
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            tl.store(out + rm[:, None] * stride_om + rn[None, :], h.to(out.dtype.element_ty), mask=mask)


@triton.jit
def _act_mul_kernel(g, u, out, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    """out = act(g)·u over n contiguous elements: the unfused path's elementwise step, one kernel
    (gate and up read once, out written once)."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:  # a whole block: no mask, so loads and stores are 16-byte vectors
        gv = tl.load(g + offs).to(tl.float32)
        uv = tl.load(u + offs).to(tl.float32)
        tl.store(out + offs, (_act(gv, ACT) * uv).to(out.dtype.element_ty))
    else:
        mask = offs < n
        gv = tl.load(g + offs, mask=mask, other=0.0).to(tl.float32)
        uv = tl.load(u + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out + offs, (_act(gv, ACT) * uv).to(out.dtype.element_ty), mask=mask)


@triton.jit
def _act_mul_pairs_kernel(y, out, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = act(y[2i])·y[2i + 1] over n outputs: the unfused interleaved path's elementwise step
    on its one GEMM's output (gate and up in alternate columns), read once in contiguous 2·BLOCK
    runs and split into pairs in registers."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    pairs = 2 * start + tl.arange(0, 2 * BLOCK)
    if start + BLOCK <= n:  # a whole block: no mask, so loads and stores are 16-byte vectors
        g, u = tl.split(tl.reshape(tl.load(y + pairs).to(tl.float32), (BLOCK, 2)))
        tl.store(out + offs, (_act(g, ACT) * u).to(out.dtype.element_ty))
    else:
        v = tl.load(y + pairs, mask=pairs < 2 * n, other=0.0).to(tl.float32)
        g, u = tl.split(tl.reshape(v, (BLOCK, 2)))
        tl.store(out + offs, (_act(g, ACT) * u).to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def _act_mul_grad_kernel(dh, g, u, dg, du, n, ACT: tl.constexpr, PAIRS: tl.constexpr, BLOCK: tl.constexpr):
    """The backward's elementwise step over n elements of h, from gate and up as the forward saved
    them: dgate = dh·up·act'(gate), dup = dh·act(gate), in float32, rounded once. PAIRS: gate and
    up alternate in one tensor (`g`, the interleaved forward's accumulator) and so do their
    gradients (`dg`, laid out like the interleaved weights: one GEMM each for x's and the weights'
    gradients); else g, u, dg and du are four contiguous tensors (`u` and `du` unused when PAIRS)."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    d = tl.load(dh + offs, mask=mask, other=0.0).to(tl.float32)
    if PAIRS:
        pairs = 2 * start + tl.arange(0, 2 * BLOCK)
        gv, uv = tl.split(tl.reshape(tl.load(g + pairs, mask=pairs < 2 * n, other=0.0).to(tl.float32), (BLOCK, 2)))
    else:
        gv = tl.load(g + offs, mask=mask, other=0.0).to(tl.float32)
        uv = tl.load(u + offs, mask=mask, other=0.0).to(tl.float32)
    if ACT == 0:  # gelu_tanh(g) = g·s, s = sigmoid(2z), z = √(2/π)·(g + 0.044715·g³)
        s = 1.0 / (1.0 + tl.exp(-1.5957691216057308 * (gv + 0.044715 * gv * gv * gv)))
        slope = s + gv * s * (1.0 - s) * 1.5957691216057308 * (1.0 + 0.134145 * gv * gv)
    else:  # silu(g) = g·s, s = sigmoid(g)
        s = 1.0 / (1.0 + tl.exp(-gv))
        slope = s + gv * s * (1.0 - s)
    d_gate = d * uv * slope
    d_up = d * (gv * s)
    if PAIRS:
        both = tl.reshape(tl.join(d_gate, d_up), (2 * BLOCK,))
        tl.store(dg + pairs, both.to(dg.dtype.element_ty), mask=pairs < 2 * n)
    else:
        tl.store(dg + offs, d_gate.to(dg.dtype.element_ty), mask=mask)
        tl.store(du + offs, d_up.to(du.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------- #
# Launch
# --------------------------------------------------------------------------- #
def _aligned(t: torch.Tensor) -> bool:
    """What a tensor descriptor needs: 16-byte aligned base and row stride, contiguous last dimension."""
    es = t.element_size()
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * es) % 16 == 0


def _can_use_tma(tensors) -> bool:
    """Descriptors where they help: Hopper or later, 16-bit inputs. float32 (only ever fused on
    request) takes pointer loads: descriptors made it several times slower in the tile sweep
    (scripts/dual_gemm_sweep.py)."""
    t = tensors[0]
    if TensorDescriptor is None or t.device.type != "cuda" or _INTERPRETED or t.dtype == torch.float32:
        return False
    return torch.cuda.get_device_capability(t.device)[0] >= 9 and all(_aligned(v) for v in tensors)


def _fused_plan(x2, weights, n: int, act: int, config, use_tma, save: bool = False, save_tma: bool = True):
    """(grid, the kernel's scalar arguments, its constexprs, launch options, descriptor blocks or
    None for pointer loads) of either gate|up kernel for h [m, n] (contiguous) from x2 [m, k] and
    `weights` (wg and wu, or the interleaved w, whose descriptor blocks are 2·BLOCK_N rows):
    tensor descriptors or pointers (use_tma None: where they help), a grid of one program per tile
    or per SM. `save`: the kernel also stores gate and up (contiguous [m, n] each, or for the
    interleaved kernel its [m, 2n] accumulator), for the backward."""
    bm, bn, bk, group, warps, stages, persistent = config
    m, k = x2.shape
    tensors = (x2, *weights)
    # h is allocated for the call, contiguous: aligned, with a row stride of n elements
    out_aligned = (n * x2.element_size()) % 16 == 0
    tma = _can_use_tma(tensors) and out_aligned if use_tma is None else use_tma
    if tma and not (out_aligned and all(_aligned(t) for t in tensors)):
        raise ValueError("gate_up_act_mul: tensor descriptors need 16-byte aligned addresses and row strides "
                         f"(dim={k}, hidden={n}, {x2.dtype}); use pointer loads (_tma=False or None)")
    w_rows = bn * 2 // len(weights)  # two weights: BLOCK_N rows each; one interleaved: 2·BLOCK_N
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    # Under the CPU interpreter, 4 "SMs": persistent programs still walk several tiles each.
    sms = _sm_count(x2.device.index if x2.device.index is not None else torch.cuda.current_device()) \
        if x2.device.type == "cuda" else 4
    programs = min(tiles, sms) if persistent else tiles
    interleaved = len(weights) == 1
    scalars = (m, n, k, x2.stride(0), *(w.stride(0) for w in weights), n, 2 * n if interleaved else n)
    constexprs = dict(ACT=act, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, PROGRAMS=programs,
                      FLATTEN=persistent == 1, TMA=tma, IEEE=x2.dtype == torch.float32,
                      UPCAST=_INTERPRETED and x2.dtype == torch.bfloat16, SAVE=save)
    if interleaved:
        constexprs["SAVE_TMA"] = save_tma
    saved_block = [bm, 2 * bn if interleaved else bn] if save_tma or not interleaved else None
    blocks = ([bm, bk], [w_rows, bk], [bm, bn], saved_block) if tma else None
    return (programs,), scalars, constexprs, {"num_warps": warps, "num_stages": stages}, blocks


def _fused_args(x, x_shape, x_strides, weights, out2, blocks, saved=()) -> tuple:
    """The kernel's tensor arguments: x (read as x_shape, x_strides), weights, h and where gate
    and up are saved (`saved`; none: h stands in, unused), or their tensor descriptors."""
    if blocks is None:
        return (x, *weights, out2, *(saved or (out2,) * len(weights)))
    x_block, w_block, out_block, saved_block = blocks
    out = TensorDescriptor(out2, list(out2.shape), list(out2.stride()), out_block)
    # Not saving: h's own descriptor stands in for the unused slots (gate and up from two weights,
    # the pairs from one), so an inference call builds no descriptor it does not use.
    if not saved:
        kept = (out,) * len(weights)
    elif saved_block is None:  # the interleaved kernel storing its saved tile from registers
        kept = saved
    else:
        kept = tuple(TensorDescriptor(t, list(t.shape), list(t.stride()), saved_block) for t in saved)
    return (TensorDescriptor(x, x_shape, x_strides, x_block),
            *(TensorDescriptor(w, list(w.shape), list(w.stride()), w_block) for w in weights), out, *kept)


def _on_device(device):
    """Triton launches on the current CUDA device: make it the tensors' one, skipping the switch
    when it already is (the common case, and a switch costs host time on every call)."""
    switch = device.type == "cuda" and device.index != torch.cuda.current_device()
    return torch.cuda.device(device) if switch else contextlib.nullcontext()


def _run(kernel, x2, weights, out2, act: int, config, use_tma, n: int, saved=(), save_tma: bool = True) -> None:
    """Launch `kernel` (either gate|up kernel) for h = out2 [m, n], storing gate and up into
    `saved` when given (see _fused_plan)."""
    grid, scalars, constexprs, options, blocks = _fused_plan(x2, weights, n, act, config, use_tma, bool(saved),
                                                             save_tma)
    args = _fused_args(x2, list(x2.shape), list(x2.stride()), weights, out2, blocks, saved)
    with _on_device(x2.device):
        launcher(kernel)(grid, (*args, *scalars), constexprs, **options)


def _launch(x2, wg, wu, out2, act: int, config, use_tma) -> None:
    _run(_gate_up_kernel, x2, (wg, wu), out2, act, config, use_tma, wg.shape[0])


def interleave(w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """[2·hidden, dim]: gate row j at 2j, up row j at 2j + 1. Made once when a model is loaded
    (layers.interleave_gate_up), never per call."""
    if w_gate.shape != w_up.shape or w_gate.dim() != 2:
        raise ValueError(f"interleave: w_gate.shape={tuple(w_gate.shape)} and w_up.shape={tuple(w_up.shape)} must "
                         "be the same 2-D shape [hidden, dim]")
    return torch.stack((w_gate, w_up), dim=1).reshape(2 * w_gate.shape[0], w_gate.shape[1]).contiguous()


def _launch_interleaved(x2, w, out2, act: int, config, use_tma) -> None:
    _run(_gate_up_interleaved_kernel, x2, (w,), out2, act, config, use_tma, w.shape[0] // 2)


def _act_mul_plan(outputs: int, act: int, element_size: int):
    """(grid, constexprs) of the unfused paths' act·mul kernels over `outputs` elements of h: 2 KiB
    of h per program, one 16-byte vector per thread and tensor at 4 warps."""
    block = 2048 // element_size
    return (triton.cdiv(outputs, block),), {"ACT": act, "BLOCK": block}


def _unfused(x2, wg, wu, act: int) -> torch.Tensor:
    """The path where fusing does not pay: two cuBLAS GEMMs, then one act·mul kernel."""
    g = torch.nn.functional.linear(x2, wg)
    u = torch.nn.functional.linear(x2, wu)
    out = torch.empty_like(g)
    _check_runnable(g.device)
    grid, constexprs = _act_mul_plan(g.numel(), act, g.element_size())
    with _on_device(g.device):
        launcher(_act_mul_kernel)(grid, (g, u, out, g.numel()), constexprs, num_warps=4)
    return out


def _unfused_interleaved(x2, w, act: int) -> torch.Tensor:
    """The interleaved weights' path where fusing does not pay: ONE cuBLAS GEMM against all 2·hidden
    rows (gate and up land in alternate columns; one launch, and at a few hundred tokens faster than
    two GEMMs on the halves in the layouts sweep, scripts/dual_gemm_sweep.py --layouts), then one
    act·mul kernel over the column pairs."""
    y = torch.nn.functional.linear(x2, w)
    out = torch.empty((x2.shape[0], w.shape[0] // 2), dtype=x2.dtype, device=x2.device)
    _check_runnable(y.device)
    grid, constexprs = _act_mul_plan(out.numel(), act, y.element_size())
    with _on_device(y.device):
        launcher(_act_mul_pairs_kernel)(grid, (y, out, out.numel()), constexprs, num_warps=4)
    return out


def fused_pays(tokens: int, dtype: torch.dtype) -> bool:
    """Whether the fused kernel is used for `tokens` rows of `dtype` (see MIN_FUSED_TOKENS). Never
    for float32: Triton's IEEE float32 dot runs on CUDA cores, well behind cuBLAS's two GEMMs (the
    tile sweep, scripts/dual_gemm_sweep.py)."""
    return dtype != torch.float32 and tokens >= MIN_FUSED_TOKENS


# --------------------------------------------------------------------------- #
# Input checks
# --------------------------------------------------------------------------- #
def _check_inputs(x, w_gate, w_up, activation) -> None:
    for name, t in (("x", x), ("w_gate", w_gate), ("w_up", w_up)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"gate_up_act_mul: {name} must be a torch.Tensor, got {type(t).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"gate_up_act_mul: activation={activation!r}; valid: {', '.join(map(repr, ACTIVATIONS))}")
    if x.dtype not in _SUPPORTED_DTYPES:
        raise TypeError(f"gate_up_act_mul: unsupported dtype {x.dtype}; supported: torch.float32, torch.bfloat16, "
                        "torch.float16")
    for name, w in (("w_gate", w_gate), ("w_up", w_up)):
        if w.dtype != x.dtype:
            raise TypeError(f"gate_up_act_mul: {name}.dtype={w.dtype} must match x.dtype={x.dtype}")
        if w.device != x.device:
            raise ValueError(f"gate_up_act_mul: {name}.device={w.device} must match x.device={x.device}")
        if w.dim() != 2:
            raise ValueError(f"gate_up_act_mul: {name} must be 2-D [hidden, dim], got shape {tuple(w.shape)}")
    if x.dim() < 1 or x.shape[-1] != w_gate.shape[1]:
        raise ValueError(f"gate_up_act_mul: x.shape={tuple(x.shape)}: its last dimension must be w_gate.shape[1]="
                         f"{w_gate.shape[1]}")
    if w_up.shape != w_gate.shape:
        raise ValueError(f"gate_up_act_mul: w_up.shape={tuple(w_up.shape)} must match w_gate.shape="
                         f"{tuple(w_gate.shape)}")


def _check_runnable(device: torch.device) -> None:
    if device.type == "cpu":
        if not _INTERPRETED:
            raise RuntimeError(
                "gate_up_act_mul: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 in the "
                "environment before the kernel is loaded (or pass CUDA tensors)"
            )
    elif device.type != "cuda":
        raise ValueError(f"gate_up_act_mul: unsupported device {device}; use a CUDA tensor (or CPU with "
                         "TRITON_INTERPRET=1)")


_INTERPRETED = isinstance(_gate_up_kernel, _InterpretedFunction) if _InterpretedFunction else False


# --------------------------------------------------------------------------- #
# torch.library ops
# --------------------------------------------------------------------------- #
# gate_up_act_mul and gate_up_act_mul_interleaved have two registrations (_define_ops):
#
# - triton_op (compiled Triton, on a GPU): the body is traceable, so torch.compile decomposes the op
#   and Inductor's generated code runs what it holds: on the unfused path (few tokens: decode) the
#   GEMMs and the act·mul kernel, launched by Inductor itself through wrap_triton.  A custom_op stays
#   opaque: the compiled graph would call it through torch.library's Python dispatch on every call,
#   host time that a one-token decode feels.  The fused path calls gate_up_act_mul_fused, an opaque
#   custom_op, because its kernel takes tensor descriptors made on the host (TMA), and wrap_triton
#   cannot trace those: torch's non-Dynamo tracing of user kernels (what a triton_op body gets)
#   records no TMA descriptor metadata (torch/_higher_order_ops/triton_kernel_wrap.py,
#   TracingTritonHOPifier.call_HOP).  The fused path runs at many tokens, where the kernel's time
#   dwarfs a dispatch.
# - custom_op (under Triton's CPU interpreter): Inductor compiles a user kernel's source for a GPU,
#   so a compiled graph cannot launch an interpreted kernel; the opaque ops call it instead.
#
# The namespace is the package's import name: loaded through `kernels`, metadata.json's id, which
# carries a digest of the sources, so two versions of this kernel in one process get separate ops.
_NAMESPACE = __name__.partition(".")[0]
_ops = getattr(torch.ops, _NAMESPACE)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x as [rows, K] with a contiguous last dimension (a view when one exists)."""
    k = x.shape[-1]
    if x.stride(-1) == 1 or k == 1:
        try:
            return x.view(-1, k)
        except RuntimeError:
            pass
    return x.contiguous().view(-1, k)


def _dispatch(x, weights, n: int, activation: str, fused: int, config: list[int], configs: dict, unfused,
              launch) -> torch.Tensor:
    """What both ops do around their kernels. fused: -1 by policy (fused_pays), 0 unfused, 1 fused;
    config: [] for `configs`' entry, else 7 ints (then tma: -1 automatic, 0 pointers, 1 descriptors)."""
    x2 = _rows(x)
    act = ACTIVATIONS[activation]
    out_shape = (*x.shape[:-1], n)
    if x2.shape[0] == 0 or n == 0:
        return torch.empty(out_shape, dtype=x.dtype, device=x.device)
    use_fused = fused_pays(x2.shape[0], x.dtype) if fused < 0 else bool(fused)
    _check_runnable(x.device)
    if not use_fused:
        return unfused(x2, *weights, act).view(out_shape)
    cfg = tuple(config[:7]) if config else configs[x.dtype]
    tma = None if len(config) < 8 or config[7] < 0 else bool(config[7])
    out2 = torch.empty((x2.shape[0], n), dtype=x.dtype, device=x.device)
    launch(x2, *(w.contiguous() for w in weights), out2, act, cfg, tma)
    return out2.view(out_shape)


def _forward(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str, fused: int,
             config: list[int]) -> torch.Tensor:
    if not config and _plain(x, w_gate, w_up):
        out = _planned(x, (w_gate, w_up), activation, fused, False)
        if out is not None:
            return out
    _check_inputs(x, w_gate, w_up, activation)
    return _dispatch(x, (w_gate, w_up), w_gate.shape[0], activation, fused, config, CONFIGS, _unfused, _launch)


def _fake_forward(x, w_gate, w_up, activation, fused, config):
    _check_inputs(x, w_gate, w_up, activation)
    return torch.empty((*x.shape[:-1], w_gate.shape[0]), dtype=x.dtype, device=x.device)


def _act_and_slope(g: torch.Tensor, act: int):
    """act(g) and act'(g), float32."""
    if act == 0:
        c = math.sqrt(2.0 / math.pi)
        s = torch.sigmoid(2.0 * c * (g + 0.044715 * g * g * g))  # gelu_tanh(g) = g·s
        dz = 2.0 * c * (1.0 + 3.0 * 0.044715 * g * g)
        return g * s, s + g * s * (1.0 - s) * dz
    s = torch.sigmoid(g)
    return g * s, s + g * s * (1.0 - s)


def _setup_context(ctx, inputs, output):
    x, w_gate, w_up, activation, _, _ = inputs
    ctx.save_for_backward(x, w_gate, w_up)
    ctx.act = ACTIVATIONS[activation]


def _backward(x, w_gate, w_up, act: int, grad_h, needs: tuple[bool, bool, bool]):
    """Recompute gate and up (two GEMMs), then dgate = dh·up·act'(gate), dup = dh·act(gate) and the
    GEMMs of x's and the weights' gradients (those `needs` asks for, else None)."""
    k = x.shape[-1]
    x2 = x.reshape(-1, k)
    dh = grad_h.reshape(x2.shape[0], -1).float()
    g = torch.nn.functional.linear(x2, w_gate).float()
    u = torch.nn.functional.linear(x2, w_up).float()
    a, slope = _act_and_slope(g, act)
    d_gate = (dh * u * slope).to(x.dtype)
    d_up = (dh * a).to(x.dtype)
    dx = (d_gate @ w_gate + d_up @ w_up).view(x.shape) if needs[0] else None
    dwg = d_gate.t() @ x2 if needs[1] else None
    dwu = d_up.t() @ x2 if needs[2] else None
    return dx, dwg, dwu


def _autograd_backward(ctx, grad_h):
    return (*_backward(*ctx.saved_tensors, ctx.act, grad_h, ctx.needs_input_grad[:3]), None, None, None)


def _halves(w_gate_up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gate and up weights inside an interleaved one, as views (row stride 2·dim, no copy)."""
    return w_gate_up[0::2], w_gate_up[1::2]


def _check_interleaved(x, w_gate_up, activation) -> None:
    if not isinstance(w_gate_up, torch.Tensor) or w_gate_up.dim() != 2 or w_gate_up.shape[0] % 2:
        shape = tuple(w_gate_up.shape) if isinstance(w_gate_up, torch.Tensor) else type(w_gate_up).__name__
        raise ValueError(f"gate_up_act_mul_interleaved: w_gate_up must be 2-D [2·hidden, dim] (interleave(w_gate, "
                         f"w_up)), got {shape}")
    _check_inputs(x, *_halves(w_gate_up), activation)


def _forward_interleaved(x: torch.Tensor, w_gate_up: torch.Tensor, activation: str, fused: int,
                         config: list[int]) -> torch.Tensor:
    if not config and _plain(x, w_gate_up):
        out = _planned(x, (w_gate_up,), activation, fused, True)
        if out is not None:
            return out
    _check_interleaved(x, w_gate_up, activation)
    return _dispatch(x, (w_gate_up,), w_gate_up.shape[0] // 2, activation, fused, config, INTERLEAVED_CONFIGS,
                     _unfused_interleaved, _launch_interleaved)


def _fake_forward_interleaved(x, w_gate_up, activation, fused, config):
    _check_interleaved(x, w_gate_up, activation)
    return torch.empty((*x.shape[:-1], w_gate_up.shape[0] // 2), dtype=x.dtype, device=x.device)


def _setup_context_interleaved(ctx, inputs, output):
    x, w_gate_up, activation, _, _ = inputs
    ctx.save_for_backward(x, w_gate_up)
    ctx.act = ACTIVATIONS[activation]


def _autograd_backward_interleaved(ctx, grad_h):
    """The two-weight backward on the halves; the weights' gradient interleaved like the weights."""
    x, w_gate_up = ctx.saved_tensors
    dx_needed, w_needed = ctx.needs_input_grad[:2]
    dx, dwg, dwu = _backward(x, *_halves(w_gate_up), ctx.act, grad_h, (dx_needed, w_needed, w_needed))
    return dx, (interleave(dwg, dwu) if w_needed else None), None, None, None


# ----- the fused kernels behind an opaque op: their tensor descriptors are made on the host -----
def _fused_forward(x2: torch.Tensor, weights: list[torch.Tensor], activation: str, config: list[int]) -> torch.Tensor:
    """h [m, n] by the fused kernel from x2 [m, k] (a rows view) and `weights` (w_gate and w_up, or
    one interleaved w_gate_up)."""
    interleaved = len(weights) == 1
    if not config and _plain(x2, *weights):
        out = _planned(x2, tuple(weights), activation, 1, interleaved)
        if out is not None:
            return out
    if interleaved:
        return _dispatch(x2, tuple(weights), weights[0].shape[0] // 2, activation, 1, config, INTERLEAVED_CONFIGS,
                         _unfused_interleaved, _launch_interleaved)
    return _dispatch(x2, tuple(weights), weights[0].shape[0], activation, 1, config, CONFIGS, _unfused, _launch)


def _fake_fused_forward(x2, weights, activation, config):
    n = weights[0].shape[0] // 2 if len(weights) == 1 else weights[0].shape[0]
    return torch.empty((x2.shape[0], n), dtype=x2.dtype, device=x2.device)


# ----- triton_op bodies: traced with fake tensors by torch.compile, and their own fakes -----
# What they launch through wrap_triton: the kernels, or under the interpreter stand-ins that
# wrap_triton accepts (_fast_launch.traceable; used only when a test registers triton_ops there).
_ACT_MUL_KERNEL = traceable(_act_mul_kernel)
_ACT_MUL_PAIRS_KERNEL = traceable(_act_mul_pairs_kernel)


def _launches_here(device: torch.device) -> bool:
    """Whether a traced body launches on `device`: not on the meta device (shapes only)."""
    if device.type == "meta":
        return False
    _check_runnable(device)
    return True


def _traced(x, weights, n: int, activation: str, fused: int, config: list[int]) -> torch.Tensor:
    """What both triton_ops do, in traceable Python (sizes may be symbolic): the unfused path as
    GEMMs and one act·mul kernel launched through wrap_triton, the fused one through its op."""
    x2 = _rows(x)
    m = x2.shape[0]
    out_shape = (*x.shape[:-1], n)
    if m == 0 or n == 0 or not _launches_here(x.device):
        return torch.empty(out_shape, dtype=x.dtype, device=x.device)
    if fused_pays(m, x.dtype) if fused < 0 else bool(fused):
        return _ops.gate_up_act_mul_fused(x2, list(weights), activation, config).view(out_shape)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    grid, constexprs = _act_mul_plan(m * n, ACTIVATIONS[activation], x.element_size())
    if len(weights) == 1:  # interleaved: one GEMM, gate and up in alternate columns
        y = torch.nn.functional.linear(x2, weights[0])
        wrap_triton(_ACT_MUL_PAIRS_KERNEL)[grid](y, out, m * n, **constexprs, num_warps=4)
    else:
        g = torch.nn.functional.linear(x2, weights[0])
        u = torch.nn.functional.linear(x2, weights[1])
        wrap_triton(_ACT_MUL_KERNEL)[grid](g, u, out, m * n, **constexprs, num_warps=4)
    return out.view(out_shape)


def _traced_forward(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str, fused: int,
                    config: list[int]) -> torch.Tensor:
    if _plain(x, w_gate, w_up):  # real tensors, outside tracing
        return _forward(x, w_gate, w_up, activation, fused, config)
    _check_inputs(x, w_gate, w_up, activation)
    return _traced(x, (w_gate, w_up), w_gate.shape[0], activation, fused, config)


def _traced_forward_interleaved(x: torch.Tensor, w_gate_up: torch.Tensor, activation: str, fused: int,
                                config: list[int]) -> torch.Tensor:
    if _plain(x, w_gate_up):
        return _forward_interleaved(x, w_gate_up, activation, fused, config)
    _check_interleaved(x, w_gate_up, activation)
    return _traced(x, (w_gate_up,), w_gate_up.shape[0] // 2, activation, fused, config)


# ----- registration -----
def _define_ops(namespace: str, traced: bool) -> None:
    """Register `namespace`::gate_up_act_mul and ::gate_up_act_mul_interleaved (triton_ops when
    `traced`, else custom_ops), ::gate_up_act_mul_fused (a custom_op) and the training ops
    (_define_train_ops).

    Defining an op again under the same name replaces the earlier definition, so the namespace
    must differ between versions (see _NAMESPACE)."""
    fused_op = torch.library.custom_op(f"{namespace}::gate_up_act_mul_fused", _fused_forward, mutates_args=())
    fused_op.register_fake(_fake_fused_forward)
    if traced:
        forward_op = torch.library.triton_op(f"{namespace}::gate_up_act_mul", _traced_forward, mutates_args=())
        interleaved_op = torch.library.triton_op(f"{namespace}::gate_up_act_mul_interleaved",
                                                 _traced_forward_interleaved, mutates_args=())
    else:
        forward_op = torch.library.custom_op(f"{namespace}::gate_up_act_mul", _forward, mutates_args=())
        forward_op.register_fake(_fake_forward)
        interleaved_op = torch.library.custom_op(f"{namespace}::gate_up_act_mul_interleaved", _forward_interleaved,
                                                 mutates_args=())
        interleaved_op.register_fake(_fake_forward_interleaved)
    forward_op.register_autograd(_autograd_backward, setup_context=_setup_context)
    interleaved_op.register_autograd(_autograd_backward_interleaved, setup_context=_setup_context_interleaved)
    _define_train_ops(namespace)


# --------------------------------------------------------------------------- #
# The planned path: what an eager call pays
# --------------------------------------------------------------------------- #
# Between Python and the kernels an eager call pays for the op's dispatch (torch.library), the
# checks, the views, the configuration lookups and Triton's binding of every argument.  So each key
# of shapes, strides, dtypes, devices, activation and fusion is checked and planned once; later calls
# with that key allocate and launch only.  The public functions take this path directly outside
# torch.compile when no gradient is wanted (skipping the op's dispatch), and the ops' bodies take
# it too when called with real tensors (gate_up_act_mul_fused's in a compiled graph; under the
# interpreter, every op's).  Non-contiguous weights, rows that need a copy, empty inputs and tuning
# overrides take the general path.
_PLANS = {}


def _plain(*tensors) -> bool:
    return plain(tensors, _INTERPRETED)


def _wants_grad(*tensors) -> bool:
    if torch.is_grad_enabled():
        for t in tensors:
            if t.requires_grad:
                return True
    return False


def _plan_sizes(x, weights, activation: str, interleaved: bool):
    """The checks the op makes, then (m, n, k) of a call a plan can take; None where it cannot."""
    if interleaved:
        _check_interleaved(x, weights[0], activation)
    else:
        _check_inputs(x, *weights, activation)
    _check_runnable(x.device)
    n = weights[0].shape[0] // 2 if interleaved else weights[0].shape[0]
    k = x.shape[-1]
    m = x.numel() // k if k else 0
    if m == 0 or n == 0 or not all(w.is_contiguous() for w in weights):
        return None
    return m, n, k


def _make_plan(x, weights, activation: str, fused: int, interleaved: bool):
    """What _planned does for this key, after the checks the op makes; False for the general path."""
    sizes = _plan_sizes(x, weights, activation, interleaved)
    if sizes is None:
        return False
    m, n, k = sizes
    act = ACTIVATIONS[activation]
    out_shape = (*x.shape[:-1], n)
    if not (fused_pays(m, x.dtype) if fused < 0 else bool(fused)):
        return "unfused", token(), out_shape, m * n, *_act_mul_plan(m * n, act, x.element_size())
    x2 = _rows(x)
    if x2.data_ptr() != x.data_ptr():
        return False  # rows that _rows had to copy
    configs = INTERLEAVED_CONFIGS if interleaved else CONFIGS
    grid, scalars, constexprs, options, blocks = _fused_plan(x2, weights, n, act, configs[x.dtype], None)
    return "fused", token(), out_shape, (m, n), [m, k], [x2.stride(0), 1], grid, scalars, constexprs, options, blocks


def _planned(x, weights, activation: str, fused: int, interleaved: bool):
    """h from the plan of this call's key, or None where the general path must run."""
    key = plan_key((x, *weights), activation, fused, interleaved)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _make_plan(x, weights, activation, fused, interleaved)
        remember(_PLANS, key, plan)
    if not plan:
        return None
    if plan[0] == "unfused":
        _, plan_id, out_shape, outputs, grid, constexprs = plan
        out = x.new_empty(out_shape)
        with _on_device(x.device):
            if interleaved:  # one GEMM, gate and up in alternate columns
                y = torch.nn.functional.linear(x, weights[0])
                launcher(_act_mul_pairs_kernel).planned(plan_id, grid, (y, out), (outputs,), constexprs, num_warps=4)
            else:
                g, u = (torch.nn.functional.linear(x, w) for w in weights)
                launcher(_act_mul_kernel).planned(plan_id, grid, (g, u, out), (outputs,), constexprs, num_warps=4)
        return out
    _, plan_id, out_shape, out2_shape, x_shape, x_strides, grid, scalars, constexprs, options, blocks = plan
    if blocks is not None and x.data_ptr() % 16:
        return None  # this x lies off the 16-byte alignment a descriptor needs
    out2 = x.new_empty(out2_shape)
    args = _fused_args(x, x_shape, x_strides, weights, out2, blocks)
    kernel = _gate_up_interleaved_kernel if interleaved else _gate_up_kernel
    with _on_device(x.device):
        launcher(kernel).planned(plan_id, grid, args, scalars, constexprs, **options)
    return out2.view(out_shape)


# --------------------------------------------------------------------------- #
# Public entry point
# --------------------------------------------------------------------------- #
def gate_up_act_mul(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str = "gelu_tanh", *,
                    fused: bool | None = None, _config=None, _tma: bool | None = None) -> torch.Tensor:
    """act(x · w_gateᵀ) · (x · w_upᵀ): a gated MLP's gate and up projections and its elementwise
    step, in one Triton kernel; differentiable; traceable by torch.compile.

    x: [..., dim]; w_gate, w_up: [hidden, dim] (nn.Linear weights), same dtype (float32, bfloat16
    or float16) and device.  Returns [..., hidden] in x's dtype, accumulated in float32.
    activation: "gelu_tanh" (GeGLU) or "silu" (SwiGLU).  fused: None decides by the number of
    rows (fused_pays); False takes the unfused path (two GEMMs, then act·mul), True the kernel.

    `_config` (7 ints: BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, persistent 0/1/2) and
    `_tma` (None automatic, False pointer loads, True tensor descriptors) are for tuning sweeps and tests.
    """
    eager = _config is None and _tma is None and not torch.compiler.is_compiling()
    if eager and _plain(x, w_gate, w_up):
        if _wants_grad(x, w_gate, w_up):  # checked when its plan is made, or by _train_forward
            return _Train.apply(x, activation, -1 if fused is None else int(fused), w_gate, w_up)
        out = _planned(x, (w_gate, w_up), activation, -1 if fused is None else int(fused), False)
        if out is not None:
            return out
    _check_inputs(x, w_gate, w_up, activation)
    if _config is None and _tma is None and _wants_grad(x, w_gate, w_up):
        return _train(x, (w_gate, w_up), activation, -1 if fused is None else int(fused))
    cfg = list(_check_config(_config)) if _config is not None else []
    if _tma is not None:
        cfg = (cfg or list(CONFIGS[x.dtype])) + [int(_tma)]
    return _ops.gate_up_act_mul(x, w_gate, w_up, activation, -1 if fused is None else int(fused), cfg)


def gate_up_act_mul_interleaved(x: torch.Tensor, w_gate_up: torch.Tensor, activation: str = "gelu_tanh", *,
                                fused: bool | None = None, _config=None, _tma: bool | None = None) -> torch.Tensor:
    """gate_up_act_mul from weights laid out once by interleave(w_gate, w_up) ([2·hidden, dim], gate
    and up rows alternating): the fused path is one GEMM-shaped kernel with a single accumulator per
    tile (the faster kernel on Hopper: see INTERLEAVED_CONFIGS); otherwise the same as
    gate_up_act_mul, whose arguments these are."""
    eager = _config is None and _tma is None and not torch.compiler.is_compiling()
    if eager and _plain(x, w_gate_up):
        if _wants_grad(x, w_gate_up):
            return _Train.apply(x, activation, -1 if fused is None else int(fused), w_gate_up)
        out = _planned(x, (w_gate_up,), activation, -1 if fused is None else int(fused), True)
        if out is not None:
            return out
    _check_interleaved(x, w_gate_up, activation)
    if _config is None and _tma is None and _wants_grad(x, w_gate_up):
        return _train(x, (w_gate_up,), activation, -1 if fused is None else int(fused))
    cfg = list(_check_config(_config)) if _config is not None else []
    if _tma is not None:
        cfg = (cfg or list(INTERLEAVED_CONFIGS[x.dtype])) + [int(_tma)]
    return _ops.gate_up_act_mul_interleaved(x, w_gate_up, activation, -1 if fused is None else int(fused), cfg)


# --------------------------------------------------------------------------- #
# Training: the forward saves gate and up; the backward forms their gradients in one kernel
# --------------------------------------------------------------------------- #
# A call that wants a gradient (and names no tuning override) takes this path. The forward's kernel
# also stores gate and up as its accumulators hold them (rounded to the inputs' dtype), so the
# backward recomputes no GEMM: one elementwise kernel (_act_mul_grad_kernel) forms d(gate) and d(up),
# then cuBLAS's GEMMs give the gradients of x and of the weights. From interleaved weights the
# saved pairs and their gradients keep the weights' interleaved order, so x's gradient is one GEMM
# and the interleaved weight's gradient another, laid out like the weight: an optimizer stepping the
# interleaved tensor steps gate and up alike (layers.interleave_gate_up, trainable=True).
#
# Outside torch.compile, with plain tensors, a torch.autograd.Function calls the launches directly
# (no op dispatch on either pass); under torch.compile, or with tensors that need the dispatcher,
# the opaque ops below (custom_ops: their kernels take host-made tensor descriptors) with
# register_autograd, whose backward is the same GEMMs around the ::gate_up_grad op.
def _saved_like(x, m: int, n: int, interleaved: bool) -> tuple:
    if interleaved:
        return (x.new_empty((m, 2 * n)),)
    return x.new_empty((m, n)), x.new_empty((m, n))


def _train_forward(x, weights, activation: str, fused: int):
    """(h, saved): h = act(gate)·up for x [..., k], and what the backward reads: (gate, up) [m, n]
    each from two weights, the [m, 2n] gate|up pairs from one interleaved weight."""
    interleaved = len(weights) == 1
    if interleaved:
        _check_interleaved(x, weights[0], activation)
    else:
        _check_inputs(x, *weights, activation)
    x2 = _rows(x)
    m = x2.shape[0]
    n = weights[0].shape[0] // 2 if interleaved else weights[0].shape[0]
    out_shape = (*x.shape[:-1], n)
    if m == 0 or n == 0:
        return x.new_empty(out_shape), _saved_like(x, m, n, interleaved)
    _check_runnable(x.device)
    act = ACTIVATIONS[activation]
    weights = tuple(w if w.is_contiguous() else w.contiguous() for w in weights)
    h = x.new_empty((m, n))
    if fused_pays(m, x.dtype) if fused < 0 else bool(fused):
        saved = _saved_like(x, m, n, interleaved)
        kernel, configs = ((_gate_up_interleaved_kernel, TRAIN_INTERLEAVED_CONFIGS) if interleaved
                           else (_gate_up_kernel, CONFIGS))
        _run(kernel, x2, weights, h, act, configs[x.dtype], None, n, saved, TRAIN_SAVE_TMA)
        return h.view(out_shape), saved
    grid, constexprs = _act_mul_plan(m * n, act, x.element_size())
    with _on_device(x.device):
        if interleaved:  # one GEMM: gate and up in alternate columns, saved as they are
            saved = (torch.nn.functional.linear(x2, weights[0]),)
            launcher(_act_mul_pairs_kernel)(grid, (saved[0], h, m * n), constexprs, num_warps=4)
        else:
            saved = tuple(torch.nn.functional.linear(x2, w) for w in weights)
            launcher(_act_mul_kernel)(grid, (*saved, h, m * n), constexprs, num_warps=4)
    return h.view(out_shape), saved


def _gate_up_grad(grad_h, saved, act: int) -> tuple:
    """d(gate) and d(up) laid out as `saved` is (two [m, n] tensors, or one [m, 2n] of pairs)."""
    pairs = len(saved) == 1
    m = saved[0].shape[0]
    n = saved[0].shape[1] // 2 if pairs else saved[0].shape[1]
    grads = tuple(torch.empty_like(t) for t in saved)
    if m * n == 0:
        return grads
    dh = grad_h.reshape(m, n)
    if not dh.is_contiguous() or dh.dtype != saved[0].dtype:
        dh = dh.contiguous().to(saved[0].dtype)
    key = (m * n, act, pairs, dh.dtype, dh.device)
    plan = _GRAD_PLANS.get(key)
    if plan is None:
        _check_runnable(dh.device)
        grid, constexprs = _act_mul_plan(m * n, act, dh.element_size())
        plan = token(), grid, {**constexprs, "PAIRS": pairs}
        remember(_GRAD_PLANS, key, plan)
    plan_id, grid, constexprs = plan
    g, u = (saved[0], saved[0]) if pairs else saved
    dg, du = (grads[0], grads[0]) if pairs else grads
    with _on_device(dh.device):
        launcher(_act_mul_grad_kernel).planned(plan_id, grid, (dh, g, u, dg, du), (m * n,), constexprs, num_warps=4)
    return grads


def _gemm_grads(x, weights, grads, needs) -> tuple:
    """x's gradient and each weight's (None where `needs`, one flag for x then one per weight, says
    not) from d(gate) and d(up) as _gate_up_grad lays them out."""
    x2 = x.reshape(-1, x.shape[-1])
    if len(weights) == 1:
        (dpre,), (w,) = grads, weights
        dx = dpre @ w if needs[0] else None
        dws = (dpre.t() @ x2 if needs[1] else None,)
    else:
        (dg, du), (wg, wu) = grads, weights
        dx = torch.addmm(dg @ wg, du, wu) if needs[0] else None
        dws = (dg.t() @ x2 if needs[1] else None, du.t() @ x2 if needs[2] else None)
    return (None if dx is None else dx.view(x.shape), *dws)


_TRAIN_PLANS = {}
_GRAD_PLANS = {}


def _make_train_plan(x, weights, activation: str, fused: int):
    """What _train_planned does for this key, after the checks; False where _train_forward must run."""
    interleaved = len(weights) == 1
    sizes = _plan_sizes(x, weights, activation, interleaved)
    if sizes is None:
        return False
    m, n, k = sizes
    if not (fused_pays(m, x.dtype) if fused < 0 else bool(fused)):
        return False  # the unfused path: cuBLAS's GEMMs, whose calls a plan would not shorten
    x2 = _rows(x)
    if x2.data_ptr() != x.data_ptr():
        return False
    configs = TRAIN_INTERLEAVED_CONFIGS if interleaved else CONFIGS
    grid, scalars, constexprs, options, blocks = _fused_plan(x2, weights, n, ACTIVATIONS[activation],
                                                             configs[x.dtype], None, True,
                                                             TRAIN_SAVE_TMA)
    return token(), (*x.shape[:-1], n), m, n, [m, k], [x2.stride(0), 1], grid, scalars, constexprs, options, blocks


def _train_planned(x, weights, activation: str, fused: int):
    """_train_forward's result from the plan of this call's key (the fused path, as _planned does
    for inference), or None where the general path must run."""
    key = plan_key((x, *weights), activation, fused)
    plan = _TRAIN_PLANS.get(key)
    if plan is None:
        plan = _make_train_plan(x, weights, activation, fused)
        remember(_TRAIN_PLANS, key, plan)
    if not plan:
        return None
    plan_id, out_shape, m, n, x_shape, x_strides, grid, scalars, constexprs, options, blocks = plan
    if blocks is not None and x.data_ptr() % 16:
        return None
    interleaved = len(weights) == 1
    h = x.new_empty((m, n))
    saved = _saved_like(x, m, n, interleaved)
    args = _fused_args(x, x_shape, x_strides, weights, h, blocks, saved)
    kernel = _gate_up_interleaved_kernel if interleaved else _gate_up_kernel
    with _on_device(x.device):
        launcher(kernel).planned(plan_id, grid, args, scalars, constexprs, **options)
    return h.view(out_shape), saved


class _Train(torch.autograd.Function):
    """The training path outside torch.compile: apply(x, activation, fused, *weights)."""

    @staticmethod
    def forward(ctx, x, activation, fused, *weights):
        h, saved = _train_planned(x, weights, activation, fused) or _train_forward(x, weights, activation, fused)
        ctx.save_for_backward(x, *weights, *saved)
        ctx.act, ctx.weights = ACTIVATIONS[activation], len(weights)
        return h

    @staticmethod
    @torch.autograd.function.once_differentiable  # the gradient kernel has no derivative: say so, not a wrong one
    def backward(ctx, grad_h):
        x, *rest = ctx.saved_tensors
        weights, saved = rest[:ctx.weights], rest[ctx.weights:]
        needs = (ctx.needs_input_grad[0], *ctx.needs_input_grad[3:])
        dx, *dws = _gemm_grads(x, weights, _gate_up_grad(grad_h, saved, ctx.act), needs)
        return (dx, None, None, *dws)


def _train(x, weights, activation: str, fused: int) -> torch.Tensor:
    if not torch.compiler.is_compiling() and _plain(x, *weights):
        return _Train.apply(x, activation, fused, *weights)
    if len(weights) == 1:
        return _ops.gate_up_act_mul_interleaved_train(x, weights[0], activation, fused)[0]
    return _ops.gate_up_act_mul_train(x, *weights, activation, fused)[0]


def _train_op(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str,
              fused: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    h, (g, u) = _train_forward(x, (w_gate, w_up), activation, fused)
    return h, g, u


def _fake_train_op(x, w_gate, w_up, activation, fused):
    _check_inputs(x, w_gate, w_up, activation)
    n = w_gate.shape[0]
    return (x.new_empty((*x.shape[:-1], n)), *_saved_like(x, x.numel() // x.shape[-1] if x.shape[-1] else 0, n, False))


def _interleaved_train_op(x: torch.Tensor, w_gate_up: torch.Tensor, activation: str,
                          fused: int) -> tuple[torch.Tensor, torch.Tensor]:
    h, (pre,) = _train_forward(x, (w_gate_up,), activation, fused)
    return h, pre


def _fake_interleaved_train_op(x, w_gate_up, activation, fused):
    _check_interleaved(x, w_gate_up, activation)
    n = w_gate_up.shape[0] // 2
    return x.new_empty((*x.shape[:-1], n)), *_saved_like(x, x.numel() // x.shape[-1] if x.shape[-1] else 0, n, True)


def _grad_op(grad_h: torch.Tensor, saved: list[torch.Tensor], act: int) -> list[torch.Tensor]:
    return list(_gate_up_grad(grad_h, saved, act))


def _fake_grad_op(grad_h, saved, act):
    return [torch.empty_like(t) for t in saved]


def _setup_train(ctx, inputs, output):
    x, *weights = inputs[:-2]
    ctx.save_for_backward(x, *weights, *output[1:])
    ctx.act, ctx.weights = ACTIVATIONS[inputs[-2]], len(weights)


def _train_op_backward(ctx, grad_h, *_saved_grads):
    x, *rest = ctx.saved_tensors
    weights, saved = rest[:ctx.weights], rest[ctx.weights:]
    needs = ctx.needs_input_grad[:1 + ctx.weights]
    grads = _ops.gate_up_grad(grad_h, list(saved), ctx.act)
    return (*_gemm_grads(x, weights, grads, needs), None, None)


def _define_train_ops(namespace: str) -> None:
    """Register `namespace`::gate_up_act_mul_train, ::gate_up_act_mul_interleaved_train (h and
    what the backward reads) and ::gate_up_grad (that backward's elementwise step)."""
    grad_op = torch.library.custom_op(f"{namespace}::gate_up_grad", _grad_op, mutates_args=())
    grad_op.register_fake(_fake_grad_op)
    for name, body, fake in (("gate_up_act_mul_train", _train_op, _fake_train_op),
                             ("gate_up_act_mul_interleaved_train", _interleaved_train_op, _fake_interleaved_train_op)):
        op = torch.library.custom_op(f"{namespace}::{name}", body, mutates_args=())
        op.register_fake(fake)
        op.register_autograd(_train_op_backward, setup_context=_setup_train)


_define_ops(_NAMESPACE, traced=not _INTERPRETED)  # once everything the ops call is defined
