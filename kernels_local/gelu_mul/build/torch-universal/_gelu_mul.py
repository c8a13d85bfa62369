"""Fused GeLU(tanh)·mul in Triton: out = gelu_tanh(gate) * up, forward and backward.

Both directions are pure streaming: every element is read once and written
once, so time is bytes moved divided by memory bandwidth.  Per element:

    forward:  read gate, up         write out               3 · element_size bytes
    backward: read grad, gate, up   write d_gate, d_up      5 · element_size bytes

The kernels treat their tensors as one flat, contiguous array: a program
handles BLOCK_SIZE consecutive elements, so every warp issues 16-byte vector
loads/stores with no index arithmetic per row.  Math is done in float32 and
rounded once to the tensor dtype on store.
"""

import torch
import triton
import triton.language as tl

try:  # Triton decides at decoration time whether @triton.jit means "interpret".
    from triton.runtime.interpreter import InterpretedFunction as _InterpretedFunction
except ImportError:  # pragma: no cover - very old/new Triton without the interpreter
    _InterpretedFunction = ()

_SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --------------------------------------------------------------------------- #
# Launch configuration: the one place to tune after an H200 sweep.
# --------------------------------------------------------------------------- #
# Rows are (largest tensor size in bytes, bytes per program and tensor, num_warps);
# the first row whose size bound holds wins.  Bytes rather than elements, so one
# table serves every dtype.  A block-size sweep on an H200 favoured configs that give
# each thread exactly one 16-byte vector per tensor (block bytes = num_warps * 32 * 16),
# with 1, 2 and 4 KiB blocks level for large tensors and 2 KiB / 4 warps best or tied
# on launch-bound ones, so a single row for now.  What it achieves in the suite is in
# results/pytest/h200/20261129T224302Z-standard-1171.json (the sweep itself is not kept).
_CONFIG_TABLE = (
    (float("inf"), 2048, 4),
)


def _launch_config(numel: int, element_size: int) -> tuple[int, int]:
    """(BLOCK_SIZE in elements, num_warps) for a flat tensor of `numel` elements."""
    nbytes = numel * element_size
    for max_bytes, block_bytes, num_warps in _CONFIG_TABLE:
        if nbytes <= max_bytes:
            return block_bytes // element_size, num_warps
    raise AssertionError("unreachable: the last row of _CONFIG_TABLE is unbounded")


def _needs_int64(numel: int, block_size: int) -> bool:
    # The largest offset a program computes is < numel + BLOCK_SIZE; int32 only
    # while that stays below 2**31.
    return numel + block_size > 2**31 - 1


# --------------------------------------------------------------------------- #
# Triton kernels
# --------------------------------------------------------------------------- #
@triton.jit
def _gelu_tanh_parts(g):
    """(gelu_tanh(g), s, e) in float32: gelu_tanh(g) = g·s, s = 1/(1 + e), e = exp(-2z).

    0.5·(1 + tanh(z)) == sigmoid(2z) == 1 / (1 + exp(-2z)), z = √(2/π)·(g + 0.044715·g³).
    This form saturates without inf/inf: z → -inf gives exp(-2z) = inf, s = 0 and
    g·s = -0; z → +inf gives s = 1.  It also avoids the cancellation of 1 + tanh(z)
    for z ≪ 0.  g³ may overflow to ±inf for |g| > 7e12: that only pushes z to
    ±inf, same sign as g, which is the saturated case above.
    """
    z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
    e = tl.exp(-2.0 * z)
    s = 1.0 / (1.0 + e)
    return g * s, s, e


@triton.jit
def _gelu_mul_fwd_kernel(
    gate_ptr,
    up_ptr,
    out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
    USE_INT64: tl.constexpr,
):
    pid = tl.program_id(0)
    if USE_INT64:
        block_start = pid.to(tl.int64) * BLOCK_SIZE
    else:
        block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)

    # Full blocks skip the mask: the compiler then proves 16-byte alignment and
    # contiguity and emits vector loads/stores even when n_elements is not a
    # multiple of 16 (a mask built from such an n would split the vectors).
    if block_start + BLOCK_SIZE <= n_elements:
        g = tl.load(gate_ptr + offsets)  # reads BLOCK_SIZE * element_size bytes
        u = tl.load(up_ptr + offsets)  # reads BLOCK_SIZE * element_size bytes
        gelu, _s, _e = _gelu_tanh_parts(g.to(tl.float32))
        y = gelu * u.to(tl.float32)
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty))  # writes BLOCK_SIZE * element_size bytes
    else:  # the one ragged block at the end
        mask = offsets < n_elements
        g = tl.load(gate_ptr + offsets, mask=mask)  # reads <= BLOCK_SIZE * element_size bytes
        u = tl.load(up_ptr + offsets, mask=mask)  # reads <= BLOCK_SIZE * element_size bytes
        gelu, _s, _e = _gelu_tanh_parts(g.to(tl.float32))
        y = gelu * u.to(tl.float32)
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)  # writes <= BLOCK_SIZE * element_size bytes


@triton.jit
def _gelu_mul_grads(dy, g, u):
    """(d_gate, d_up) in float32 for out = gelu_tanh(g) * u and upstream grad dy."""
    gelu, s, e = _gelu_tanh_parts(g)
    # 1 - s without cancellation: e·s = e / (1 + e) for g >= 0 (e <= 1 there);
    # for g < 0, s <= 1/2 and the subtraction is exact enough.
    one_minus_s = tl.where(g >= 0, e * s, 1.0 - s)
    # d gelu/dg = s + 2·s·(1 - s)·g·dz/dg,  dz/dg = √(2/π)·(1 + 3·0.044715·g²).
    # s·(1 - s) is exactly 0 in float32 for |g| > ~10, so clamping g to ±20 in the
    # polynomial changes nothing except that g·g² can no longer overflow and
    # turn 0·inf into NaN for huge |g|.  (NaN g still gives NaN through s.)
    gc = tl.minimum(tl.maximum(g, -20.0), 20.0)
    dz = 0.7978845608028654 * (1.0 + 0.134145 * gc * gc)
    dgelu = s + 2.0 * s * one_minus_s * gc * dz
    return dy * u * dgelu, dy * gelu


@triton.jit
def _gelu_mul_bwd_kernel(
    grad_ptr,
    gate_ptr,
    up_ptr,
    grad_gate_ptr,
    grad_up_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
    USE_INT64: tl.constexpr,
):
    pid = tl.program_id(0)
    if USE_INT64:
        block_start = pid.to(tl.int64) * BLOCK_SIZE
    else:
        block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)

    # Same full-block / ragged-tail split as the forward kernel.
    if block_start + BLOCK_SIZE <= n_elements:
        dy = tl.load(grad_ptr + offsets)  # reads BLOCK_SIZE * element_size bytes
        g = tl.load(gate_ptr + offsets)  # reads BLOCK_SIZE * element_size bytes
        u = tl.load(up_ptr + offsets)  # reads BLOCK_SIZE * element_size bytes
        dg, du = _gelu_mul_grads(dy.to(tl.float32), g.to(tl.float32), u.to(tl.float32))
        tl.store(grad_gate_ptr + offsets, dg.to(grad_gate_ptr.dtype.element_ty))  # writes BLOCK_SIZE * element_size bytes
        tl.store(grad_up_ptr + offsets, du.to(grad_up_ptr.dtype.element_ty))  # writes BLOCK_SIZE * element_size bytes
    else:
        mask = offsets < n_elements
        dy = tl.load(grad_ptr + offsets, mask=mask)  # reads <= BLOCK_SIZE * element_size bytes
        g = tl.load(gate_ptr + offsets, mask=mask)  # reads <= BLOCK_SIZE * element_size bytes
        u = tl.load(up_ptr + offsets, mask=mask)  # reads <= BLOCK_SIZE * element_size bytes
        dg, du = _gelu_mul_grads(dy.to(tl.float32), g.to(tl.float32), u.to(tl.float32))
        tl.store(grad_gate_ptr + offsets, dg.to(grad_gate_ptr.dtype.element_ty), mask=mask)  # writes <= BLOCK_SIZE * element_size bytes
        tl.store(grad_up_ptr + offsets, du.to(grad_up_ptr.dtype.element_ty), mask=mask)  # writes <= BLOCK_SIZE * element_size bytes


# True when TRITON_INTERPRET=1 was set before this module was imported; only
# then can the kernels run on CPU tensors.
_INTERPRETED = isinstance(_gelu_mul_fwd_kernel, _InterpretedFunction)


# --------------------------------------------------------------------------- #
# Launch helpers (contiguous tensors only)
# --------------------------------------------------------------------------- #
def _check_config(config) -> tuple[int, int]:
    if (
        not isinstance(config, tuple)
        or len(config) != 2
        or not all(isinstance(v, int) for v in config)
        or config[0] <= 0
        or config[0] & (config[0] - 1)
        or config[1] not in (1, 2, 4, 8, 16, 32)
    ):
        raise ValueError(f"_config must be (BLOCK_SIZE power of two, num_warps in 1..32 power of two), got {config!r}")
    return config


def _launch(kernel, tensors, numel, config):
    block, num_warps = _launch_config(numel, tensors[0].element_size()) if config is None else config
    grid = (triton.cdiv(numel, block),)
    device = tensors[0].device
    # Triton launches on the current CUDA device; make it the tensors' one.
    if device.type == "cuda" and device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            kernel[grid](*tensors, numel, BLOCK_SIZE=block, USE_INT64=_needs_int64(numel, block), num_warps=num_warps)
    else:
        kernel[grid](*tensors, numel, BLOCK_SIZE=block, USE_INT64=_needs_int64(numel, block), num_warps=num_warps)


def _forward_into(gate, up, out, config):
    """out <- gelu(gate) * up.  gate/up/out: same shape, dtype, device; out may be strided."""
    numel = gate.numel()
    if numel == 0:
        return out
    # Non-contiguous inputs (slices, transposes, stride-0 expands) are copied to
    # contiguous buffers first.  That costs one extra read+write per such input,
    # but keeps a single flat kernel whose indexing is trivially correct for
    # every layout; the fast path (contiguous activations from nn.Linear) pays
    # nothing.  A strided out is written through a temporary and copy_ for the
    # same reason.
    gate_c = gate.contiguous()
    up_c = up.contiguous()
    if out.is_contiguous():
        _launch(_gelu_mul_fwd_kernel, (gate_c, up_c, out), numel, config)
    else:
        tmp = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
        _launch(_gelu_mul_fwd_kernel, (gate_c, up_c, tmp), numel, config)
        out.copy_(tmp)
    return out


def _backward(grad, gate, up, config):
    grad_gate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    grad_up = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    numel = gate.numel()
    if numel:
        # grad from autograd is often non-contiguous (e.g. the stride-0 expand of
        # sum().backward()); copy it, as the forward does for its inputs.
        grad_c = grad.to(gate.dtype).contiguous()
        _launch(_gelu_mul_bwd_kernel, (grad_c, gate, up, grad_gate, grad_up), numel, config)
    return grad_gate, grad_up


class _GeluMulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up, config):
        gate_c = gate.contiguous()
        up_c = up.contiguous()
        out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
        _forward_into(gate_c, up_c, out, config)
        # Save the contiguous copies so the backward kernel can read them flat.
        ctx.save_for_backward(gate_c, up_c)
        ctx.config = config
        return out

    @staticmethod
    def backward(ctx, grad_out):
        gate_c, up_c = ctx.saved_tensors
        grad_gate, grad_up = _backward(grad_out, gate_c, up_c, ctx.config)
        return (
            grad_gate if ctx.needs_input_grad[0] else None,
            grad_up if ctx.needs_input_grad[1] else None,
            None,
        )


# --------------------------------------------------------------------------- #
# Public entry point
# --------------------------------------------------------------------------- #
def _validate(gate, up, out):
    for name, t in (("gate", gate), ("up", up)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"gelu_mul: {name} must be a torch.Tensor, got {type(t).__name__}")
    if gate.dtype != up.dtype:
        raise TypeError(f"gelu_mul: gate and up must have the same dtype, got gate.dtype={gate.dtype} and up.dtype={up.dtype}")
    if gate.dtype not in _SUPPORTED_DTYPES:
        raise TypeError(f"gelu_mul: unsupported dtype {gate.dtype}; supported: torch.float32, torch.bfloat16, torch.float16")
    if gate.device != up.device:
        raise ValueError(f"gelu_mul: gate and up must be on the same device, got gate.device={gate.device} and up.device={up.device}")
    if gate.shape != up.shape:
        raise ValueError(
            f"gelu_mul: gate and up must have the same shape, got gate.shape={tuple(gate.shape)} and up.shape={tuple(up.shape)}"
        )
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"gelu_mul: out must be a torch.Tensor or None, got {type(out).__name__}")
        if out.dtype != gate.dtype:
            raise TypeError(f"gelu_mul: out.dtype={out.dtype} must match the inputs' dtype {gate.dtype}")
        if out.device != gate.device:
            raise ValueError(f"gelu_mul: out.device={out.device} must match the inputs' device {gate.device}")
        if out.shape != gate.shape:
            raise ValueError(f"gelu_mul: out.shape={tuple(out.shape)} must match the inputs' shape {tuple(gate.shape)}")
    device_type = gate.device.type
    if device_type == "cpu":
        if not _INTERPRETED:
            raise RuntimeError(
                "gelu_mul: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 in the environment "
                "before the kernel is loaded (or pass CUDA tensors)"
            )
    elif device_type != "cuda":
        raise ValueError(f"gelu_mul: unsupported device {gate.device}; use a CUDA tensor (or CPU with TRITON_INTERPRET=1)")


def gelu_mul(gate: torch.Tensor, up: torch.Tensor, *, out: torch.Tensor | None = None, _config=None) -> torch.Tensor:
    """gelu_tanh(gate) * up, fused in one Triton kernel; differentiable.

    Computed in float32, stored in the inputs' dtype (float32, bfloat16 or float16).
    gate and up must have the same shape, dtype and device; any layout works.
    With `out=`, the result is written there and `out` is returned (no autograd).

    `_config=(BLOCK_SIZE, num_warps)` is internal, for tuning sweeps: it overrides
    `_launch_config` for this call (and its backward).
    """
    _validate(gate, up, out)
    if _config is not None:
        _config = _check_config(_config)
    if out is not None:
        if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
            raise RuntimeError(
                "gelu_mul: out= does not support autograd (gate or up requires grad); call without out= to differentiate"
            )
        return _forward_into(gate, up, out, _config)
    if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
        return _GeluMulFunction.apply(gate, up, _config)
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    return _forward_into(gate, up, out, _config)
