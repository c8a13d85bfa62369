"""Fused GeLU(tanh)·mul in Triton: out = gelu_tanh(gate) * up, forward and backward.

    out    = gelu(g) · u,     gelu(g) = g · s,  s = sigmoid(2z),  z = √(2/π)·(g + 0.044715·g³)
    d_gate = dy · u · gelu'(g)
    d_up   = dy · gelu(g)

Both directions are pure streaming: every element is read once and written
once, so time is bytes moved divided by memory bandwidth.  Per element:

    forward:  read gate, up         write out               3 · element_size bytes
    backward: read grad, gate, up   write d_gate, d_up      5 · element_size bytes

The kernels see their tensors as 2-D [rows, cols] with a contiguous last
dimension and a row stride per tensor, and each program handles one
BLOCK_M × BLOCK_N tile:

- When every tensor is contiguous (activations from nn.Linear), they are one
  row of numel elements: BLOCK_M = 1 and each program moves BLOCK_N
  consecutive elements: flat 1-D blocks with 16-byte vector accesses, so the
  kernel's time is set by memory bandwidth, as a copy's is.
- When rows are strided (the two halves of a merged [t, 2h] gate/up
  projection, chunked into [t, h] views), tiles follow the rows and each
  tensor's row stride is a kernel argument: the halves are read, and their
  gradients written, in place.  Other layouts are copied once.

Math is float32; each output is rounded once to the tensor dtype on store.

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
except ImportError:  # pragma: no cover - very old/new Triton without the interpreter
    _InterpretedFunction = ()

_SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --------------------------------------------------------------------------- #
# Launch configuration: the one place to tune (scripts/elementwise_sweep.py sweeps it).
# --------------------------------------------------------------------------- #
# Rows are (element size in bytes, or None for any; largest tensor size in bytes; bytes per
# program and tensor; num_warps); the first row whose element size and size bound hold wins.
# Bytes rather than elements, so that one row serves every dtype of a size.  Strided rows use
# the same bytes per program, as BLOCK_M × BLOCK_N tiles.
# The table depends on the GPU: the first entry of _GPU_TABLES whose name fragment is in the
# device's name serves it, the last every other GPU and the interpreter.
# Each GPU's rows are what scripts/elementwise_sweep.py and a paired run pick on that GPU.
# - H100: 1024 elements a program, 8 bytes (two fp32 or four 16-bit elements) per thread and
#   tensor, so 2 KiB over 8 warps at 2 bytes and 4 KiB over 16 at float32.
# - Any other GPU: 2 KiB over 4 warps, one 16-byte vector per thread and tensor (the H200's
#   rows: the H100's fall behind compiled there at large shapes).
_GPU_TABLES = (
    ("H100", ((4, float("inf"), 4096, 16), (None, float("inf"), 2048, 8))),
    (None, ((None, float("inf"), 2048, 4),)),
)
# A table forced for every device (scripts/elementwise_sweep.py sets one per candidate), or None:
# the device's own from _GPU_TABLES.
_CONFIG_TABLE = None
# CUDA caps grid dimensions 1 and 2 at 65535 blocks.  Column tiles go on dimension 0
# (cap 2**31 - 1, enough for one row of any tensor), row tiles on dimension 1: more
# row tiles than that are launched in several grids (see _launch).
_MAX_GRID_Y = 65535


@functools.lru_cache(maxsize=None)
def _gpu_table(index: int) -> tuple:
    return gpu_table(_GPU_TABLES, index)


def _table(device) -> tuple:
    """The launch table for tensors on `device` (a torch.device, or None: the default entry's)."""
    if _CONFIG_TABLE is not None:
        return _CONFIG_TABLE
    if device is None or device.type != "cuda":
        return _GPU_TABLES[-1][1]
    return _gpu_table(device.index if device.index is not None else torch.cuda.current_device())


def _launch_config(numel: int, element_size: int, device=None) -> tuple[int, int]:
    """(elements per program and tensor, num_warps) for tensors of `numel` elements on `device`."""
    nbytes = numel * element_size
    for size, max_bytes, block_bytes, num_warps in _table(device):
        if size not in (None, element_size):
            continue
        # An unbounded row is not compared: numel may be symbolic (a SymInt while torch.compile traces).
        if max_bytes == float("inf") or nbytes <= max_bytes:
            return block_bytes // element_size, num_warps
    raise AssertionError("unreachable: the last row of a launch table is unbounded and serves every size")


def _needs_int64(extent: int, block_size: int) -> bool:
    # `extent` bounds the offsets of the elements a launch touches; a program's
    # offsets stay below extent + block_size.  int32 only while that is below 2**31.
    return extent + block_size > 2**31 - 1


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
def _tile_index(
    n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_ROW: tl.constexpr, USE_INT64: tl.constexpr
):
    """(rows [BLOCK_M, 1], cols [1, BLOCK_N], full) of this program's tile.

    Column tiles are grid dimension 0, row tiles dimension 1.  `full` is true when the
    whole tile is in bounds: such tiles skip the mask, so the compiler proves 16-byte
    alignment and contiguity and emits vector loads/stores even when n_cols is not a
    multiple of 16 (a mask built from such an n would split the vectors).

    ONE_ROW (contiguous tensors seen as one row; BLOCK_M is 1): rows are the constant
    0, so `rows * row_stride + cols` folds to `cols` at compile time and the kernel is
    the flat 1-D one: offsets pid · BLOCK_N + arange(BLOCK_N), one bounds check.
    """
    col_block = tl.program_id(0)
    if USE_INT64:
        col_block = col_block.to(tl.int64)
    col_start = col_block * BLOCK_N
    cols = col_start + tl.arange(0, BLOCK_N)
    if ONE_ROW:
        rows = tl.zeros([BLOCK_M], dtype=cols.dtype)
        full = col_start + BLOCK_N <= n_cols
    else:
        row_block = tl.program_id(1)
        if USE_INT64:
            row_block = row_block.to(tl.int64)
        row_start = row_block * BLOCK_M
        rows = row_start + tl.arange(0, BLOCK_M)
        full = (row_start + BLOCK_M <= n_rows) & (col_start + BLOCK_N <= n_cols)
    return rows[:, None], cols[None, :], full


@triton.jit
def _gelu_mul_fwd_kernel(
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
    ONE_ROW: tl.constexpr,
    USE_INT64: tl.constexpr,
):
    rows, cols, full = _tile_index(n_rows, n_cols, BLOCK_M, BLOCK_N, ONE_ROW, USE_INT64)
    # Offsets here, pointers in each branch: the order the flat kernel had, which the
    # backward was slightly faster with than with pointers built up front.
    gate_offs = rows * gate_row_stride + cols
    up_offs = rows * up_row_stride + cols
    out_offs = rows * out_row_stride + cols
    if full:
        g = tl.load(gate_ptr + gate_offs)  # reads BLOCK_M * BLOCK_N * element_size bytes
        u = tl.load(up_ptr + up_offs)  # reads BLOCK_M * BLOCK_N * element_size bytes
        gelu, _s, _e = _gelu_tanh_parts(g.to(tl.float32))
        y = gelu * u.to(tl.float32)
        tl.store(out_ptr + out_offs, y.to(out_ptr.dtype.element_ty))  # writes BLOCK_M * BLOCK_N * element_size bytes
    else:  # a tile on the ragged edge
        mask = (rows < n_rows) & (cols < n_cols)
        g = tl.load(gate_ptr + gate_offs, mask=mask)
        u = tl.load(up_ptr + up_offs, mask=mask)
        gelu, _s, _e = _gelu_tanh_parts(g.to(tl.float32))
        y = gelu * u.to(tl.float32)
        tl.store(out_ptr + out_offs, y.to(out_ptr.dtype.element_ty), mask=mask)


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
    n_rows,
    n_cols,
    grad_row_stride,
    gate_row_stride,
    up_row_stride,
    grad_gate_row_stride,
    grad_up_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ONE_ROW: tl.constexpr,
    USE_INT64: tl.constexpr,
):
    rows, cols, full = _tile_index(n_rows, n_cols, BLOCK_M, BLOCK_N, ONE_ROW, USE_INT64)
    grad_offs = rows * grad_row_stride + cols
    gate_offs = rows * gate_row_stride + cols
    up_offs = rows * up_row_stride + cols
    grad_gate_offs = rows * grad_gate_row_stride + cols
    grad_up_offs = rows * grad_up_row_stride + cols
    # Same full-tile / ragged-edge split as the forward kernel.
    if full:
        dy = tl.load(grad_ptr + grad_offs)  # reads BLOCK_M * BLOCK_N * element_size bytes
        g = tl.load(gate_ptr + gate_offs)  # reads BLOCK_M * BLOCK_N * element_size bytes
        u = tl.load(up_ptr + up_offs)  # reads BLOCK_M * BLOCK_N * element_size bytes
        dg, du = _gelu_mul_grads(dy.to(tl.float32), g.to(tl.float32), u.to(tl.float32))
        tl.store(grad_gate_ptr + grad_gate_offs, dg.to(grad_gate_ptr.dtype.element_ty))  # writes BLOCK_M * BLOCK_N * element_size bytes
        tl.store(grad_up_ptr + grad_up_offs, du.to(grad_up_ptr.dtype.element_ty))  # writes BLOCK_M * BLOCK_N * element_size bytes
    else:
        mask = (rows < n_rows) & (cols < n_cols)
        dy = tl.load(grad_ptr + grad_offs, mask=mask)
        g = tl.load(gate_ptr + gate_offs, mask=mask)
        u = tl.load(up_ptr + up_offs, mask=mask)
        dg, du = _gelu_mul_grads(dy.to(tl.float32), g.to(tl.float32), u.to(tl.float32))
        tl.store(grad_gate_ptr + grad_gate_offs, dg.to(grad_gate_ptr.dtype.element_ty), mask=mask)
        tl.store(grad_up_ptr + grad_up_offs, du.to(grad_up_ptr.dtype.element_ty), mask=mask)


# True when TRITON_INTERPRET=1 was set before this module was imported; only
# then can the kernels run on CPU tensors.
_INTERPRETED = isinstance(_gelu_mul_fwd_kernel, _InterpretedFunction)


# --------------------------------------------------------------------------- #
# Layout and launch
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


def _n_cols(t: torch.Tensor) -> int:
    return t.shape[-1] if t.dim() else 1


def _rows_view(t: torch.Tensor):
    """t as a 2-D [rows, last dim] view whose last dimension has stride 1, or None if none exists.

    Row-strided tensors (a chunk of a merged [t, 2h] projection, a stride-0 row
    broadcast) and leading dimensions that merge into one row stride have one.
    """
    n_cols = _n_cols(t)
    if n_cols > 1 and t.stride(-1) != 1:
        return None
    try:
        return t.view(-1, n_cols)
    except RuntimeError:  # leading dimensions that do not merge into one row stride
        return None


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """_rows_view(t), or else a contiguous copy as [rows, last dim]: layouts such as a
    transposed last dimension are copied once, here, rather than complicating the kernels."""
    rows = _rows_view(t)
    return rows if rows is not None else t.contiguous().view(-1, _n_cols(t))


def _pow2_up_to(n, cap: int) -> int:
    """min(triton.next_power_of_2(n), cap) for a power of two cap.  A symbolic n (a SymInt while
    torch.compile traces the op) is only compared with cap / 2, a guard on its range; it is made a
    constant only when it is that small."""
    return cap if n > cap // 2 else triton.next_power_of_2(int(n))


def _tile_shape(n_rows: int, n_cols: int, tile_elements: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): a tile of up to tile_elements, as wide as the row allows.

    Short rows get several rows per tile, so each program still moves a whole tile.
    """
    block_n = _pow2_up_to(n_cols, tile_elements)
    block_m = _pow2_up_to(n_rows, tile_elements // block_n)
    return block_m, block_n


def _launch_plan(n_rows: int, n_cols: int, contiguous: bool, element_size: int, config=None, device=None):
    """(n_rows, n_cols, BLOCK_M, BLOCK_N, num_warps) of a launch over [n_rows, n_cols] tensors.

    Contiguous tensors become one row of n_rows · n_cols elements: flat blocks of
    BLOCK_N = the whole tile.  `config` is (tile elements, num_warps), _launch_config's by default.
    """
    if contiguous:
        n_rows, n_cols = 1, n_rows * n_cols
    tile_elements, num_warps = config if config is not None else _launch_config(n_rows * n_cols, element_size, device)
    block_m, block_n = _tile_shape(n_rows, n_cols, tile_elements)
    return n_rows, n_cols, block_m, block_n, num_warps


def _launches(tensors, config):
    """(views of `tensors`, grid, the kernel's scalar arguments, its constexprs, num_warps) of each
    launch over `tensors`: 2-D [rows, cols] of one shape, each with a contiguous last dimension."""
    n_rows, n_cols = tensors[0].shape
    contiguous = all(t.is_contiguous() for t in tensors)
    if contiguous:
        tensors = [t.view(1, -1) for t in tensors]
    n_rows, n_cols, block_m, block_n, num_warps = _launch_plan(
        n_rows, n_cols, contiguous, tensors[0].element_size(), config, tensors[0].device
    )
    # Row tiles beyond grid dimension 1's cap go in further launches, each over a
    # slice (a view) of the rows.  Contiguous tensors are one row: one launch.
    rows_per_launch = _MAX_GRID_Y * block_m
    if n_rows <= rows_per_launch:  # compared, not iterated: n_rows may be symbolic
        starts = [None]
    else:
        starts = range(0, n_rows, rows_per_launch)
    for start in starts:
        part = tensors if start is None else [t[start : start + rows_per_launch] for t in tensors]
        rows = part[0].shape[0]
        # A single row's stride is never used (ONE_ROW): 0 for all, whatever the view.
        strides = [t.stride(0) if rows > 1 else 0 for t in part]
        extent = (rows + block_m) * max(strides) + n_cols
        grid = (triton.cdiv(n_cols, block_n), triton.cdiv(rows, block_m))
        constexprs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ONE_ROW": bool(rows == 1 and block_m == 1),
                      "USE_INT64": bool(_needs_int64(extent, block_n))}
        yield part, grid, (rows, n_cols, *strides), constexprs, num_warps


def _on_device(device):
    """Triton launches on the current CUDA device: make it the tensors' one, skipping the switch
    when it already is (the common case, and a switch costs host time on every call)."""
    switch = device.type == "cuda" and device.index != torch.cuda.current_device()
    return torch.cuda.device(device) if switch else contextlib.nullcontext()


def _launch(kernel, tensors, config) -> None:
    """Run `kernel` over `tensors`: 2-D [rows, cols] of one shape, each with a contiguous last dimension."""
    launch = launcher(kernel)
    with _on_device(tensors[0].device):
        for part, grid, scalars, constexprs, num_warps in _launches(tensors, config):
            launch(grid, (*part, *scalars), constexprs, num_warps=num_warps)


def _forward_into(gate, up, out, config):
    """out <- gelu(gate) * up.  gate/up/out: same shape, dtype, device, any layouts."""
    if gate.numel() == 0:
        return out
    _check_runnable(gate.device)
    out_rows = _rows_view(out)
    # An out without a rows view (e.g. transposed) is written through a temporary.
    if out_rows is None:
        target = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device).view(-1, _n_cols(gate))
    else:
        target = out_rows
    _launch(_gelu_mul_fwd_kernel, (_as_rows(gate), _as_rows(up), target), config)
    if out_rows is None:
        out.copy_(target.view(out.shape))
    return out


# --------------------------------------------------------------------------- #
# Input checks
# --------------------------------------------------------------------------- #
def _check_inputs(gate, up) -> None:
    """Type, dtype, device and shape checks shared by the public function, the ops and their fakes."""
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


def _check_grad(grad, gate) -> None:
    if grad.shape != gate.shape:
        raise ValueError(f"gelu_mul: grad.shape={tuple(grad.shape)} must match gate.shape={tuple(gate.shape)}")
    if grad.device != gate.device:
        raise ValueError(f"gelu_mul: grad.device={grad.device} must match gate.device={gate.device}")


def _check_out(out, gate) -> None:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"gelu_mul: out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != gate.dtype:
        raise TypeError(f"gelu_mul: out.dtype={out.dtype} must match the inputs' dtype {gate.dtype}")
    if out.device != gate.device:
        raise ValueError(f"gelu_mul: out.device={out.device} must match the inputs' device {gate.device}")
    if out.shape != gate.shape:
        raise ValueError(f"gelu_mul: out.shape={tuple(out.shape)} must match the inputs' shape {tuple(gate.shape)}")


def _check_runnable(device: torch.device) -> None:
    """Whether the Triton kernels can run on `device`."""
    if device.type == "cpu":
        if not _INTERPRETED:
            raise RuntimeError(
                "gelu_mul: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 in the environment "
                "before the kernel is loaded (or pass CUDA tensors)"
            )
    elif device.type != "cuda":
        raise ValueError(f"gelu_mul: unsupported device {device}; use a CUDA tensor (or CPU with TRITON_INTERPRET=1)")


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


def _op_config(block_size: int, num_warps: int):
    # The ops take the internal `_config` override as two ints; 0, 0 is the table's.
    return (block_size, num_warps) if block_size else None


# ----- custom_op bodies: called with real tensors (or fake ones by _fake_*) -----
def _forward(gate: torch.Tensor, up: torch.Tensor, block_size: int = 0, num_warps: int = 0) -> torch.Tensor:
    if not block_size and _plain(gate, up):
        return _planned_forward(gate, up)
    return _general_forward(gate, up, block_size, num_warps)


def _general_forward(gate, up, block_size=0, num_warps=0):
    _check_inputs(gate, up)
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    return _forward_into(gate, up, out, _op_config(block_size, num_warps))


def _backward(
    grad: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, block_size: int = 0, num_warps: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    if not block_size and _plain(grad, gate, up):
        return _planned_backward(grad, gate, up)
    return _general_backward(grad, gate, up, block_size, num_warps)


def _general_backward(grad, gate, up, block_size=0, num_warps=0):
    _check_inputs(gate, up)
    _check_grad(grad, gate)
    grad_gate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    grad_up = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel() == 0:
        return grad_gate, grad_up
    _check_runnable(gate.device)
    # Autograd may hand in a grad of another dtype or layout (e.g. the stride-0
    # expand of sum().backward()); _as_rows copies only what cannot be viewed.
    tensors = (_as_rows(grad.to(gate.dtype)), _as_rows(gate), _as_rows(up), _as_rows(grad_gate), _as_rows(grad_up))
    _launch(_gelu_mul_bwd_kernel, tensors, _op_config(block_size, num_warps))
    return grad_gate, grad_up


def _fake_forward(gate, up, block_size=0, num_warps=0):
    _check_inputs(gate, up)
    return torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)


def _fake_backward(grad, gate, up, block_size=0, num_warps=0):
    _check_inputs(gate, up)
    _check_grad(grad, gate)
    return (
        torch.empty(gate.shape, dtype=gate.dtype, device=gate.device),
        torch.empty(gate.shape, dtype=gate.dtype, device=gate.device),
    )


# ----- triton_op bodies: traced with fake tensors by torch.compile, and their own fakes -----
# What they launch through wrap_triton: the kernels, or under the interpreter stand-ins that
# wrap_triton accepts (_fast_launch.traceable; used only when a test registers triton_ops there).
_FWD_KERNEL = traceable(_gelu_mul_fwd_kernel)
_BWD_KERNEL = traceable(_gelu_mul_bwd_kernel)


def _launches_here(device: torch.device) -> bool:
    """Whether a traced body launches on `device`: not on the meta device (shapes only)."""
    if device.type == "meta":
        return False
    _check_runnable(device)
    return True


def _rows_shape(t: torch.Tensor) -> tuple:
    """t's shape as [rows, last dim] (a 0-dim tensor is one row of one)."""
    return math.prod(t.shape[:-1]), _n_cols(t)


def _traced_launch(kernel, inputs, outputs, config) -> None:
    """Launch `kernel` (wrap_triton's) once over `inputs` (one shape, any layouts) into `outputs`
    (new contiguous 2-D [rows, last dim] tensors), with traceable Python only: sizes may be symbolic.

    The kernel gets every tensor as [rows, last dim], the layout of the buffer a linear layer
    writes, so Inductor's generated code passes such buffers as they are, without a view; the
    flat (one row) launch of contiguous tensors is planned on views of them.  Layouts without a rows
    view are copied; so is everything when the rows need more than one grid.
    """
    rows = [_as_rows(t) for t in inputs] + list(outputs)
    plans = list(_launches(rows, config))
    if len(plans) > 1:  # more row tiles than one grid holds: contiguous tensors are one row
        rows = [t.contiguous() for t in rows]
        plans = list(_launches(rows, config))
    _, grid, scalars, constexprs, num_warps = plans[0]
    kernel[grid](*rows, *scalars, **constexprs, num_warps=num_warps)


def _traced_forward(gate: torch.Tensor, up: torch.Tensor, block_size: int = 0, num_warps: int = 0) -> torch.Tensor:
    if not block_size and _plain(gate, up):  # real tensors, outside tracing
        return _planned_forward(gate, up)
    _check_inputs(gate, up)
    out = torch.empty(_rows_shape(gate), dtype=gate.dtype, device=gate.device)
    if gate.numel() and _launches_here(gate.device):
        _traced_launch(wrap_triton(_FWD_KERNEL), (gate, up), (out,), _op_config(block_size, num_warps))
    return out.view(gate.shape)


def _traced_backward(
    grad: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, block_size: int = 0, num_warps: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    if not block_size and _plain(grad, gate, up):
        return _planned_backward(grad, gate, up)
    _check_inputs(gate, up)
    _check_grad(grad, gate)
    grad_gate = torch.empty(_rows_shape(gate), dtype=gate.dtype, device=gate.device)
    grad_up = torch.empty(_rows_shape(gate), dtype=gate.dtype, device=gate.device)
    if gate.numel() and _launches_here(gate.device):
        _traced_launch(wrap_triton(_BWD_KERNEL), (grad.to(gate.dtype), gate, up), (grad_gate, grad_up),
                       _op_config(block_size, num_warps))
    return grad_gate.view(gate.shape), grad_up.view(gate.shape)


# ----- registration -----
def _setup_context(ctx, inputs, output):
    gate, up, block_size, num_warps = inputs
    # The inputs as given (views included): the backward kernel reads them in place.
    ctx.save_for_backward(gate, up)
    ctx.config = (block_size, num_warps)


def _define_ops(namespace: str, traced: bool) -> None:
    """Register `namespace`::gelu_mul and ::gelu_mul_backward: triton_ops when `traced`, else custom_ops.

    Defining an op again under the same name replaces the earlier definition, so the namespace
    must differ between versions (see _NAMESPACE)."""
    ops = getattr(torch.ops, namespace)

    def backward(ctx, grad_out):
        gate, up = ctx.saved_tensors
        grad_gate, grad_up = ops.gelu_mul_backward(grad_out, gate, up, *ctx.config)
        return (
            grad_gate if ctx.needs_input_grad[0] else None,
            grad_up if ctx.needs_input_grad[1] else None,
            None,
            None,
        )

    if traced:
        torch.library.triton_op(f"{namespace}::gelu_mul_backward", _traced_backward, mutates_args=())
        forward_op = torch.library.triton_op(f"{namespace}::gelu_mul", _traced_forward, mutates_args=())
    else:
        backward_op = torch.library.custom_op(f"{namespace}::gelu_mul_backward", _backward, mutates_args=())
        backward_op.register_fake(_fake_backward)
        forward_op = torch.library.custom_op(f"{namespace}::gelu_mul", _forward, mutates_args=())
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
# interpreter, what a compiled graph calls).  Layouts the kernels cannot read in place, several
# launches and empty tensors take the general path.
_FORWARD_PLANS = {}
_BACKWARD_PLANS = {}


def _plain(*tensors) -> bool:
    return plain(tensors, _INTERPRETED)


def _single_launch(tensors):
    """(token, grid, scalars, constexprs, num_warps) of the one launch that covers `tensors` as
    they lie, or None: a layout that needs a copy, or more rows than one grid holds."""
    rows = [_rows_view(t) for t in tensors]
    if any(r is None for r in rows):
        return None
    plans = list(_launches(rows, None))
    if len(plans) != 1:
        return None
    _, grid, scalars, constexprs, num_warps = plans[0]
    return token(), grid, scalars, constexprs, num_warps


def _planned_forward(gate, up):
    key = plan_key((gate, up))
    plan = _FORWARD_PLANS.get(key)
    out = gate.new_empty(gate.shape)
    if plan is None:
        _check_inputs(gate, up)
        _check_runnable(gate.device)
        plan = (gate.numel() and _single_launch((gate, up, out))) or False
        remember(_FORWARD_PLANS, key, plan)
    if not plan:
        return _general_forward(gate, up)
    with _on_device(gate.device):
        launcher(_gelu_mul_fwd_kernel).planned(plan[0], plan[1], (gate, up, out), *plan[2:4], num_warps=plan[4])
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
        plan = (same and _single_launch((grad, gate, up, grad_gate, grad_up))) or False
        remember(_BACKWARD_PLANS, key, plan)
    if not plan:
        return _general_backward(grad, gate, up)
    with _on_device(gate.device):
        launcher(_gelu_mul_bwd_kernel).planned(plan[0], plan[1], (grad, gate, up, grad_gate, grad_up), *plan[2:4],
                                               num_warps=plan[4])
    return grad_gate, grad_up


class _Differentiable(torch.autograd.Function):
    """gelu_mul with its fused backward, for eager calls that want a gradient."""

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
def gelu_mul(gate: torch.Tensor, up: torch.Tensor, *, out: torch.Tensor | None = None, _config=None) -> torch.Tensor:
    """gelu_tanh(gate) * up, fused in one Triton kernel; differentiable; traceable by torch.compile.

    Computed in float32, stored in the inputs' dtype (float32, bfloat16 or float16).
    gate and up must have the same shape, dtype and device.  Rows may be strided
    (the last dimension contiguous) and are then read in place; other layouts are
    copied first.  The result is a new contiguous tensor of the inputs' shape.
    With `out=`, the result is written there and `out` is returned (eager only,
    no autograd).

    `_config=(BLOCK_SIZE, num_warps)` is internal, for tuning sweeps: it overrides
    `_launch_config` for this call (and its backward); BLOCK_SIZE is the elements
    per program and tensor.
    """
    if out is None and _config is None and not torch.compiler.is_compiling() and _plain(gate, up):
        if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
            return _Differentiable.apply(gate, up)
        return _planned_forward(gate, up)
    # Checked here too so that errors name the Python-level problem before the
    # op's schema sees the arguments (a list passed as gate, say).
    _check_inputs(gate, up)
    if out is not None:
        _check_out(out, gate)
    _check_runnable(gate.device)
    block_size, num_warps = _check_config(_config) if _config is not None else (0, 0)
    if out is not None:
        if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
            raise RuntimeError(
                "gelu_mul: out= does not support autograd (gate or up requires grad); call without out= to differentiate"
            )
        return _forward_into(gate, up, out, _config)
    if _config is None:
        return _ops.gelu_mul(gate, up)
    return _ops.gelu_mul(gate, up, block_size, num_warps)
