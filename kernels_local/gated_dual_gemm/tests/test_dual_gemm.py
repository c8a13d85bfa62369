"""Tests for the gated_dual_gemm kernel repository, loaded through `kernels.get_local_kernel`.

Run from the repository root:  python -m pytest kernels_local/gated_dual_gemm -q
On CUDA when there is a GPU, else on CPU under the Triton interpreter (conftest.py). Shapes are
small on a CPU (the interpreter runs every program in numpy) and include the suite's irregular
MLP shape scaled down: rows, dim and hidden none a multiple of the tiles.
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
from torch import nn

import kernels

from mlpbench.sources import kernel_repo

REPO = Path(__file__).resolve().parents[1]
# What kernels loads: build/torch-universal, written from torch-ext/ into mlpbench's cache (none is committed).
BUILT = kernel_repo(REPO.name)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
ACTS = {"gelu_tanh": lambda g: F.gelu(g, approximate="tanh"), "silu": F.silu}
# Relative error (norm) against float64, the suite's tolerances (mlpbench/workloads.py): float32
# products are IEEE, 16-bit ones exact in float32, accumulated in float32 and rounded once.
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}
# (rows, dim, hidden): a tile's worth, the irregular 333 × 768 → 3000 scaled down, several tiles
# with ragged edges, and larger on a GPU.
SHAPES = [(64, 32, 48), (333, 96, 300), (130, 64, 200)] + ([(333, 768, 3000), (2048, 512, 1536)]
                                                         if DEVICE == "cuda" else [])
SMALL = (32, 16, 16, 2, 4, 2, 1)  # a tiny tile for the interpreter: many programs, every edge masked


@pytest.fixture(scope="module")
def impl(kernel):
    return importlib.import_module(kernel.__name__ + "._dual_gemm")


Launch = namedtuple("Launch", "name grid args meta")


@pytest.fixture
def launches(impl, monkeypatch):
    """Every Triton kernel launch from here on: Launch(kernel name, grid, arguments, keywords)."""
    calls = []

    class Recording:
        def __init__(self, name, real):
            self.name, self.real = name, real

        def __getitem__(self, grid):
            run = self.real[grid]

            def record(*args, **meta):
                calls.append(Launch(self.name, grid, args, meta))
                return run(*args, **meta)

            return record

    for name in ("_gate_up_kernel", "_gate_up_interleaved_kernel", "_act_mul_kernel", "_act_mul_pairs_kernel",
                 "_act_mul_grad_kernel"):
        monkeypatch.setattr(impl, name, Recording(name, getattr(impl, name)))
    return calls


def inputs(m, k, n, dtype, seed=0, requires_grad=False):
    gen = torch.Generator().manual_seed(seed)

    def draw(*shape, scale=1.0):
        t = (torch.randn(*shape, generator=gen) * scale).to(dtype).to(DEVICE)
        return t.requires_grad_(requires_grad)

    # Weights at nn.Linear's scale, gate twice as wide so GeLU's and SiLU's curved parts are hit.
    return draw(m, k), draw(n, k, scale=2 / k**0.5), draw(n, k, scale=1 / k**0.5)


def reference(x, wg, wu, act):
    x, wg, wu = (t.detach().double() for t in (x, wg, wu))
    return ACTS[act](x @ wg.T) * (x @ wu.T)


def rel_err(actual, expected):
    return (actual.double() - expected).norm().item() / (expected.norm().item() or 1.0)


def test_loads_through_kernels(kernel):
    assert callable(kernel.gate_up_act_mul) and callable(kernel.gate_up_act_mul_interleaved)
    assert {"GeGLUMLP", "SwiGLUMLP"} <= set(dir(kernel.layers))
    assert kernel.layers.GeGLUMLP.has_backward and kernel.layers.GeGLUMLP.can_torch_compile


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward(kernel, launches, shape, dtype, act):
    x, wg, wu = inputs(*shape, dtype)
    out = kernel.gate_up_act_mul(x, wg, wu, act, fused=True)
    assert out.shape == (shape[0], shape[2]) and out.dtype == dtype
    assert rel_err(out, reference(x, wg, wu, act)) <= TOL[dtype]
    assert len(launches) == 1


@pytest.mark.parametrize("tma", [False, True], ids=["pointers", "descriptors"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_both_ways_of_loading_tiles(kernel, launches, dtype, tma):
    """Tensor descriptors (Hopper's TMA) and masked pointer loads give the same result; 304 and 48 keep
    rows 16-byte aligned, as descriptors need."""
    x, wg, wu = inputs(133, 48, 304, dtype, seed=1)
    out = kernel.gate_up_act_mul(x, wg, wu, fused=True, _config=SMALL, _tma=tma)
    assert rel_err(out, reference(x, wg, wu, "gelu_tanh")) <= TOL[dtype]
    assert launches[0].meta["TMA"] is tma


def test_descriptors_refuse_unaligned_rows(kernel):
    x, wg, wu = inputs(64, 36, 50, torch.bfloat16)  # 36 × 2 bytes: not a multiple of 16
    with pytest.raises(ValueError, match="16-byte aligned.*dim=36, hidden=50"):
        kernel.gate_up_act_mul(x, wg, wu, fused=True, _tma=True)
    # automatic: pointer loads, correct
    out = kernel.gate_up_act_mul(x, wg, wu, fused=True)
    assert rel_err(out, reference(x, wg, wu, "gelu_tanh")) <= TOL[torch.bfloat16]


def test_persistent_grid_covers_every_tile(kernel, launches, impl):
    """More tiles than programs: each program walks several tiles (grouped order), none is missed."""
    # More tiles of 16 × 16 than SMs: 142 × 6 on a GPU (an H200 has 132), 13 × 6 under the interpreter (4).
    m = 2270 if DEVICE == "cuda" else 200
    x, wg, wu = inputs(m, 32, 96, torch.float32)
    out = kernel.gate_up_act_mul(x, wg, wu, fused=True, _config=(16, 16, 16, 3, 4, 2, 1))
    tiles = -(-m // 16) * (96 // 16)
    programs = launches[0].grid[0]
    assert programs < tiles and launches[0].meta["PROGRAMS"] == programs
    assert rel_err(out, reference(x, wg, wu, "gelu_tanh")) <= TOL[torch.float32]
    # and one program per tile when not persistent
    kernel.gate_up_act_mul(x, wg, wu, fused=True, _config=(16, 16, 16, 3, 4, 2, 0))
    assert launches[1].grid[0] == tiles


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_few_tokens_take_the_unfused_path(kernel, launches, dtype, act):
    """Below MIN_FUSED_TOKENS rows: two GEMMs and one act·mul kernel; both paths agree with float64
    at one token and at an odd element count."""
    assert not kernel.fused_pays(kernel.MIN_FUSED_TOKENS - 1, dtype)
    # float32 is never fused by default: Triton's IEEE float32 dot lost to cuBLAS
    assert kernel.fused_pays(kernel.MIN_FUSED_TOKENS, dtype) is (dtype != torch.float32)
    assert not kernel.fused_pays(8192, torch.float32)
    for m, k, n in ((1, 64, 96), (7, 32, 333)):
        x, wg, wu = inputs(m, k, n, dtype)
        ref = reference(x, wg, wu, act)
        assert rel_err(kernel.gate_up_act_mul(x, wg, wu, act), ref) <= TOL[dtype]
        assert rel_err(kernel.gate_up_act_mul(x, wg, wu, act, fused=False), ref) <= TOL[dtype]
        assert rel_err(kernel.gate_up_act_mul(x, wg, wu, act, fused=True), ref) <= TOL[dtype]
    assert [c.name for c in launches] == ["_act_mul_kernel", "_act_mul_kernel", "_gate_up_kernel"] * 2
    x, wg, wu = inputs(kernel.MIN_FUSED_TOKENS, 32, 48, dtype)
    kernel.gate_up_act_mul(x, wg, wu)
    assert launches[-1].name == ("_act_mul_kernel" if dtype == torch.float32 else "_gate_up_kernel")


def test_leading_dimensions_and_strided_rows(kernel, launches):
    """[batch, seq, dim] inputs keep their leading dimensions; rows with a stride (a slice of a wider
    tensor) are read in place; other layouts are copied once."""
    x, wg, wu = inputs(2 * 40, 32, 48, torch.float32)
    out = kernel.gate_up_act_mul(x.view(2, 40, 32), wg, wu, fused=True)
    assert out.shape == (2, 40, 48)
    torch.testing.assert_close(out.view(80, 48).double(), reference(x, wg, wu, "gelu_tanh"), rtol=1e-5, atol=1e-5)
    wide = torch.randn(80, 50, device=DEVICE)
    strided = wide[:, 3:35]
    out = kernel.gate_up_act_mul(strided, wg, wu, fused=True)
    assert launches[-1].args[0].data_ptr() == strided.data_ptr()  # no copy
    assert rel_err(out, reference(strided, wg, wu, "gelu_tanh")) <= TOL[torch.float32]
    transposed = torch.randn(32, 80, device=DEVICE).T
    out = kernel.gate_up_act_mul(transposed, wg, wu, fused=True)
    assert rel_err(out, reference(transposed, wg, wu, "gelu_tanh")) <= TOL[torch.float32]


@pytest.mark.parametrize("shape", [(0, 32, 48), (5, 32, 0)])
def test_empty(kernel, launches, shape):
    x, wg, wu = inputs(*shape, torch.float32)
    out = kernel.gate_up_act_mul(x, wg, wu, fused=True)
    assert out.shape == (shape[0], shape[2]) and launches == []


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m", [1, 300])
def test_backward(kernel, dtype, act, m):
    x, wg, wu = inputs(m, 32, 48, dtype, requires_grad=True)
    dy = inputs(m, 48, 1, dtype, seed=3)[0]
    out = kernel.gate_up_act_mul(x, wg, wu, act)
    out.backward(dy)
    x64, wg64, wu64 = (t.detach().double().requires_grad_() for t in (x, wg, wu))
    y64 = ACTS[act](x64 @ wg64.T) * (x64 @ wu64.T)
    y64.backward(dy.double())
    for got, want in ((x.grad, x64.grad), (wg.grad, wg64.grad), (wu.grad, wu64.grad)):
        assert rel_err(got, want) <= 2 * TOL[dtype]


def test_backward_only_x_requires_grad(kernel):
    x, wg, wu = inputs(300, 32, 48, torch.bfloat16)
    x.requires_grad_()
    kernel.gate_up_act_mul(x, wg, wu).sum().backward()
    assert x.grad is not None and wg.grad is None


def test_errors(kernel):
    x, wg, wu = inputs(64, 32, 48, torch.float32)
    f = kernel.gate_up_act_mul
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        f([1.0], wg, wu)
    with pytest.raises(TypeError, match=r"w_up.dtype=torch.float16 must match x.dtype=torch.float32"):
        f(x, wg, wu.half())
    with pytest.raises(TypeError, match="unsupported dtype torch.int32"):
        f(x.int(), wg.int(), wu.int())
    with pytest.raises(ValueError, match=r"x.shape=\(64, 31\): its last dimension must be w_gate.shape\[1\]=32"):
        f(x[:, :31], wg, wu)
    with pytest.raises(ValueError, match=r"w_up.shape=\(47, 32\) must match w_gate.shape=\(48, 32\)"):
        f(x, wg, wu[:47])
    with pytest.raises(ValueError, match=r"w_gate must be 2-D \[hidden, dim\], got shape \(48, 32, 1\)"):
        f(x, wg[..., None], wu)
    with pytest.raises(ValueError, match="activation='relu'; valid: 'gelu_tanh', 'silu'"):
        f(x, wg, wu, "relu")
    with pytest.raises(ValueError, match="BLOCK_N=24 must be a power of two"):
        f(x, wg, wu, _config=(32, 24, 16, 8, 4, 2, 1))
    with pytest.raises(ValueError, match="_config must be 7 ints"):
        f(x, wg, wu, _config=(32, 32, 16))
    if DEVICE == "cuda":
        with pytest.raises(ValueError, match="w_gate.device=cpu must match x.device=cuda:0"):
            f(x, wg.cpu(), wu)


def test_cpu_without_interpreter_says_how():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["HF_HUB_OFFLINE"] = "1"
    code = (
        "import torch, kernels, pathlib\n"
        f"k = kernels.get_local_kernel(pathlib.Path({str(BUILT)!r}))\n"
        "try:\n"
        "    k.gate_up_act_mul(torch.ones(64, 16), torch.ones(16, 16), torch.ones(16, 16), fused=True)\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "ERR" in res.stdout and "TRITON_INTERPRET=1" in res.stdout, res.stdout + res.stderr


class GatedMLPRef(nn.Module):
    """A Hugging Face-style gated MLP (no biases), registered for kernelize under `layer`."""

    def __init__(self, dim, hidden, act):
        super().__init__()
        self.act = act
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(ACTS[self.act](self.gate_proj(x)) * self.up_proj(x))


LAYERS = {"GeGLUMLP": "gelu_tanh", "SwiGLUMLP": "silu"}


def _kernelized(layer, mode):
    torch.manual_seed(0)
    cls = kernels.use_kernel_forward_from_hub(layer)(type(layer, (GatedMLPRef,), {}))
    model = cls(32, 96, LAYERS[layer]).to(DEVICE, torch.bfloat16)  # 16-bit: the fused path
    mapping = {layer: {DEVICE: kernels.LocalLayerRepository(repo_path=BUILT, layer_name=layer)}}
    with kernels.use_kernel_mapping(mapping, inherit_mapping=False):
        kernels.kernelize(model, mode=mode, device=DEVICE)
    return model


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch.compile"])
def test_kernelize_layer(kernel, launches, layer, training, compiled):
    """kernelize swaps the MLP's forward for ours (under torch.compile too, fullgraph: no graph
    break), which launches the fused kernel once and matches float64, gradients included."""
    torch._dynamo.reset()
    mode = kernels.Mode.TRAINING if training else kernels.Mode.INFERENCE
    if compiled:
        mode |= kernels.Mode.TORCH_COMPILE
    model = _kernelized(layer, mode)
    assert model.forward.__func__ is getattr(kernel.layers, layer).forward
    x = torch.randn(2, 160, 32, device=DEVICE, dtype=torch.bfloat16, requires_grad=training)  # 320 rows: fused
    x64 = x.detach().double().requires_grad_()
    w64 = {n: getattr(model, n).weight.detach().double().requires_grad_() for n in ("gate_proj", "up_proj", "down_proj")}
    y64 = F.linear(ACTS[LAYERS[layer]](F.linear(x64, w64["gate_proj"])) * F.linear(x64, w64["up_proj"]),
                   w64["down_proj"])
    run = torch.compile(model, fullgraph=True) if compiled else model
    with torch.set_grad_enabled(training):
        out = run(x)
    assert [c.name for c in launches] == ["_gate_up_kernel"]
    assert rel_err(out, y64) <= TOL[torch.bfloat16]
    if training:
        dy = torch.randn_like(out)
        out.backward(dy)
        y64.backward(dy.double())
        assert rel_err(x.grad, x64.grad) <= 2 * TOL[torch.bfloat16]
        for n in ("gate_proj", "up_proj", "down_proj"):
            assert rel_err(getattr(model, n).weight.grad, w64[n].grad) <= 2 * TOL[torch.bfloat16], n


# --- interleaved weights: interleave(w_gate, w_up) once, then one accumulator per tile ----------------

def test_interleave_alternates_gate_and_up_rows(kernel):
    _, wg, wu = inputs(4, 16, 24, torch.float32)
    w = kernel.interleave(wg, wu)
    assert w.shape == (48, 16) and w.is_contiguous()
    assert torch.equal(w[0::2], wg) and torch.equal(w[1::2], wu)
    with pytest.raises(ValueError, match=r"w_gate.shape=\(24, 16\) and w_up.shape=\(23, 16\) must be the same"):
        kernel.interleave(wg, wu[:23])


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_interleaved_forward(kernel, launches, shape, dtype, act):
    x, wg, wu = inputs(*shape, dtype)
    out = kernel.gate_up_act_mul_interleaved(x, kernel.interleave(wg, wu), act, fused=True)
    assert out.shape == (shape[0], shape[2]) and out.dtype == dtype
    assert rel_err(out, reference(x, wg, wu, act)) <= TOL[dtype]
    assert [c.name for c in launches] == ["_gate_up_interleaved_kernel"]


@pytest.mark.parametrize("tma", [False, True], ids=["pointers", "descriptors"])
@pytest.mark.parametrize("persistent", [0, 1, 2])
def test_interleaved_tile_walks_and_loads(kernel, launches, persistent, tma):
    """Each way of walking tiles (one program per tile; per SM, flattened or not) and of loading them
    covers every tile of a ragged grid: 133 rows and 152 columns of h in 32 × 16 tiles."""
    x, wg, wu = inputs(133, 48, 152, torch.bfloat16, seed=2)
    out = kernel.gate_up_act_mul_interleaved(x, kernel.interleave(wg, wu), fused=True,
                                             _config=(32, 16, 16, 2, 4, 2, persistent), _tma=tma)
    assert rel_err(out, reference(x, wg, wu, "gelu_tanh")) <= TOL[torch.bfloat16]
    assert launches[0].meta["TMA"] is tma and launches[0].meta["FLATTEN"] is (persistent == 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_interleaved_policy_empty_and_strided_rows(kernel, launches, dtype):
    """Few tokens: the unfused path, one GEMM against the interleaved weights and one act·mul kernel
    over its column pairs (odd output counts included); empty inputs launch nothing; strided rows of
    x are read in place."""
    n = kernel.MIN_FUSED_TOKENS
    x, wg, wu = inputs(n, 32, 48, dtype)
    w = kernel.interleave(wg, wu)
    for m in (1, n - 1, n):
        for act in sorted(ACTS):
            out = kernel.gate_up_act_mul_interleaved(x[:m], w, act)
            assert rel_err(out, reference(x[:m], wg, wu, act)) <= TOL[dtype]
    fused = dtype != torch.float32
    assert [c.name for c in launches] == ["_act_mul_pairs_kernel"] * 4 + [
        "_gate_up_interleaved_kernel" if fused else "_act_mul_pairs_kernel"] * 2
    launches.clear()
    x7, wg7, wu7 = inputs(7, 32, 333, dtype)  # 2331 outputs: a ragged last block of pairs
    out = kernel.gate_up_act_mul_interleaved(x7, kernel.interleave(wg7, wu7), fused=False)
    assert rel_err(out, reference(x7, wg7, wu7, "gelu_tanh")) <= TOL[dtype] and len(launches) == 1
    assert kernel.gate_up_act_mul_interleaved(x[:0], w, fused=True).shape == (0, 48) and len(launches) == 1
    wide = torch.randn(n, 50, device=DEVICE, dtype=dtype)
    out = kernel.gate_up_act_mul_interleaved(wide[:, 3:35], w, fused=True)
    assert launches[-1].args[0].data_ptr() == wide[:, 3:35].data_ptr()
    assert rel_err(out, reference(wide[:, 3:35], wg, wu, "gelu_tanh")) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m", [1, 300])
def test_interleaved_backward(kernel, dtype, m):
    x, wg, wu = inputs(m, 32, 48, dtype)
    x.requires_grad_()
    w = kernel.interleave(wg, wu).requires_grad_()
    dy = inputs(m, 48, 1, dtype, seed=3)[0]
    kernel.gate_up_act_mul_interleaved(x, w, "silu").backward(dy)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (ACTS["silu"](x64 @ w64[0::2].T) * (x64 @ w64[1::2].T)).backward(dy.double())
    assert rel_err(x.grad, x64.grad) <= 2 * TOL[dtype] and rel_err(w.grad, w64.grad) <= 2 * TOL[dtype]


def test_interleaved_errors(kernel):
    x, wg, wu = inputs(64, 32, 48, torch.float32)
    f = kernel.gate_up_act_mul_interleaved
    with pytest.raises(ValueError, match=r"w_gate_up must be 2-D \[2·hidden, dim\].*got \(95, 32\)"):
        f(x, kernel.interleave(wg, wu)[:95])
    with pytest.raises(ValueError, match=r"got \(96, 32, 1\)"):
        f(x, kernel.interleave(wg, wu)[..., None])
    with pytest.raises(ValueError, match=r"its last dimension must be w_gate.shape\[1\]=32"):
        f(x[:, :31], kernel.interleave(wg, wu))
    with pytest.raises(TypeError, match="must match x.dtype=torch.float32"):
        f(x, kernel.interleave(wg, wu).half())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch.compile"])
def test_kernelized_layer_takes_interleaved_weights_without_gradients(kernel, launches, compiled):
    """interleave_gate_up at load time gives the MLP a buffer of interleaved weights: inference then
    launches the interleaved kernel (under torch.compile too, fullgraph), training the two-weight one
    (its gradients reach gate_proj and up_proj)."""
    torch._dynamo.reset()
    mode = kernels.Mode.INFERENCE | (kernels.Mode.TORCH_COMPILE if compiled else kernels.Mode.INFERENCE)
    model = _kernelized("GeGLUMLP", mode)
    assert kernel.interleave_gate_up(model) == 1
    assert torch.equal(model.gate_up_interleaved[0::2], model.gate_proj.weight)
    assert "gate_up_interleaved" not in model.state_dict()  # a derived copy, not saved with the model
    x = torch.randn(320, 32, device=DEVICE, dtype=torch.bfloat16)
    x64 = x.double()
    w64 = {n: getattr(model, n).weight.detach().double() for n in ("gate_proj", "up_proj", "down_proj")}
    y64 = F.linear(ACTS["gelu_tanh"](F.linear(x64, w64["gate_proj"])) * F.linear(x64, w64["up_proj"]), w64["down_proj"])
    run = torch.compile(model, fullgraph=True) if compiled else model
    with torch.no_grad():
        out = run(x)
    assert [c.name for c in launches] == ["_gate_up_interleaved_kernel"]
    assert rel_err(out, y64) <= TOL[torch.bfloat16]
    if not compiled:
        model(x).sum().backward()  # weights require grad: the two-weight kernel, gradients to the Linears
        assert [c.name for c in launches[1:]] == ["_gate_up_kernel", "_act_mul_grad_kernel"]
        assert model.gate_proj.weight.grad is not None


# --- training: the forward saves gate and up, the backward recomputes nothing ------------------------

def _adamw_steps(model, steps, compiled):
    """`steps` AdamW steps on a fixed regression target; the kernel launches each step made."""
    run = torch.compile(model, fullgraph=True) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(5)
    for _ in range(steps):
        x = torch.randn(320, 32, generator=gen).to(DEVICE, torch.bfloat16)  # 320 rows: the fused path
        target = torch.randn(320, 32, generator=gen).to(DEVICE, torch.bfloat16)
        loss = (run(x).float() - target.float()).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def _weights(model):
    """gate, up and down weights, whether gate and up are interleaved or not."""
    w = getattr(model, "gate_up_interleaved", None)
    gate, up = (w[0::2], w[1::2]) if isinstance(w, nn.Parameter) else (model.gate_proj.weight, model.up_proj.weight)
    return gate.detach(), up.detach(), model.down_proj.weight.detach()


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("interleaved", [False, True], ids=["two-weights", "interleaved"])
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["eager", "torch.compile"])
def test_adamw_steps_match_the_unmodified_model(kernel, launches, layer, interleaved, compiled):
    """A model kernelized with Mode.TRAINING (| TORCH_COMPILE) trains with the fused backward: one
    forward kernel and one elementwise gradient kernel per step, no recomputed GEMM. Three AdamW
    steps leave its weights where the unmodified bf16 model's are, within bf16's tolerance; with
    interleave_gate_up(trainable=True) the optimizer steps the one interleaved parameter, and the
    Linear weights, views of it, follow. Adam's first steps barely depend on a gradient's scale, so
    a gradient off by a constant factor is caught by test_backward and test_interleaved_backward,
    not here."""
    torch._dynamo.reset()
    mode = kernels.Mode.TRAINING | (kernels.Mode.TORCH_COMPILE if compiled else kernels.Mode.TRAINING)
    model = _kernelized(layer, mode)
    torch.manual_seed(0)
    plain = type(layer, (GatedMLPRef,), {})(32, 96, LAYERS[layer]).to(DEVICE, torch.bfloat16)
    plain.load_state_dict(model.state_dict())
    start = [w.clone() for w in _weights(plain)]
    if interleaved:
        assert kernel.interleave_gate_up(model, trainable=True) == 1
        assert {n for n, _ in model.named_parameters()} == {"gate_up_interleaved", "down_proj.weight"}
    _adamw_steps(model, 3, compiled)
    _adamw_steps(plain, 3, False)
    forward = "_gate_up_interleaved_kernel" if interleaved else "_gate_up_kernel"
    assert [c.name for c in launches] == [forward, "_act_mul_grad_kernel"] * 3
    for got, want, before in zip(_weights(model), _weights(plain), start):
        assert not torch.equal(want, before)  # the steps moved the weights
        assert rel_err(got, want.double()) <= TOL[torch.bfloat16]
    if interleaved:
        assert torch.equal(model.gate_proj.weight, model.gate_up_interleaved.detach()[0::2])


def test_deinterleave_gives_the_linears_their_parameters_back(kernel):
    model = _kernelized("SwiGLUMLP", kernels.Mode.TRAINING)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    kernel.interleave_gate_up(model, trainable=True)
    assert "gate_proj.weight" not in model.state_dict()
    with torch.no_grad():
        model.gate_up_interleaved[0::2] += 1  # as an optimizer step would
    assert kernel.deinterleave_gate_up(model) == 1
    assert not hasattr(model, "gate_up_interleaved")
    assert isinstance(model.gate_proj.weight, nn.Parameter) and model.gate_proj.weight.requires_grad
    torch.testing.assert_close(model.gate_proj.weight, before["gate_proj.weight"] + 1)
    assert torch.equal(model.up_proj.weight, before["up_proj.weight"])


def test_second_order_gradients_raise(kernel):
    """The gradient kernel has no derivative of its own: create_graph=True raises rather than
    returning a wrong second-order gradient."""
    x, wg, wu = inputs(8, 16, 24, torch.float32, requires_grad=True)
    out = kernel.gate_up_act_mul(x, wg, wu, "silu")
    (dx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|twice|does not require grad"):
        torch.autograd.grad(dx.sum(), wg)


def test_interleaving_again_keeps_the_trained_weights(kernel):
    """interleave_gate_up on a module already trained interleaved gives the Linears their parameters
    back first, so nothing is lost whichever layout is asked for next."""
    model = _kernelized("GeGLUMLP", kernels.Mode.TRAINING)
    kernel.interleave_gate_up(model, trainable=True)
    with torch.no_grad():
        model.gate_up_interleaved[1::2] -= 1
    trained_up = model.up_proj.weight.clone()
    kernel.interleave_gate_up(model)  # an inference copy now
    assert isinstance(model.up_proj.weight, nn.Parameter) and torch.equal(model.up_proj.weight, trained_up)
    assert {n for n, _ in model.named_parameters()} == {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}
