"""Tests for the silu_mul kernel repository, loaded through `kernels.get_local_kernel`.

Run from the repository root:  python -m pytest kernels_local/silu_mul -q
Tests run on CUDA when it is available, else on CPU under the Triton interpreter
(conftest.py sets TRITON_INTERPRET=1 when there is no GPU).
"""

import importlib
import os
import subprocess
import sys
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

# Relative error ‖out − ref‖ / ‖ref‖ allowed per dtype: the suite's TOLERANCE
# (mlpbench/workloads.py), so a kernel that passes here passes the suite's check.
REL_TOL = {torch.float32: 1e-4, torch.bfloat16: 1e-2, torch.float16: 2e-3}

# A norm hides a few bad elements among thousands, so each element is also held
# to (rtol, atol): math is float32 and the result is rounded once, so within half
# an ulp (2**-9 bf16, 2**-11 fp16) plus float32 error; one ulp is allowed.  atol
# covers values near zero (fp16 subnormals, the zero of d silu/dg at g ≈ -1.28).
ELEM_TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.bfloat16: (2**-8, 1e-5),
    torch.float16: (2**-10, 1e-5),
}
if DEVICE == "cpu":
    # The Triton interpreter truncates float32 -> bfloat16 instead of rounding to
    # nearest even as the GPU does, so it can be a full bf16 ulp off.
    ELEM_TOL[torch.bfloat16] = (2**-7 + 2**-12, 1e-5)


@pytest.fixture(scope="module")
def impl(kernel):
    """The implementation module, for its launch helpers and kernels."""
    return importlib.import_module(kernel.__name__ + "._silu_mul")


@pytest.fixture
def launches(impl, monkeypatch):
    """Every kernel launch from here on, as (kernel, its tensor and int arguments)."""
    calls = []

    class Recording:
        """Stands in for a Triton kernel: records each `kernel[grid](*args, **meta)` and runs it."""

        def __init__(self, real):
            self.real = real

        def __getitem__(self, grid):
            run = self.real[grid]

            def record(*args, **meta):
                calls.append((self.real, args))
                return run(*args, **meta)

            return record

    for name in ("_silu_mul_fwd_kernel", "_silu_mul_bwd_kernel"):
        monkeypatch.setattr(impl, name, Recording(getattr(impl, name)))
    return calls


def reference(gate, up):
    return F.silu(gate.double()) * up.double()


def relative_error(actual, expected):
    denom = expected.norm().item() or 1.0
    return (actual.double() - expected).norm().item() / denom


def assert_matches(actual, expected, dtype):
    assert actual.dtype == dtype and actual.shape == expected.shape
    rel = relative_error(actual, expected)
    assert rel <= REL_TOL[dtype], f"relative error {rel:.3g} > {REL_TOL[dtype]:g} for {dtype}"
    rtol, atol = ELEM_TOL[dtype]
    torch.testing.assert_close(actual.double(), expected, rtol=rtol, atol=atol, equal_nan=True)


def randn(shape, dtype, seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(dtype).to(DEVICE)


def grads(gate, up, dy, fn):
    """Gradients of <fn(gate, up), dy> w.r.t. gate and up.

    The leaves are detached aliases of gate/up with the same strides, so the
    kernel sees the original layout and the gradients stay per element (no
    autograd reduction, e.g. over an expand, adds its own rounding).
    """
    g = gate.detach().requires_grad_()
    u = up.detach().requires_grad_()
    fn(g, u).backward(dy)
    return g.grad, u.grad


def check_backward(kernel, gate, up, seed):
    dtype = gate.dtype
    dy = randn(gate.shape, dtype, seed)
    gg, gu = grads(gate, up, dy, kernel.silu_mul)
    rg, ru = grads(gate.double(), up.double(), dy.double(), reference)
    assert_matches(gg, rg, dtype)
    assert_matches(gu, ru, dtype)


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
def test_loads_through_kernels(kernel):
    assert callable(kernel.silu_mul)
    layer = kernel.layers.SwiGLUMLP
    assert layer.has_backward is True and layer.can_torch_compile is True
    meta = next(k.metadata for k in kernels.get_loaded_kernels() if k.module is kernel)
    assert str(meta.name) == "silu-mul"
    # kernels imports the package under the metadata id, which names the ops' namespace.
    assert kernel.__name__ == meta.id
    ops = getattr(torch.ops, meta.id)
    assert hasattr(ops, "silu_mul") and hasattr(ops, "silu_mul_backward")


# --------------------------------------------------------------------------- #
# Values, forward and backward
# --------------------------------------------------------------------------- #
SHAPES = [(), (1,), (7,), (1, 3000), (2, 3, 5), (4, 9, 130), (37, 781)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward(kernel, dtype, shape):
    seed = SHAPES.index(shape) * 10 + DTYPES.index(dtype)  # distinct inputs per case
    g, u = randn(shape, dtype, seed, 3.0), randn(shape, dtype, seed + 100)
    out = kernel.silu_mul(g, u)
    assert out.device == g.device and out.is_contiguous()
    assert_matches(out, reference(g, u), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5), (37, 781)])
def test_backward(kernel, dtype, shape):
    seed = 1000 + len(shape) * 10 + DTYPES.index(dtype)
    check_backward(kernel, randn(shape, dtype, seed, 3.0), randn(shape, dtype, seed + 1), seed + 2)


def test_backward_only_one_input_requires_grad(kernel):
    g = randn((5, 6), torch.float32, 1).requires_grad_()
    u = randn((5, 6), torch.float32, 2)
    kernel.silu_mul(g, u).sum().backward()
    gd = g.detach().double().requires_grad_()
    reference(gd, u).sum().backward()
    assert_matches(g.grad, gd.grad, torch.float32)


# --------------------------------------------------------------------------- #
# Layouts
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 781), (2, 5, 130)])
def test_merged_halves_read_in_place(kernel, impl, launches, dtype, shape):
    """gate and up as the two halves of one [..., 2h] tensor: strided rows, no copies."""
    h = shape[-1]
    merged = randn(shape[:-1] + (2 * h,), dtype, 7, 3.0)
    g, u = merged.chunk(2, dim=-1)
    assert not g.is_contiguous() and g.stride()[-2:] == (2 * h, 1)

    out = kernel.silu_mul(g, u)
    (fwd, (g_rows, u_rows, _, _, _, g_stride, u_stride, _)), = launches
    assert fwd is impl._silu_mul_fwd_kernel.real
    # The kernel got the halves themselves (same memory, row stride 2h), not copies.
    assert (g_rows.data_ptr(), u_rows.data_ptr()) == (g.data_ptr(), u.data_ptr())
    assert g_stride == u_stride == 2 * h
    assert torch.equal(out, kernel.silu_mul(g.contiguous(), u.contiguous()))
    assert_matches(out, reference(g, u), dtype)

    # Backward through the chunk: the merged tensor's gradient holds d_gate | d_up.
    launches.clear()
    leaf = merged.detach().requires_grad_()
    dy = randn(shape, dtype, 8)
    kernel.silu_mul(*leaf.chunk(2, dim=-1)).backward(dy)
    (_, _), (bwd, (_, g_rows, u_rows, *_)) = launches
    assert bwd is impl._silu_mul_bwd_kernel.real
    assert (g_rows.data_ptr(), u_rows.data_ptr()) == (leaf.data_ptr(), leaf.data_ptr() + h * leaf.element_size())
    ref_leaf = merged.double().requires_grad_()
    reference(*ref_leaf.chunk(2, dim=-1)).backward(dy.double())
    assert_matches(leaf.grad, ref_leaf.grad, dtype)


# Layouts that are not row-strided with a contiguous last dimension, as
# functions of (dtype, seed) giving a [13, 2, 29] tensor.  The row broadcast
# (stride 0) is still read in place; the others are copied first.
OTHER_SHAPE = (13, 2, 29)
LAYOUTS = {
    "transpose": lambda dtype, seed: randn((13, 29, 2), dtype, seed, 3.0).transpose(-1, -2),
    "expand_rows": lambda dtype, seed: randn((1, 1, 29), dtype, seed, 3.0).expand(OTHER_SHAPE),
    "column_slice": lambda dtype, seed: randn((13, 2, 58), dtype, seed, 3.0)[..., ::2],
    # rows 1..2 of every group of 3: no single row stride spans the leading dims
    "unmergeable_rows": lambda dtype, seed: randn((13, 3, 29), dtype, seed, 3.0)[:, 1:],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_other_layouts(kernel, dtype, layout):
    g, u = LAYOUTS[layout](dtype, 11), LAYOUTS[layout](dtype, 12)
    assert g.shape == OTHER_SHAPE and not g.is_contiguous()
    # Mixed with a contiguous partner, both ways round.
    for gate, up in ((g, u), (g, u.contiguous()), (g.contiguous(), u)):
        assert_matches(kernel.silu_mul(gate, up), reference(gate, up), dtype)
    check_backward(kernel, g, u, seed=13)


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0), (3, 0, 2)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(kernel, launches, shape, dtype):
    g = randn(shape, dtype, 1).requires_grad_()
    u = randn(shape, dtype, 2).requires_grad_()
    out = kernel.silu_mul(g, u)
    assert out.shape == shape and out.dtype == dtype
    out.sum().backward()
    assert g.grad.shape == shape and u.grad.shape == shape
    assert launches == []  # nothing to launch for zero elements


def test_meta_tensors_give_shapes(kernel):
    """On the meta device the op's fake implementation answers: shapes and dtypes, no kernel."""
    g = torch.empty(4, 3, 8, device="meta", dtype=torch.bfloat16)
    out = kernel.silu_mul(g, g)
    assert out.device.type == "meta" and out.shape == g.shape and out.dtype == g.dtype


# --------------------------------------------------------------------------- #
# Special values
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_positions(kernel, dtype):
    shape = (9, 41)
    g, u = randn(shape, dtype, 1, 3.0), randn(shape, dtype, 2)
    g.view(-1)[::7] = float("nan")
    u.view(-1)[3::11] = float("nan")
    out = kernel.silu_mul(g, u)
    expected_nan = torch.isnan(g) | torch.isnan(u)
    assert torch.equal(torch.isnan(out), expected_nan)
    rtol, atol = ELEM_TOL[dtype]
    torch.testing.assert_close(out.double(), reference(g, u), rtol=rtol, atol=atol, equal_nan=True)
    dy = randn(shape, dtype, 3)
    gg, gu = grads(g, u, dy, kernel.silu_mul)
    rg, ru = grads(g.double(), u.double(), dy.double(), reference)
    assert torch.equal(torch.isnan(gg), torch.isnan(rg)) and torch.equal(torch.isnan(gu), torch.isnan(ru))
    torch.testing.assert_close(gg.double(), rg, rtol=rtol, atol=atol, equal_nan=True)
    torch.testing.assert_close(gu.double(), ru, rtol=rtol, atol=atol, equal_nan=True)


LARGE = {
    torch.float32: [1e4, 1e30, 3e38],
    torch.bfloat16: [1e4, 1e30, 3e38],
    torch.float16: [1e4, 6e4],
}


# Under the interpreter, Triton's math is numpy's, which warns about the intended
# exp overflow, and about the inf·0 in the branch of tl.where that g < 0 discards.
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_magnitudes(kernel, dtype):
    """exp(-g) overflows to inf for g ≪ 0: sigmoid must saturate to 0, not give NaN."""
    mags = torch.tensor(LARGE[dtype])
    g = torch.cat([mags, -mags, torch.tensor([-100.0, -20.0, 20.0, 100.0])]).to(dtype).to(DEVICE)
    u = (torch.rand(g.shape, generator=torch.Generator().manual_seed(0)) * 2 - 1).to(dtype).to(DEVICE)
    out = kernel.silu_mul(g, u)
    assert torch.isfinite(out).all(), out
    assert (out[g <= -1e4] == 0).all()
    rtol, atol = ELEM_TOL[dtype]
    torch.testing.assert_close(out.double(), reference(g, u), rtol=rtol, atol=atol)
    dy = torch.ones_like(g)
    gg, gu = grads(g, u, dy, kernel.silu_mul)
    assert torch.isfinite(gg).all() and torch.isfinite(gu).all()
    rg, ru = grads(g.double(), u.double(), dy.double(), reference)
    torch.testing.assert_close(gg.double(), rg, rtol=rtol, atol=atol)
    torch.testing.assert_close(gu.double(), ru, rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #
def _error_cases():
    f32 = torch.ones(3, 4, device=DEVICE)
    meta = torch.ones(3, 4, device="meta")
    return [
        ("gate_not_tensor", [1.0], f32, TypeError, "gate must be a torch.Tensor, got list"),
        ("up_not_tensor", f32, 1.0, TypeError, "up must be a torch.Tensor, got float"),
        ("shape", f32, torch.ones(4, 3, device=DEVICE), ValueError, r"same shape, got gate.shape=\(3, 4\) and up.shape=\(4, 3\)"),
        ("dtype", f32, f32.half(), TypeError, "same dtype, got gate.dtype=torch.float32 and up.dtype=torch.float16"),
        ("int_gate", f32.int(), f32.int(), TypeError, "gate.dtype=torch.int32 is not a floating dtype"),
        ("bool_up", f32, f32.bool(), TypeError, "up.dtype=torch.bool is not a floating dtype"),
        ("float64", f32.double(), f32.double(), TypeError, "unsupported dtype torch.float64"),
        ("device", f32, meta, ValueError, rf"same device, got gate.device={DEVICE}(:0)? and up.device=meta"),
    ]


@pytest.mark.parametrize("case", _error_cases(), ids=lambda c: c[0])
def test_errors(kernel, case):
    _, gate, up, exc, message = case
    with pytest.raises(exc, match=message):
        kernel.silu_mul(gate, up)
    if isinstance(gate, torch.Tensor) and isinstance(up, torch.Tensor):
        # The op itself checks too, for callers that reach it through torch.ops.
        with pytest.raises(exc, match=message):
            getattr(torch.ops, kernel.__name__).silu_mul(gate, up)


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
        getattr(torch.ops, kernel.__name__).silu_mul_backward(grad(), t, t)


def test_cpu_without_interpreter_says_how():
    """Loaded without TRITON_INTERPRET, CPU tensors get an error that names the fix."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["HF_HUB_OFFLINE"] = "1"
    code = (
        "import torch, kernels, pathlib\n"
        f"k = kernels.get_local_kernel(pathlib.Path({str(BUILT)!r}))\n"
        "try:\n"
        "    k.silu_mul(torch.ones(4), torch.ones(4))\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "ERR" in res.stdout and "TRITON_INTERPRET=1" in res.stdout, res.stdout + res.stderr


# --------------------------------------------------------------------------- #
# Tiles and grid
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("element_size", [2, 4])
@pytest.mark.parametrize("n_rows, n_cols", [(1, 1), (1, 7), (5, 64), (1000, 3), (37, 781), (1, 14336), (8192, 14336)])
def test_tile(impl, element_size, n_rows, n_cols):
    block_m, block_n = impl._tile(n_rows, n_cols, element_size)
    assert block_m >= 1 and block_m & (block_m - 1) == 0 and block_n & (block_n - 1) == 0
    tile_elements = impl._launch_config(element_size)[0] // element_size
    assert block_m * block_n <= tile_elements
    # As wide as the row (up to a whole tile), and short rows stacked until the
    # tile is full or the rows run out.
    assert block_n == min(1 << (n_cols - 1).bit_length(), tile_elements)
    assert block_m * block_n == tile_elements or block_m >= n_rows


def test_grid_limit(impl):
    assert impl._grid(10, 65535 * 512, 1, 512) == (10, 65535)
    with pytest.raises(ValueError, match="last dimension 33553921 needs 65536 column tiles of 512"):
        impl._grid(1, 65535 * 512 + 1, 1, 512)


# --------------------------------------------------------------------------- #
# Property tests: random shapes, layouts and dtypes against the float64 reference
# --------------------------------------------------------------------------- #
def _layout(shape, layout, dtype, seed):
    if layout == "merged" and shape:
        return randn(shape[:-1] + (2 * shape[-1],), dtype, seed, 3.0)[..., shape[-1] :]
    if layout == "transpose" and len(shape) >= 2:
        return randn(shape[:-2] + (shape[-1], shape[-2]), dtype, seed, 3.0).transpose(-1, -2)
    if layout == "expand_rows" and shape:
        return randn((1,) * (len(shape) - 1) + shape[-1:], dtype, seed, 3.0).expand(shape)
    return randn(shape, dtype, seed, 3.0)


# Small dims keep each example to a few interpreter programs on CPU.
shapes = st.lists(st.integers(0, 12), min_size=0, max_size=3).map(tuple)
layouts = st.sampled_from(["contiguous", "merged", "transpose", "expand_rows"])


@settings(max_examples=20, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), lg=layouts, lu=layouts, seed=st.integers(0, 2**16))
def test_property_forward(kernel, shape, dtype, lg, lu, seed):
    g, u = _layout(shape, lg, dtype, seed), _layout(shape, lu, dtype, seed + 1)
    assert_matches(kernel.silu_mul(g, u), reference(g, u), dtype)


@settings(max_examples=10, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), lg=layouts, lu=layouts, seed=st.integers(0, 2**16))
def test_property_backward(kernel, shape, dtype, lg, lu, seed):
    check_backward(kernel, _layout(shape, lg, dtype, seed), _layout(shape, lu, dtype, seed + 1), seed + 2)


# --------------------------------------------------------------------------- #
# kernelize: the SwiGLUMLP layer replaces a hub-extensible module's forward
# --------------------------------------------------------------------------- #
@kernels.use_kernel_forward_from_hub("SwiGLUMLP")
class SwiGLUMLPRef(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def _kernelized_model(mode):
    torch.manual_seed(0)
    model = SwiGLUMLPRef(32, 96).to(DEVICE)
    # Mappings are keyed by the device type of the tensors the model will see:
    # "cpu" here runs the CUDA-typed kernel on CPU tensors under the interpreter.
    mapping = {"SwiGLUMLP": {DEVICE: kernels.LocalLayerRepository(repo_path=BUILT, layer_name="SwiGLUMLP")}}
    with kernels.use_kernel_mapping(mapping, inherit_mapping=False):
        kernels.kernelize(model, mode=mode, device=DEVICE)
    return model


def _mlp_reference(model, x):
    """(y, x, weights) of the same MLP in float64, with leaves for autograd."""
    x64 = x.detach().double().requires_grad_()
    w = {name: getattr(model, name).weight.detach().double().requires_grad_() for name in PROJECTIONS}
    y = F.linear(F.silu(F.linear(x64, w["gate_proj"])) * F.linear(x64, w["up_proj"]), w["down_proj"])
    return y, x64, w


def _check_mlp(model, run, impl, launches, training, compiled=False):
    """run(x) against the MLP in float64, gradients included, and the kernels it launched: as recorded,
    or on a GPU under torch.compile, named by Inductor's generated code (the ops are triton_ops there,
    launched by that code itself, which never calls the op)."""
    x = torch.randn(2, 5, 32, device=DEVICE, requires_grad=training)
    y64, x64, w64 = _mlp_reference(model, x)
    dy = torch.randn(2, 5, 32, device=DEVICE)

    def step():
        with torch.set_grad_enabled(training):
            out = run(x)
        if training:
            out.backward(dy)
        return out

    kernels_run = [impl._silu_mul_fwd_kernel.real, impl._silu_mul_bwd_kernel.real][: 1 + training]
    if compiled and not impl._INTERPRETED:
        from torch._inductor.utils import run_and_get_code

        out, codes = run_and_get_code(step)
        code = "\n".join(codes)
        assert all(k.fn.__name__ in code for k in kernels_run) and f"torch.ops.{impl._NAMESPACE}." not in code
    else:
        out = step()
        assert [k for k, _ in launches] == kernels_run
    assert relative_error(out, y64) <= REL_TOL[torch.float32]
    if training:
        y64.backward(dy.double())
        assert relative_error(x.grad, x64.grad) <= REL_TOL[torch.float32]
        for name in PROJECTIONS:
            assert relative_error(getattr(model, name).weight.grad, w64[name].grad) <= REL_TOL[torch.float32], name


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_kernelize_swiglu_mlp(kernel, impl, launches, training):
    model = _kernelized_model(kernels.Mode.TRAINING if training else kernels.Mode.INFERENCE)
    assert model.forward.__func__ is kernel.layers.SwiGLUMLP.forward
    _check_mlp(model, model, impl, launches, training)


@pytest.mark.slow
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_kernelize_swiglu_mlp_torch_compile(kernel, impl, launches, training):
    """Mode.TORCH_COMPILE keeps our forward (can_torch_compile), and fullgraph tracing succeeds.

    fullgraph=True raises on any graph break; the launches recorded at run time (under the
    interpreter, where the ops are custom_ops) or Inductor's code (on a GPU, where they are
    triton_ops) show that the compiled graph runs our kernels, not a decomposition.
    """
    torch._dynamo.reset()  # no cached graph from another test's module
    mode = (kernels.Mode.TRAINING if training else kernels.Mode.INFERENCE) | kernels.Mode.TORCH_COMPILE
    model = _kernelized_model(mode)
    assert model.forward.__func__ is kernel.layers.SwiGLUMLP.forward
    assert model.forward.__func__ is not SwiGLUMLPRef.forward
    _check_mlp(model, torch.compile(model, fullgraph=True), impl, launches, training, compiled=True)


def test_contiguous_tensors_are_seen_as_rows_of_one_tile_and_strided_halves_keep_their_rows(kernel):
    """Consecutive programs move consecutive memory for contiguous inputs (a flat kernel's order)."""
    impl = importlib.import_module(kernel.__name__ + "._silu_mul")
    tile = impl._launch_config(2)[0] // 2
    g = torch.randn(8, 3 * tile, dtype=torch.bfloat16)
    assert [t.shape for t in impl._rows_of([g, g])] == [(24, tile)] * 2
    merged = torch.randn(8, 6 * tile, dtype=torch.bfloat16)
    gate, up = merged.chunk(2, dim=1)
    rows = impl._rows_of([gate, up])
    assert [t.shape for t in rows] == [(8, 3 * tile)] * 2 and rows[0].data_ptr() == gate.data_ptr()
    ragged = torch.randn(3, 5, dtype=torch.bfloat16)  # not a whole number of tiles: [rows, last dim]
    assert impl._rows_of([ragged])[0].shape == (3, 5)


@pytest.mark.parametrize("name, per_thread", [("NVIDIA H100 80GB HBM3", 8), ("NVIDIA H200", 16),
                                              ("NVIDIA A100-SXM4-80GB", 16)])
def test_the_launch_table_is_the_gpus_own(impl, monkeypatch, name, per_thread):
    """As gelu_mul's: H100s take the 8-bytes-a-thread rows, every other GPU and the CPU the 16-byte one."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: name)
    impl._gpu_table.cache_clear()
    try:
        for es in (2, 4):
            tile_bytes, warps = impl._launch_config(es, torch.device("cuda", 0))
            assert tile_bytes // (warps * 32) == per_thread
        assert impl._launch_config(2, torch.device("cpu")) == (2048, 4)
    finally:
        impl._gpu_table.cache_clear()
