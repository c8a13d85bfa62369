"""Fused silu(gate) * up in Triton (SwiGLU's elementwise step), forward and backward.

    out    = silu(g) · u,                 silu(g) = g · sigmoid(g)
    d_gate = dy · u · s · (1 + g · (1 - s)),   s = sigmoid(g)
    d_up   = dy · silu(g)

Inputs are seen as 2-D [rows, last dim] with a contiguous last dimension and
any row stride, so the two halves of a merged gate/up projection ([t, 2h]
chunked into two [t, h] views) are read in place, without a copy.  Math is
float32; each output is rounded once to the input dtype on store.

Both directions are torch.library ops, so `torch.compile(fullgraph=True)` keeps
each as a single node; the forward op is differentiable through `register_autograd`.
They are `triton_op`s launching through `wrap_triton`, so Inductor launches the
kernels from its generated code; under the CPU interpreter, `custom_op`s (see
_define_ops).  Eager calls skip the ops (the planned path, at the end).
"""

import contextlib
import functools
import math

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from ._fast_launch import gpu_table, launcher, plain, plan_key, remember, token, traceable

try:  # Triton decides at decoration time whether @triton.jit means "interpret".
    from triton.runtime.interpreter import InterpretedFunction as _InterpretedFunction
except ImportError:  # pragma: no cover - a Triton without the interpreter
    _InterpretedFunction = ()

_SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Launch configuration: the one place to tune (scripts/elementwise_sweep.py sweeps it).
# Rows are (element size in bytes, or None for any; bytes per program and tensor; num_warps);
# the first row whose element size holds wins.  Bytes rather than elements, so every dtype of a
# size gets the same traffic per program.  The table depends on the GPU, as gelu_mul's does and
# from the same measurements: the first entry of _GPU_TABLES whose name fragment is in the
# device's name serves it, the last every other GPU and the interpreter.
# - H100: 1024 elements a program, 8 bytes per thread and tensor (2 KiB over 8 warps at 2 bytes,
#   4 KiB over 16 at float32).
# - Any other GPU: 2 KiB over 4 warps, one 16-byte vector per thread and tensor (the H200's).
_GPU_TABLES = (
    ("H100", ((4, 4096, 16), (None, 2048, 8))),
    (None, ((None, 2048, 4),)),
)
# A table forced for every device (scripts/elementwise_sweep.py), or None: the device's own.
_CONFIG_TABLE = None


@functools.lru_cache(maxsize=None)
def _gpu_table(index: int) -> tuple:
    return gpu_table(_GPU_TABLES, index)


def _launch_config(element_size: int, device=None) -> tuple[int, int]:
    """(bytes per program and tensor, num_warps) for tensors of `element_size`-byte elements on
    `device` (a torch.device, or None: the default entry's table)."""
    if _CONFIG_TABLE is not None:
        table = _CONFIG_TABLE
    elif device is None or device.type != "cuda":
        table = _GPU_TABLES[-1][1]
    else:
        table = _gpu_table(device.index if device.index is not None else torch.cuda.current_device())
    for size, tile_bytes, num_warps in table:
        if size in (None, element_size):
            return tile_bytes, num_warps
    raise AssertionError("unreachable: the last row of a launch table serves every element size")

# CUDA caps grid dimensions 1 and 2 at 65535 blocks; column tiles go there (row
# tiles use dimension 0, whose cap is 2**31 - 1).
_MAX_GRID_Y = 65535


# --------------------------------------------------------------------------- #
# Triton kernels
# --------------------------------------------------------------------------- #
@triton.jit
def _sigmoid_parts(g):
    """(s, e) in float32 with s = sigmoid(g) = 1 / (1 + e), e = exp(-g).

    Built from tl.exp because the interpreter has no libdevice.  Saturates
    without NaN: g -> -inf gives e = inf and s = 0, g -> +inf gives e = 0, s = 1.
    """
    e = tl.exp(-g)
    return 1.0 / (1.0 + e), e


@triton.jit
def _tile_offsets(row_block, col_block, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(row indices as int64 column vector, column indices as row vector, mask) of one tile."""
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    # int64 rows: row * row_stride passes 2**31 for large or widely strided tensors.
    return rows.to(tl.int64)[:, None], cols[None, :], mask


@triton.jit
def _silu_mul_fwd_kernel(
    gate_ptr,
    up_ptr,
    out_ptr,
    n_rows,
    n_cols,
    gate_row_stride,
    up_row_stride,
    out_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows, cols, mask = _tile_offsets(tl.program_id(0), tl.program_id(1), n_rows, n_cols, BLOCK_M, BLOCK_N)
    g = tl.load(gate_ptr + rows * gate_row_stride + cols, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + rows * up_row_stride + cols, mask=mask).to(tl.float32)
    s, _e = _sigmoid_parts(g)
    y = g * s * u
    tl.store(out_ptr + rows * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_mul_bwd_kernel(
    grad_ptr,
    gate_ptr,
    up_ptr,
    grad_gate_ptr,
    grad_up_ptr,
    n_rows,
    n_cols,
    grad_row_stride,
    gate_row_stride,
    up_row_stride,
    out_row_stride,  # d_gate and d_up are allocated alike
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows, cols, mask = _tile_offsets(tl.program_id(0), tl.program_id(1), n_rows, n_cols, BLOCK_M, BLOCK_N)
    dy = tl.load(grad_ptr + rows * grad_row_stride + cols, mask=mask).to(tl.float32)
    g = tl.load(gate_ptr + rows * gate_row_stride + cols, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + rows * up_row_stride + cols, mask=mask).to(tl.float32)
    s, e = _sigmoid_parts(g)
    # 1 - s cancels for large g; there e <= 1 and 1 - s = e / (1 + e) = e·s exactly.
    one_minus_s = tl.where(g >= 0, e * s, 1.0 - s)
    # d silu/dg = s·(1 + g·(1 - s)).  For g -> -inf, s is 0 before g·(1 - s) can
    # overflow; for g -> +inf, 1 - s is 0, so the product stays finite.
    d_silu = s * (1.0 + g * one_minus_s)
    out = rows * out_row_stride + cols
    tl.store(grad_gate_ptr + out, (dy * u * d_silu).to(grad_gate_ptr.dtype.element_ty), mask=mask)
    tl.store(grad_up_ptr + out, (dy * g * s).to(grad_up_ptr.dtype.element_ty), mask=mask)


# True when TRITON_INTERPRET=1 was set before this module was imported; only
# then can the kernels run on CPU tensors.
_INTERPRETED = isinstance(_silu_mul_fwd_kernel, _InterpretedFunction)


# --------------------------------------------------------------------------- #
# Layout and launch
# --------------------------------------------------------------------------- #
def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """t as a 2-D [rows, last dim] tensor whose last dimension is contiguous (stride 1).

    A view whenever one exists: row-strided inputs, such as a chunk of a merged
    [t, 2h] projection, and leading dimensions that merge into one row stride.
    Other layouts (a transposed last dimension, leading dimensions that cannot
    merge) are copied once, here, rather than complicating the kernels' indexing.
    """
    n_cols = t.shape[-1] if t.dim() else 1
    if n_cols > 1 and t.stride(-1) != 1:
        t = t.contiguous()
    return t.reshape(-1, n_cols)


def _rows_of(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors as 2-D rows for the kernels.

    When every tensor is contiguous and holds a whole number of tiles, they are seen
    as rows of one tile each ([numel / tile, tile]): consecutive programs then move
    consecutive memory, as a flat kernel does.  Row tiles of a [t, h] view would send
    consecutive programs (grid dimension 0) down a column, h elements apart, which
    ran measurably below Inductor's flat kernel at large MLP shapes in the suite
    (`mlpbench run --op silu_mul`).  Strided rows keep their [rows, last dim] layout.
    """
    tile = _launch_config(tensors[0].element_size(), tensors[0].device)[0] // tensors[0].element_size()
    if all(t.is_contiguous() for t in tensors) and tensors[0].numel() % tile == 0:
        return [t.reshape(-1, tile) for t in tensors]
    return [_as_rows(t) for t in tensors]


def _pow2_up_to(n, cap: int) -> int:
    """min(triton.next_power_of_2(n), cap) for a power of two cap.  A symbolic n (a SymInt while
    torch.compile traces the op) is only compared with cap / 2, a guard on its range; it is made a
    constant only when it is that small."""
    return cap if n > cap // 2 else triton.next_power_of_2(int(n))


def _tile(n_rows: int, n_cols: int, element_size: int, device=None) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): a tile of _launch_config's bytes per tensor, as wide as the row allows.

    Short rows get several rows per tile, so each program still moves a whole tile.
    """
    tile_elements = _launch_config(element_size, device)[0] // element_size
    block_n = _pow2_up_to(n_cols, tile_elements)
    block_m = _pow2_up_to(n_rows, tile_elements // block_n)
    return block_m, block_n


def _grid(n_rows: int, n_cols: int, block_m: int, block_n: int) -> tuple[int, int]:
    col_tiles = triton.cdiv(n_cols, block_n)
    if col_tiles > _MAX_GRID_Y:
        raise ValueError(
            f"silu_mul: last dimension {n_cols} needs {col_tiles} column tiles of {block_n}, "
            f"more than the {_MAX_GRID_Y} a CUDA grid dimension allows"
        )
    return triton.cdiv(n_rows, block_m), col_tiles


def _plan(tensors):
    """(grid, the kernel's scalar arguments, its constexprs) of the launch over `tensors`, 2-D rows
    of one shape with a contiguous last dimension (_rows_of).  The forward's three tensors each
    have a row stride argument; the backward's two gradients share the last one."""
    n_rows, n_cols = tensors[0].shape
    block_m, block_n = _tile(n_rows, n_cols, tensors[0].element_size(), tensors[0].device)
    grid = _grid(n_rows, n_cols, block_m, block_n)
    strides = [t.stride(0) for t in tensors[: min(len(tensors), 4)]]
    return grid, (n_rows, n_cols, *strides), {"BLOCK_M": block_m, "BLOCK_N": block_n}


def _on_device(device):
    """Triton launches on the current CUDA device: make it the tensors' one, skipping the switch
    when it already is (the common case, and a switch costs host time on every call)."""
    switch = device.type == "cuda" and device.index != torch.cuda.current_device()
    return torch.cuda.device(device) if switch else contextlib.nullcontext()


def _launch(kernel, device, tensors, tensor_args):
    """Run `kernel` on `tensor_args` (the tensors as the kernel reads them), planned from `tensors`."""
    grid, scalars, constexprs = _plan(tensors)
    with _on_device(device):
        launcher(kernel)(grid, (*tensor_args, *scalars), constexprs,
                         num_warps=_launch_config(tensors[0].element_size(), tensors[0].device)[1])


# --------------------------------------------------------------------------- #
# Input checks
# --------------------------------------------------------------------------- #
def _check_inputs(gate, up) -> None:
    """Shape, dtype and device checks shared by the public function, the ops and their fakes."""
    for name, t in (("gate", gate), ("up", up)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"silu_mul: {name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in (("gate", gate), ("up", up)):
        if not t.dtype.is_floating_point:
            raise TypeError(
                f"silu_mul: {name}.dtype={t.dtype} is not a floating dtype; "
                "supported: torch.float32, torch.bfloat16, torch.float16"
            )
    if gate.dtype != up.dtype:
        raise TypeError(f"silu_mul: gate and up must have the same dtype, got gate.dtype={gate.dtype} and up.dtype={up.dtype}")
    if gate.dtype not in _SUPPORTED_DTYPES:
        raise TypeError(f"silu_mul: unsupported dtype {gate.dtype}; supported: torch.float32, torch.bfloat16, torch.float16")
    if gate.device != up.device:
        raise ValueError(f"silu_mul: gate and up must be on the same device, got gate.device={gate.device} and up.device={up.device}")
    if gate.shape != up.shape:
        raise ValueError(
            f"silu_mul: gate and up must have the same shape, got gate.shape={tuple(gate.shape)} and up.shape={tuple(up.shape)}"
        )


def _check_grad(grad, gate) -> None:
    if grad.shape != gate.shape:
        raise ValueError(f"silu_mul: grad.shape={tuple(grad.shape)} must match gate.shape={tuple(gate.shape)}")
    if grad.device != gate.device:
        raise ValueError(f"silu_mul: grad.device={grad.device} must match gate.device={gate.device}")


def _check_runnable(device: torch.device) -> None:
    """Whether the Triton kernels can run on `device` (checked where they launch)."""
    if device.type == "cpu":
        if not _INTERPRETED:
            raise RuntimeError(
                "silu_mul: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 in the environment "
                "before the kernel is loaded (or pass CUDA tensors)"
            )
    elif device.type != "cuda":
        raise ValueError(f"silu_mul: unsupported device {device}; use a CUDA tensor (or CPU with TRITON_INTERPRET=1)")


# --------------------------------------------------------------------------- #
# torch.library ops
# --------------------------------------------------------------------------- #
# Two registrations of the same ops (_define_ops):
#
# - triton_op (compiled Triton, on a GPU): the body is traceable (PyTorch ops and kernels launched
#   through wrap_triton), so torch.compile decomposes the op into the kernel's launch, and
#   Inductor's generated code launches the kernel itself.  A custom_op stays opaque: the compiled
#   graph would call it through torch.library's Python dispatch on every call, host time that a
#   one-token decode feels.  The same body is the op's fake (meta) implementation, and, called with
#   real tensors outside tracing, it takes the planned path.
# - custom_op (under Triton's CPU interpreter): Inductor compiles a user kernel's source for a GPU,
#   so a compiled graph cannot launch an interpreted kernel; the opaque op calls it instead.
#
# The op namespace is the package's import name.  Loaded through `kernels`, that is
# metadata.json's id, which carries a digest of the sources: two different versions
# of this kernel in one process get separate ops.
_NAMESPACE = __name__.partition(".")[0]
_ops = getattr(torch.ops, _NAMESPACE)


# ----- custom_op bodies: called with real tensors (or fake ones by _fake_*) -----
def _forward(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    if _plain(gate, up):
        return _planned_forward(gate, up)
    return _general_forward(gate, up)


def _general_forward(gate, up):
    _check_inputs(gate, up)
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if out.numel() == 0:
        return out
    _check_runnable(gate.device)
    rows = _rows_of([gate, up, out])
    _launch(_silu_mul_fwd_kernel, gate.device, rows, rows)
    return out


def _backward(grad: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if _plain(grad, gate, up):
        return _planned_backward(grad, gate, up)
    return _general_backward(grad, gate, up)


def _general_backward(grad, gate, up):
    _check_inputs(gate, up)
    _check_grad(grad, gate)
    grad_gate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    grad_up = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel() == 0:
        return grad_gate, grad_up
    _check_runnable(gate.device)
    # Autograd may hand in a grad of another dtype or layout (e.g. the stride-0
    # expand of sum().backward()); _as_rows copies only what cannot be viewed.
    rows = _rows_of([grad.to(gate.dtype), gate, up, grad_gate, grad_up])
    _launch(_silu_mul_bwd_kernel, gate.device, rows, rows)
    return grad_gate, grad_up


def _fake_forward(gate, up):
    _check_inputs(gate, up)
    return torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)


def _fake_backward(grad, gate, up):
    _check_inputs(gate, up)
    _check_grad(grad, gate)
    return (
        torch.empty(gate.shape, dtype=gate.dtype, device=gate.device),
        torch.empty(gate.shape, dtype=gate.dtype, device=gate.device),
    )


# ----- triton_op bodies: traced with fake tensors by torch.compile, and their own fakes -----
# What they launch through wrap_triton: the kernels, or under the interpreter stand-ins that
# wrap_triton accepts (_fast_launch.traceable; used only when a test registers triton_ops there).
_FWD_KERNEL = traceable(_silu_mul_fwd_kernel)
_BWD_KERNEL = traceable(_silu_mul_bwd_kernel)


def _launches_here(device: torch.device) -> bool:
    """Whether a traced body launches on `device`: not on the meta device (shapes only)."""
    if device.type == "meta":
        return False
    _check_runnable(device)
    return True


def _rows_shape(t: torch.Tensor) -> tuple:
    """t's shape as [rows, last dim] (a 0-dim tensor is one row of one)."""
    return math.prod(t.shape[:-1]), (t.shape[-1] if t.dim() else 1)


def _traced_launch(kernel, inputs, outputs) -> None:
    """Launch `kernel` (wrap_triton's) over `inputs` (one shape, any layouts) into `outputs` (new
    contiguous 2-D [rows, last dim] tensors), with traceable Python only: sizes may be symbolic.

    The kernel gets every tensor as [rows, last dim], the layout of the buffer a linear layer
    writes, so Inductor's generated code passes such buffers as they are, without a view; the
    launch may be planned on other views of them (_rows_of)."""
    rows = [_as_rows(t) for t in inputs] + list(outputs)
    grid, scalars, constexprs = _plan(_rows_of(rows))
    kernel[grid](*rows, *scalars, **constexprs, num_warps=_launch_config(rows[0].element_size(), rows[0].device)[1])


def _traced_forward(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    if _plain(gate, up):  # real tensors, outside tracing
        return _planned_forward(gate, up)
    _check_inputs(gate, up)
    out = torch.empty(_rows_shape(gate), dtype=gate.dtype, device=gate.device)
    if gate.numel() and _launches_here(gate.device):
        _traced_launch(wrap_triton(_FWD_KERNEL), (gate, up), (out,))
    return out.view(gate.shape)


def _traced_backward(grad: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if _plain(grad, gate, up):
        return _planned_backward(grad, gate, up)
    _check_inputs(gate, up)
    _check_grad(grad, gate)
    grad_gate = torch.empty(_rows_shape(gate), dtype=gate.dtype, device=gate.device)
    grad_up = torch.empty(_rows_shape(gate), dtype=gate.dtype, device=gate.device)
    if gate.numel() and _launches_here(gate.device):
        _traced_launch(wrap_triton(_BWD_KERNEL), (grad.to(gate.dtype), gate, up), (grad_gate, grad_up))
    return grad_gate.view(gate.shape), grad_up.view(gate.shape)


# ----- registration -----
def _setup_context(ctx, inputs, output):
    gate, up = inputs
    # The inputs as given (views included): the backward kernel reads them in place.
    ctx.save_for_backward(gate, up)


def _define_ops(namespace: str, traced: bool) -> None:
    """Register `namespace`::silu_mul and ::silu_mul_backward: triton_ops when `traced`, else custom_ops.

    Defining an op again under the same name replaces the earlier definition, so the namespace
    must differ between versions (see _NAMESPACE)."""
    ops = getattr(torch.ops, namespace)

    def backward(ctx, grad_out):
        gate, up = ctx.saved_tensors
        grad_gate, grad_up = ops.silu_mul_backward(grad_out, gate, up)
        return (
            grad_gate if ctx.needs_input_grad[0] else None,
            grad_up if ctx.needs_input_grad[1] else None,
        )

    if traced:
        torch.library.triton_op(f"{namespace}::silu_mul_backward", _traced_backward, mutates_args=())
        forward_op = torch.library.triton_op(f"{namespace}::silu_mul", _traced_forward, mutates_args=())
    else:
        backward_op = torch.library.custom_op(f"{namespace}::silu_mul_backward", _backward, mutates_args=())
        backward_op.register_fake(_fake_backward)
        forward_op = torch.library.custom_op(f"{namespace}::silu_mul", _forward, mutates_args=())
        forward_op.register_fake(_fake_forward)
    forward_op.register_autograd(backward, setup_context=_setup_context)


_define_ops(_NAMESPACE, traced=not _INTERPRETED)


# --------------------------------------------------------------------------- #
# The planned path: what an eager call pays
# --------------------------------------------------------------------------- #
# Between Python and the kernel an eager call pays for the op's dispatch (torch.library), the
# checks, the views and Triton's binding of every argument.  So each key of shapes, strides, dtypes
# and devices is checked and planned once; later calls with that key allocate and launch only.
# The public function takes this path directly outside torch.compile (skipping the op's dispatch),
# and the ops' bodies take it too when called with real tensors (a direct call of the op; under the
# interpreter, what a compiled graph calls).  Layouts the kernels cannot read in place and empty
# tensors take the general path.
_FORWARD_PLANS = {}
_BACKWARD_PLANS = {}


def _plain(*tensors) -> bool:
    return plain(tensors, _INTERPRETED)


def _in_place_plan(tensors):
    """(token, *_plan, num_warps) of the tensors as they lie, or None where the kernels would need a
    copy of one."""
    rows = _rows_of(list(tensors))
    if any(r.data_ptr() != t.data_ptr() for r, t in zip(rows, tensors)):
        return None
    return token(), *_plan(rows), _launch_config(rows[0].element_size(), rows[0].device)[1]


def _planned_forward(gate, up):
    key = plan_key((gate, up))
    plan = _FORWARD_PLANS.get(key)
    out = gate.new_empty(gate.shape)
    if plan is None:
        _check_inputs(gate, up)
        _check_runnable(gate.device)
        plan = (gate.numel() and _in_place_plan((gate, up, out))) or False
        remember(_FORWARD_PLANS, key, plan)
    if not plan:
        return _general_forward(gate, up)
    with _on_device(gate.device):
        launcher(_silu_mul_fwd_kernel).planned(plan[0], plan[1], (gate, up, out), *plan[2:4], num_warps=plan[4])
    return out


def _planned_backward(grad, gate, up):
    key = plan_key((grad, gate, up))
    plan = _BACKWARD_PLANS.get(key)
    grad_gate = gate.new_empty(gate.shape)
    grad_up = gate.new_empty(gate.shape)
    if plan is None:
        _check_inputs(gate, up)
        _check_grad(grad, gate)
        _check_runnable(gate.device)
        same = grad.dtype == gate.dtype and gate.numel()
        plan = (same and _in_place_plan((grad, gate, up, grad_gate, grad_up))) or False
        remember(_BACKWARD_PLANS, key, plan)
    if not plan:
        return _general_backward(grad, gate, up)
    with _on_device(gate.device):
        launcher(_silu_mul_bwd_kernel).planned(plan[0], plan[1], (grad, gate, up, grad_gate, grad_up), *plan[2:4],
                                               num_warps=plan[4])
    return grad_gate, grad_up


class _Differentiable(torch.autograd.Function):
    """silu_mul with its fused backward, for eager calls that want a gradient."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return _planned_forward(gate, up)

    @staticmethod
    def backward(ctx, grad_out):
        gate, up = ctx.saved_tensors
        return _planned_backward(grad_out, gate, up)


# --------------------------------------------------------------------------- #
# Public entry point
# --------------------------------------------------------------------------- #
def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, fused in one Triton kernel; differentiable; traceable by torch.compile.

    Computed in float32, stored in the inputs' dtype (float32, bfloat16 or float16).
    gate and up must have the same shape, dtype and device.  Rows may be strided
    (the last dimension contiguous) and are then read in place; other layouts are
    copied first.  The result is a new contiguous tensor of the inputs' shape.
    """
    if not torch.compiler.is_compiling() and _plain(gate, up):
        if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
            return _Differentiable.apply(gate, up)
        return _planned_forward(gate, up)
    # Checked here too so that errors name the Python-level problem before the
    # op's schema sees the arguments (a list passed as gate, say).
    _check_inputs(gate, up)
    return _ops.silu_mul(gate, up)
