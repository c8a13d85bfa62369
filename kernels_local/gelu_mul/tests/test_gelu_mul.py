"""Tests for the gelu_mul kernel repository, loaded through `kernels.get_local_kernel`.

Run from the repository root:  python -m pytest kernels_local/gelu_mul -q
Tests run on CUDA when it is available, else on CPU under the Triton interpreter
(conftest.py sets TRITON_INTERPRET=1 when there is no GPU).
"""

import importlib
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import kernels

from mlpbench.sources import kernel_repo

REPO = Path(__file__).resolve().parents[1]
# What kernels loads: build/torch-universal, written from torch-ext/ into mlpbench's cache (none is committed).
BUILT = kernel_repo(REPO.name)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]

# (rtol, atol) against the float64 reference.  Math is float32 and the result
# is rounded once, so low precision is within half an ulp (2**-9 bf16, 2**-11
# fp16) plus float32 error; we allow one ulp.  atol covers values near zero
# (fp16 subnormals, the zero crossing of d gelu/dg).
TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.bfloat16: (2**-8, 1e-5),
    torch.float16: (2**-10, 1e-5),
}
if DEVICE == "cpu":
    # The Triton interpreter truncates float32 -> bfloat16 instead of rounding to
    # nearest even as the GPU does (triton/runtime/interpreter.py, cast_impl), so
    # it can be a full bf16 ulp off.
    TOL[torch.bfloat16] = (2**-7 + 2**-12, 1e-5)

# The interpreter costs ~3 ms per program, so on CPU the large shapes use one
# big block per 64K elements; the kernel code is the same, only BLOCK_SIZE differs
# (the default table itself is exercised by every small shape and test_launch_config).
BIG = None if DEVICE == "cuda" else (65536, 4)


@pytest.fixture(scope="module")
def impl(kernel):
    """The implementation module, for its launch helpers and kernels."""
    return importlib.import_module(kernel.__name__ + "._gelu_mul")


Launch = namedtuple("Launch", "name grid args meta")


class _Recording:
    """Stands in for a Triton kernel: records each `kernel[grid](*args, **meta)` and runs it."""

    def __init__(self, name, fn, calls):
        self.name, self.fn, self.calls = name, fn, calls

    def __getitem__(self, grid):
        run = self.fn[grid]

        def record(*args, **meta):
            self.calls.append(Launch(self.name, grid, args, meta))
            return run(*args, **meta)

        return record


@pytest.fixture
def launches(impl, monkeypatch):
    """Every Triton kernel launch from here on, as Launch(kernel name, grid, arguments, keywords).

    The arguments are exactly what the kernel gets: its tensors (their data_ptr shows
    whether a copy was made), the row count and length, and the row strides.
    """
    calls = []
    for name in ("_gelu_mul_fwd_kernel", "_gelu_mul_bwd_kernel"):
        monkeypatch.setattr(impl, name, _Recording(name, getattr(impl, name), calls))
    return calls


def reference(gate, up):
    return F.gelu(gate.double(), approximate="tanh") * up.double()


def assert_close(actual, expected, dtype):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(actual.double(), expected, rtol=rtol, atol=atol, equal_nan=True)


def randn(shape, dtype, seed=0, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(dtype).to(DEVICE)


def grads(gate, up, dy, fn):
    """Gradients of <fn(gate, up), dy> w.r.t. gate and up.

    The leaves are detached aliases of gate/up with the same strides, so the
    kernel sees the original layout (slice, transpose, stride-0 expand) and the
    gradients are per element: no autograd reduction (e.g. summing an expand's
    gradient in bf16) mixes its own rounding into the comparison.
    """
    g = gate.detach().requires_grad_()
    u = up.detach().requires_grad_()
    fn(g, u).backward(dy)
    return g.grad, u.grad


def check_backward(kernel, gate, up, seed=7, config=None):
    dtype = gate.dtype
    dy = randn(gate.shape, dtype, seed=seed)
    gg, gu = grads(gate, up, dy, lambda g, u: kernel.gelu_mul(g, u, _config=config))
    rg, ru = grads(gate.double(), up.double(), dy.double(), reference)
    assert gg.dtype == gu.dtype == dtype
    assert gg.shape == gu.shape == gate.shape
    assert_close(gg, rg, dtype)
    assert_close(gu, ru, dtype)


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
def test_loads_through_kernels(kernel):
    assert callable(kernel.gelu_mul)
    layer = kernel.layers.GeGLUMLP
    assert layer.__name__ == "GeGLUMLP"
    assert layer.has_backward is True and layer.can_torch_compile is True
    meta = next(k.metadata for k in kernels.get_loaded_kernels() if k.module is kernel)
    assert str(meta.name) == "gelu-mul"
    # kernels imports the package under the metadata id, which names the ops' namespace
    # (its own: silu_mul's ids start with _silu_mul_).
    assert kernel.__name__ == meta.id and meta.id.startswith("_gelu_mul_")
    ops = getattr(torch.ops, meta.id)
    assert hasattr(ops, "gelu_mul") and hasattr(ops, "gelu_mul_backward")


# --------------------------------------------------------------------------- #
# Forward / backward values
# --------------------------------------------------------------------------- #
SHAPES = [(), (1,), (7,), (1, 14336), (2, 3, 5), (17, 33), (4, 9, 130)]
BIG_SHAPES = [(333, 3000), (1823, 781), (2, 255, 1031)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward(kernel, dtype, shape):
    g, u = randn(shape, dtype, 1, 2.0), randn(shape, dtype, 2)
    out = kernel.gelu_mul(g, u)
    assert out.shape == g.shape and out.dtype == dtype and out.device == g.device
    assert_close(out, reference(g, u), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", BIG_SHAPES)
def test_forward_irregular_large(kernel, dtype, shape):
    g, u = randn(shape, dtype, 1, 2.0), randn(shape, dtype, 2)
    assert_close(kernel.gelu_mul(g, u, _config=BIG), reference(g, u), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (1, 14336), (2, 3, 5), (17, 33)])
def test_backward(kernel, dtype, shape):
    check_backward(kernel, randn(shape, dtype, 1, 2.0), randn(shape, dtype, 2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_irregular_large(kernel, dtype):
    shape = (1823, 781) if dtype == torch.float32 else (333, 3000)
    check_backward(kernel, randn(shape, dtype, 1, 2.0), randn(shape, dtype, 2), config=BIG)


def test_backward_only_one_input_requires_grad(kernel):
    g = randn((5, 6), torch.float32, 1).requires_grad_()
    u = randn((5, 6), torch.float32, 2)
    kernel.gelu_mul(g, u).sum().backward()
    gd = g.detach().double().requires_grad_()
    reference(gd, u).sum().backward()
    assert_close(g.grad, gd.grad, torch.float32)


# --------------------------------------------------------------------------- #
# Layouts
# --------------------------------------------------------------------------- #
VIEWS = {
    "slice": (lambda shape: (shape[0] * 2, shape[1] + 3), lambda t: t[::2, 1:-2]),
    "transpose": (lambda shape: (shape[1], shape[0]), lambda t: t.t()),
    "expand": (lambda shape: (1, shape[1]), lambda t: t.expand(37, -1)),
    "expand_scalar": (lambda shape: (1, 1), lambda t: t.expand(37, 29)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view_name", list(VIEWS))
def test_non_contiguous(kernel, dtype, view_name):
    base_shape, view = VIEWS[view_name]
    shape = (37, 29)
    g_base = randn(base_shape(shape), dtype, 1, 2.0)
    u_base = randn(base_shape(shape), dtype, 2)
    g, u = view(g_base), view(u_base)
    assert g.shape == shape and not g.is_contiguous()
    # Mixed layouts: a non-contiguous gate with a contiguous up and vice versa.
    assert_close(kernel.gelu_mul(g, u), reference(g, u), dtype)
    assert_close(kernel.gelu_mul(g, u.contiguous()), reference(g, u), dtype)
    assert_close(kernel.gelu_mul(g.contiguous(), u), reference(g, u), dtype)
    check_backward(kernel, g, u)
    check_backward(kernel, g, u.contiguous())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 781), (2, 5, 130)])
def test_merged_halves_read_in_place(kernel, launches, dtype, shape):
    """gate and up as the two halves of one [..., 2h] tensor: strided rows, no copies."""
    h = shape[-1]
    merged = randn(shape[:-1] + (2 * h,), dtype, 7, 2.0)
    g, u = merged.chunk(2, dim=-1)
    assert not g.is_contiguous() and g.stride()[-2:] == (2 * h, 1)

    out = kernel.gelu_mul(g, u)
    (fwd,) = launches
    assert fwd.name == "_gelu_mul_fwd_kernel"
    g_rows, u_rows, out_rows, n_rows, n_cols, *strides = fwd.args
    # The kernel got the halves themselves (same memory, row stride 2h), not copies.
    assert (g_rows.data_ptr(), u_rows.data_ptr(), out_rows.data_ptr()) == (g.data_ptr(), u.data_ptr(), out.data_ptr())
    assert (n_rows, n_cols) == (out.numel() // h, h) and strides == [2 * h, 2 * h, h]
    assert fwd.meta["ONE_ROW"] is False
    assert out.is_contiguous()
    assert torch.equal(out, kernel.gelu_mul(g.contiguous(), u.contiguous()))
    assert_close(out, reference(g, u), dtype)

    # Backward through the chunk: the merged tensor's gradient holds d_gate | d_up.
    launches.clear()
    leaf = merged.detach().requires_grad_()
    dy = randn(shape, dtype, 8)
    kernel.gelu_mul(*leaf.chunk(2, dim=-1)).backward(dy)
    assert [launch.name for launch in launches] == ["_gelu_mul_fwd_kernel", "_gelu_mul_bwd_kernel"]
    _, g_rows, u_rows, _, _, n_rows, n_cols, *strides = launches[1].args
    assert (g_rows.data_ptr(), u_rows.data_ptr()) == (leaf.data_ptr(), leaf.data_ptr() + h * leaf.element_size())
    assert (n_rows, n_cols) == (out.numel() // h, h) and strides == [h, 2 * h, 2 * h, h, h]
    ref_leaf = merged.double().requires_grad_()
    reference(*ref_leaf.chunk(2, dim=-1)).backward(dy.double())
    assert_close(leaf.grad, ref_leaf.grad, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_contiguous_inputs_launch_flat_blocks(kernel, impl, launches, dtype):
    """Contiguous tensors are one row of numel elements: flat blocks of the whole tile,
    row strides 0 (Triton then sees 16-element aligned offsets), one launch."""
    g, u = randn((37, 781), dtype, 1, 2.0), randn((37, 781), dtype, 2)
    g.requires_grad_()
    out = kernel.gelu_mul(g, u)
    out.backward(randn(out.shape, dtype, 3))
    tile, num_warps = impl._launch_config(g.numel(), g.element_size())
    for launch, n_tensors in zip(launches, (3, 5), strict=True):
        assert launch.args[n_tensors : n_tensors + 2] == (1, g.numel())
        assert launch.args[n_tensors + 2 :] == (0,) * n_tensors
        assert launch.grid == (-(-g.numel() // tile), 1)
        assert launch.meta == {"BLOCK_M": 1, "BLOCK_N": tile, "ONE_ROW": True, "USE_INT64": False, "num_warps": num_warps}
    assert_close(out, reference(g, u), dtype)


@pytest.mark.parametrize("element_size", [2, 4])
def test_launch_plan(impl, element_size):
    tile, num_warps = impl._launch_config(1, element_size)
    plan = impl._launch_plan
    # Contiguous: one row, flat blocks of the whole tile, whatever the row length.
    assert plan(8192, 14336, True, element_size) == (1, 8192 * 14336, 1, tile, num_warps)
    assert plan(1823, 781, True, element_size) == (1, 1823 * 781, 1, tile, num_warps)
    # Strided rows: tiles as wide as the row allows, short rows stacked.
    assert plan(8192, 14336, False, element_size) == (8192, 14336, 1, tile, num_warps)
    wide = min(1024, tile)  # 781 rounded up to a power of two, capped at the tile
    assert plan(1823, 781, False, element_size) == (1823, 781, tile // wide, wide, num_warps)
    assert plan(1000, 3, False, element_size) == (1000, 3, tile // 4, 4, num_warps)
    assert plan(3, 5, False, element_size, (64, 2)) == (3, 5, 4, 8, 2)


def test_row_tiles_past_the_grid_cap(kernel, impl, launches, monkeypatch):
    """More row tiles than CUDA's grid dimension 1 allows go in several launches, over row slices."""
    monkeypatch.setattr(impl, "_MAX_GRID_Y", 3)
    # float32 tiles of BLOCK_M rows × 64 columns (the launch table's elements over 64)
    block_m = impl._launch_config(1 << 20, 4)[0] // 64
    rows = 6 * block_m + 1
    merged = randn((rows, 80), torch.float32, 1, 2.0).requires_grad_()
    g, u = merged.chunk(2, dim=-1)
    out = kernel.gelu_mul(g, u)
    assert [launch.meta["BLOCK_M"] for launch in launches] == [block_m] * 3
    assert [launch.grid for launch in launches] == [(1, 3), (1, 3), (1, 1)]
    starts = [launch.args[0].data_ptr() for launch in launches]
    assert starts == [merged.data_ptr() + r * 80 * 4 for r in (0, 3 * block_m, 6 * block_m)]
    assert [launch.args[3] for launch in launches] == [3 * block_m, 3 * block_m, 1]
    # The last slice is one row of a tile of BLOCK_M: not the flat one-row kernel (BLOCK_M must be 1 there).
    assert [launch.meta["ONE_ROW"] for launch in launches] == [False] * 3
    dy = randn(out.shape, torch.float32, 2)
    out.backward(dy)
    ref_leaf = merged.detach().double().requires_grad_()
    expected = reference(*ref_leaf.chunk(2, dim=-1))
    expected.backward(dy.double())
    assert_close(out, expected, torch.float32)
    assert_close(merged.grad, ref_leaf.grad, torch.float32)
    assert len(launches) == 6


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0, 2)])
def test_empty(kernel, shape):
    g = randn(shape, torch.float32, 1).requires_grad_()
    u = randn(shape, torch.float32, 2).requires_grad_()
    out = kernel.gelu_mul(g, u)
    assert out.shape == shape
    out.sum().backward()
    assert g.grad.shape == shape and u.grad.shape == shape
    o = torch.empty(shape, device=DEVICE)
    assert kernel.gelu_mul(g.detach(), u.detach(), out=o) is o


def test_meta_tensors_through_the_op(kernel):
    """The public function asks for a runnable device (test_errors); the op itself, on the
    meta device, answers from its fake implementation: shapes and dtypes, no kernel."""
    g = torch.empty(4, 3, 8, device="meta", dtype=torch.bfloat16)
    ops = getattr(torch.ops, kernel.__name__)
    out = ops.gelu_mul(g, g)
    assert out.device.type == "meta" and out.shape == g.shape and out.dtype == g.dtype
    dg, du = ops.gelu_mul_backward(g, g, g)
    assert dg.shape == du.shape == g.shape and dg.device.type == "meta"


# --------------------------------------------------------------------------- #
# Special values
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_positions(kernel, dtype):
    shape = (9, 41)
    g_base, u_base = randn(shape, dtype, 1, 2.0), randn(shape, dtype, 2)
    g_base.view(-1)[::7] = float("nan")
    u_base.view(-1)[3::11] = float("nan")
    out = kernel.gelu_mul(g_base, u_base)
    expected_nan = torch.isnan(g_base) | torch.isnan(u_base)
    assert torch.equal(torch.isnan(out), expected_nan)
    assert torch.isfinite(out[~expected_nan]).all()
    assert_close(out, reference(g_base, u_base), dtype)
    # Backward: NaN exactly where the float64 autograd reference has it.
    dy = randn(shape, dtype, 3)
    gg, gu = grads(g_base, u_base, dy, kernel.gelu_mul)
    rg, ru = grads(g_base.double(), u_base.double(), dy.double(), reference)
    assert torch.equal(torch.isnan(gg), torch.isnan(rg))
    assert torch.equal(torch.isnan(gu), torch.isnan(ru))
    assert_close(gg, rg, dtype)
    assert_close(gu, ru, dtype)


LARGE = {
    torch.float32: [1e4, 1e30, 3e38],
    torch.bfloat16: [1e4, 1e30, 3e38],
    torch.float16: [1e4, 6e4],
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_magnitudes(kernel, dtype):
    mags = torch.tensor(LARGE[dtype])
    g = torch.cat([mags, -mags, torch.tensor([-20.0, -10.0, 10.0, 20.0])]).to(dtype).to(DEVICE)
    u = (torch.rand(g.shape, generator=torch.Generator().manual_seed(0)) * 2 - 1).to(dtype).to(DEVICE)
    out = kernel.gelu_mul(g, u)
    assert torch.isfinite(out).all(), out
    assert (out[g <= -1e4] == 0).all()  # gelu(-large) is -0, not NaN
    assert_close(out, reference(g, u), dtype)
    # Backward stays finite too (d gelu/dg -> 1 for g -> +inf, -> 0 for g -> -inf).
    dy = torch.ones_like(g)
    gg, gu = grads(g, u, dy, kernel.gelu_mul)
    assert torch.isfinite(gg).all() and torch.isfinite(gu).all()
    rg, ru = grads(g.double(), u.double(), dy.double(), reference)
    assert_close(gg, rg, dtype)
    assert_close(gu, ru, dtype)


# --------------------------------------------------------------------------- #
# out=
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("dtype", DTYPES)
def test_out_poisoned(kernel, dtype):
    g, u = randn((13, 300), dtype, 1), randn((13, 300), dtype, 2)
    out = torch.full((13, 300), float("nan"), dtype=dtype, device=DEVICE)
    res = kernel.gelu_mul(g, u, out=out)
    assert res is out
    assert not torch.isnan(out).any()  # every element was written
    assert_close(out, reference(g, u), dtype)


def test_out_non_contiguous(kernel):
    g, u = randn((31, 17), torch.float32, 1), randn((31, 17), torch.float32, 2)
    buf = torch.full((17, 31), float("nan"), device=DEVICE)
    out = buf.t()
    assert kernel.gelu_mul(g, u, out=out) is out
    assert not torch.isnan(buf).any()
    assert_close(out, reference(g, u), torch.float32)


def test_out_aliases_input(kernel):
    g, u = randn((8, 100), torch.float32, 1), randn((8, 100), torch.float32, 2)
    expected = reference(g, u)
    assert kernel.gelu_mul(g, u, out=g) is g
    assert_close(g, expected, torch.float32)


def test_out_rejects_autograd(kernel):
    g = randn((4, 4), torch.float32, 1).requires_grad_()
    with pytest.raises(RuntimeError, match="out= does not support autograd"):
        kernel.gelu_mul(g, g.detach(), out=torch.empty(4, 4, device=DEVICE))
    with torch.no_grad():
        kernel.gelu_mul(g, g.detach(), out=torch.empty(4, 4, device=DEVICE))


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #
def test_errors(kernel):
    f32 = torch.ones(3, 4, device=DEVICE)
    gm = kernel.gelu_mul
    with pytest.raises(TypeError, match="gate must be a torch.Tensor, got list"):
        gm([1.0], f32)
    with pytest.raises(TypeError, match="up must be a torch.Tensor, got float"):
        gm(f32, 1.0)
    with pytest.raises(ValueError, match=r"same shape, got gate.shape=\(3, 4\) and up.shape=\(4, 3\)"):
        gm(f32, torch.ones(4, 3, device=DEVICE))
    with pytest.raises(TypeError, match="same dtype, got gate.dtype=torch.float32 and up.dtype=torch.float16"):
        gm(f32, f32.half())
    with pytest.raises(TypeError, match="unsupported dtype torch.int32"):
        gm(f32.int(), f32.int())
    with pytest.raises(TypeError, match="unsupported dtype torch.float64"):
        gm(f32.double(), f32.double())
    meta = torch.ones(3, 4, device="meta")
    with pytest.raises(ValueError, match=rf"same device, got gate.device={DEVICE}(:0)? and up.device=meta"):
        gm(f32, meta)
    with pytest.raises(ValueError, match="unsupported device meta"):
        gm(meta, meta)
    with pytest.raises(ValueError, match=r"out.shape=\(4, 3\) must match the inputs' shape \(3, 4\)"):
        gm(f32, f32, out=torch.empty(4, 3, device=DEVICE))
    with pytest.raises(TypeError, match="out.dtype=torch.float16 must match the inputs' dtype torch.float32"):
        gm(f32, f32, out=torch.empty(3, 4, device=DEVICE, dtype=torch.float16))
    with pytest.raises(ValueError, match="out.device=meta must match"):
        gm(f32, f32, out=meta)
    with pytest.raises(TypeError, match="out must be a torch.Tensor or None, got list"):
        gm(f32, f32, out=[])
    with pytest.raises(ValueError, match="_config must be"):
        gm(f32, f32, _config=(1000, 4))
    # The op checks its inputs too, for callers that reach it through torch.ops.
    op = getattr(torch.ops, kernel.__name__).gelu_mul
    with pytest.raises(TypeError, match="same dtype, got gate.dtype=torch.float32 and up.dtype=torch.float16"):
        op(f32, f32.half())
    with pytest.raises(ValueError, match=r"same shape, got gate.shape=\(3, 4\) and up.shape=\(4, 3\)"):
        op(f32, torch.ones(4, 3, device=DEVICE))


@pytest.mark.parametrize(
    "grad, message",
    [
        (lambda: torch.ones(4, 3, device=DEVICE), r"grad.shape=\(4, 3\) must match gate.shape=\(3, 4\)"),
        (lambda: torch.ones(3, 4, device="meta"), rf"grad.device=meta must match gate.device={DEVICE}"),
    ],
    ids=["shape", "device"],
)
def test_backward_op_checks_grad(kernel, grad, message):
    t = torch.ones(3, 4, device=DEVICE)
    with pytest.raises(ValueError, match=message):
        getattr(torch.ops, kernel.__name__).gelu_mul_backward(grad(), t, t)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_cpu_mix_rejected(kernel):
    with pytest.raises(ValueError, match="same device, got gate.device=cuda:0 and up.device=cpu"):
        kernel.gelu_mul(torch.ones(3, device="cuda"), torch.ones(3))


def test_cpu_without_interpreter_says_how(tmp_path):
    """Loaded without TRITON_INTERPRET, CPU tensors get an error that names the fix."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["HF_HUB_OFFLINE"] = "1"
    code = (
        "import torch, kernels, pathlib\n"
        f"k = kernels.get_local_kernel(pathlib.Path({str(BUILT)!r}))\n"
        "try:\n"
        "    k.gelu_mul(torch.ones(4), torch.ones(4))\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "ERR" in res.stdout and "TRITON_INTERPRET=1" in res.stdout, res.stdout + res.stderr


# --------------------------------------------------------------------------- #
# Launch configuration
# --------------------------------------------------------------------------- #
def test_launch_config(kernel):
    from importlib import import_module

    impl = import_module(kernel.__name__ + "._gelu_mul")
    for es in (2, 4):
        for numel in (1, 14336, 1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 32):
            block, warps = kernel._launch_config(numel, es)
            assert block & (block - 1) == 0 and warps & (warps - 1) == 0
            per_thread = block * es // (warps * 32)
            assert per_thread in (8, 16), f"{per_thread} bytes per thread: whole 8- or 16-byte accesses"
    assert not impl._needs_int64(2**31 - 1 - 4096, 4096)
    assert impl._needs_int64(2**31 - 4096, 4096)


@pytest.mark.parametrize("config", [(128, 1), (256, 2), (4096, 8)])
def test_config_override(kernel, config):
    g, u = randn((3, 1000), torch.bfloat16, 1), randn((3, 1000), torch.bfloat16, 2)
    assert_close(kernel.gelu_mul(g, u, _config=config), reference(g, u), torch.bfloat16)


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.mem_get_info()[0] < 24 * 2**30, reason="needs a GPU with 24 GiB free"
)
def test_int64_offsets(kernel):
    n = 2**31 + 5000  # > 2**31 elements: offsets past int32
    g = torch.full((n,), 1.5, dtype=torch.bfloat16, device="cuda")
    u = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    g[-3:] = -2.0
    out = kernel.gelu_mul(g, u)
    expected = reference(g[-8:], u[-8:])
    assert_close(out[-8:], expected, torch.bfloat16)
    assert_close(out[:8], reference(g[:8], u[:8]), torch.bfloat16)
    del g, u, out
    torch.cuda.empty_cache()


# --------------------------------------------------------------------------- #
# Property tests: random shapes, layouts and dtypes against the float64 reference
# --------------------------------------------------------------------------- #
def _layout(t_shape, layout, dtype, seed):
    """A tensor of shape t_shape laid out as `layout`; returns (base, view_fn)."""
    if layout == "contiguous" or len(t_shape) == 0:
        return randn(t_shape, dtype, seed, 2.0), lambda t: t
    if layout == "transpose" and len(t_shape) >= 2:
        base_shape = t_shape[:-2] + (t_shape[-1], t_shape[-2])
        return randn(base_shape, dtype, seed, 2.0), lambda t: t.transpose(-1, -2)
    if layout == "merged":  # the second half of a [..., 2h] tensor: strided rows, read in place
        h = t_shape[-1]
        return randn(t_shape[:-1] + (2 * h,), dtype, seed, 2.0), lambda t: t[..., h:]
    if layout == "slice":
        base_shape = (t_shape[0] * 2 + 1,) + t_shape[1:]
        return randn(base_shape, dtype, seed, 2.0), lambda t: t[1::2]
    # expand: size 1 along the first dim, broadcast with stride 0
    base_shape = (1,) + t_shape[1:]
    return randn(base_shape, dtype, seed, 2.0), lambda t: t.expand(t_shape)


# Small dims keep each example to a few interpreter programs on CPU.
shapes = st.lists(st.integers(0, 16), min_size=0, max_size=3).map(tuple)
layouts = st.sampled_from(["contiguous", "merged", "transpose", "slice", "expand"])


@settings(max_examples=25, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), lg=layouts, lu=layouts, seed=st.integers(0, 2**16), use_out=st.booleans())
def test_property_forward(kernel, shape, dtype, lg, lu, seed, use_out):
    gb, gv = _layout(shape, lg, dtype, seed)
    ub, uv = _layout(shape, lu, dtype, seed + 1)
    g, u = gv(gb), uv(ub)
    assert g.shape == u.shape == shape
    if use_out:
        out = torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)
        assert kernel.gelu_mul(g, u, out=out) is out
    else:
        out = kernel.gelu_mul(g, u)
    assert_close(out, reference(g, u), dtype)


@settings(max_examples=15, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), lg=layouts, lu=layouts, seed=st.integers(0, 2**16))
def test_property_backward(kernel, shape, dtype, lg, lu, seed):
    gb, gv = _layout(shape, lg, dtype, seed)
    ub, uv = _layout(shape, lu, dtype, seed + 1)
    check_backward(kernel, gv(gb), uv(ub), seed=seed + 2)


# --------------------------------------------------------------------------- #
# kernelize: the GeGLUMLP layer replaces a hub-extensible module's forward
# --------------------------------------------------------------------------- #
@kernels.use_kernel_forward_from_hub("GeGLUMLP")
class GeGLUMLPRef(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_kernelize_geglu_mlp(kernel, monkeypatch, mode):
    torch.manual_seed(0)
    model = GeGLUMLPRef(32, 96).to(DEVICE)
    x = torch.randn(2, 5, 32, device=DEVICE)
    expected = model(x)

    mapping = {"GeGLUMLP": {DEVICE: kernels.LocalLayerRepository(repo_path=BUILT, layer_name="GeGLUMLP")}}
    kmode = kernels.Mode.INFERENCE if mode == "inference" else kernels.Mode.TRAINING
    with kernels.use_kernel_mapping(mapping):
        kernels.kernelize(model, mode=kmode, device=DEVICE)
    assert model.forward.__func__ is kernel.layers.GeGLUMLP.forward

    calls = []
    real = kernel.layers.gelu_mul
    monkeypatch.setattr(kernel.layers, "gelu_mul", lambda g, u: calls.append(g.shape) or real(g, u))
    out = model(x)
    assert calls == [torch.Size([2, 5, 96])]
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    if mode == "training":
        out.sum().backward()
        assert model.gate_proj.weight.grad is not None and model.up_proj.weight.grad is not None


PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def _kernelized_model(mode):
    torch.manual_seed(0)
    model = GeGLUMLPRef(32, 96).to(DEVICE)
    # Mappings are keyed by the device type of the tensors the model will see:
    # "cpu" here runs the CUDA-typed kernel on CPU tensors under the interpreter.
    mapping = {"GeGLUMLP": {DEVICE: kernels.LocalLayerRepository(repo_path=BUILT, layer_name="GeGLUMLP")}}
    with kernels.use_kernel_mapping(mapping, inherit_mapping=False):
        kernels.kernelize(model, mode=mode, device=DEVICE)
    return model


def _relative_error(actual, expected):
    return (actual.double() - expected).norm().item() / (expected.norm().item() or 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_kernelize_geglu_mlp_torch_compile(kernel, impl, launches, training):
    """Mode.TORCH_COMPILE keeps our forward (can_torch_compile), and fullgraph tracing succeeds.

    fullgraph=True raises on any graph break.  Our kernels run, not a decomposition: on a GPU the
    ops are triton_ops and Inductor's generated code launches the kernels itself (its code names
    them, and never calls the op); under the interpreter the ops are custom_ops, and the launches
    their bodies make are recorded.
    """
    torch._dynamo.reset()  # no cached graph from another test's module
    mode = (kernels.Mode.TRAINING if training else kernels.Mode.INFERENCE) | kernels.Mode.TORCH_COMPILE
    model = _kernelized_model(mode)
    assert model.forward.__func__ is kernel.layers.GeGLUMLP.forward
    assert model.forward.__func__ is not GeGLUMLPRef.forward

    x = torch.randn(2, 5, 32, device=DEVICE, requires_grad=training)
    # The same MLP in float64, with leaves for autograd.
    x64 = x.detach().double().requires_grad_()
    w64 = {name: getattr(model, name).weight.detach().double().requires_grad_() for name in PROJECTIONS}
    y64 = F.linear(reference(F.linear(x64, w64["gate_proj"]), F.linear(x64, w64["up_proj"])), w64["down_proj"])
    dy = torch.randn(2, 5, 32, device=DEVICE)

    def step():
        with torch.set_grad_enabled(training):
            out = torch.compile(model, fullgraph=True)(x)
        if training:
            out.backward(dy)
        return out

    names = ["_gelu_mul_fwd_kernel", "_gelu_mul_bwd_kernel"][: 1 + training]
    if impl._INTERPRETED:
        out = step()
        assert [launch.name for launch in launches] == names
    else:
        from torch._inductor.utils import run_and_get_code

        out, codes = run_and_get_code(step)
        code = "\n".join(codes)
        assert all(name in code for name in names) and f"torch.ops.{impl._NAMESPACE}." not in code
    assert _relative_error(out, y64) <= 1e-4  # the suite's float32 tolerance (mlpbench/workloads.py)
    if training:
        y64.backward(dy.double())
        assert _relative_error(x.grad, x64.grad) <= 1e-4
        for name in PROJECTIONS:
            assert _relative_error(getattr(model, name).weight.grad, w64[name].grad) <= 1e-4, name


@pytest.mark.parametrize("name, per_thread", [("NVIDIA H100 80GB HBM3", 8), ("NVIDIA H100 PCIe", 8),
                                              ("NVIDIA H200", 16), ("NVIDIA A100-SXM4-80GB", 16)])
def test_the_launch_table_is_the_gpus_own(impl, monkeypatch, name, per_thread):
    """H100s take the 8-bytes-a-thread rows, every other GPU (and the CPU) the 16-byte one; a
    forced table (the sweep's) serves every device."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: name)
    impl._gpu_table.cache_clear()
    try:
        cuda = torch.device("cuda", 0)
        for es in (2, 4):
            block, warps = impl._launch_config(1 << 24, es, cuda)
            assert block * es // (warps * 32) == per_thread
        assert impl._launch_config(1 << 24, 2, torch.device("cpu")) == (1024, 4)
        monkeypatch.setattr(impl, "_CONFIG_TABLE", ((None, float("inf"), 4096, 16),))
        assert impl._launch_config(1 << 24, 4, cuda) == (1024, 16)
    finally:
        impl._gpu_table.cache_clear()
