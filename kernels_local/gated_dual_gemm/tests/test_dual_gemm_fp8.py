"""Tests for the FP8 (e4m3) path: quantize_rows_fp8 and gated_dual_gemm_fp8.

On a CPU the kernels run under Triton's interpreter (conftest.py), which handles float8e4nv loads,
stores and tl.dot (it widens the operands to float16, then multiplies in float32), and casts of
values that e4m3 holds exactly; its float32 -> float8 cast mis-rounds values that carry into the
next power of two, so under the interpreter the quantization kernel rounds in float32 first
(_fp8._e4m3_grid) and the tests below hold it to the PyTorch rule bit for bit. The interpreter also
rounds float32 to bfloat16 less accurately than a GPU, hence CPU_TOL. The fallback (no Triton
kernel) is checked on a CPU through its float32-dequantization branch; torch._scaled_mm's branch
and the real kernel (wgmma, TMA) only on a Hopper GPU, in the tests marked `hopper`.
"""

import importlib
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HOPPER = DEVICE == "cuda" and torch.cuda.get_device_capability()[0] == 9
hopper = pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (compute capability 9.x): the real FP8 kernel "
                                                "(wgmma on float8e4nv, tensor descriptors) and torch._scaled_mm")
ROOT = Path(__file__).resolve().parents[3]
ACTS = {"gelu_tanh": lambda g: F.gelu(g, approximate="tanh"), "silu": F.silu}
# Relative error (norm) of h against float64 from the same dequantized operands: what is left is the
# bf16 rounding of h and the accumulation. On a GPU Triton's FP8 dot uses Hopper's fast FP8
# accumulation (fewer mantissa bits than float32, error growing with dim): 2e-2 at dim <= 4096.
# Under the interpreter, float32 accumulation and its coarser bf16 rounding (about 3.4e-3 seen).
TOL = 2e-2 if DEVICE == "cuda" else 1e-2
# Small tiles: many programs, every edge masked. Under the interpreter as small as an FP8 dot goes; on
# a GPU the smallest wgmma tiles (64 rows a warpgroup), K tiles of 128 bytes.
SMALL = (32, 32, 32, 2, 4, 2, 1) if DEVICE == "cpu" else (64, 64, 128, 2, 4, 3, 2)
E4M3 = torch.float8_e4m3fn


@pytest.fixture(scope="module")
def fp8(kernel):
    return importlib.import_module(kernel.__name__ + "._fp8")


def _draw(*shape, dtype=torch.float32, scale=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(DEVICE)


def operands(kernel, m, k, n, seed=0):
    """Quantized x [m, k] and gate and up weights [n, k] (nn.Linear's scale, gate twice as wide so
    the activation's curved part is hit), with the weights' scales as [n]."""
    x = _draw(m, k, seed=seed)
    wg = _draw(n, k, scale=2 / k**0.5, seed=seed + 1)
    wu = _draw(n, k, scale=1 / k**0.5, seed=seed + 2)
    xq, xs = kernel.quantize_rows_fp8(x)
    gq, gs = kernel.quantize_rows_fp8(wg)
    uq, us = kernel.quantize_rows_fp8(wu)
    return xq, xs, gq, gs.view(-1), uq, us.view(-1)


def reference(xq, xs, gq, gs, uq, us, act="gelu_tanh"):
    """float64 from the dequantized operands."""
    x = xq.double() * xs.double().reshape(*xq.shape[:-1], 1)
    g = x @ (gq.double() * gs.double().reshape(-1, 1)).T
    u = x @ (uq.double() * us.double().reshape(-1, 1)).T
    return ACTS[act](g) * u


def rel_err(actual, expected):
    return (actual.double() - expected).norm().item() / (expected.norm().item() or 1.0)


def same_bits(a, b) -> int:
    """How many elements of two float8 tensors differ."""
    return (a.view(torch.uint8) != b.view(torch.uint8)).sum().item()


# --- quantize_rows_fp8 ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(5, 333), (2, 3, 3000), (7, 20000), (1, 16), (64, 768)],
                         ids=lambda s: "x".join(map(str, s)))
def test_quantize_matches_the_reference_bit_for_bit(kernel, shape, dtype):
    """Unaligned row lengths (333, 3000), rows longer than one block (20000: two passes), leading
    dimensions; values over nine decades so that subnormal e4m3 values occur."""
    x = _draw(*shape, seed=3).float() * torch.logspace(-6, 3, shape[-1], device=DEVICE)
    x = x.to(dtype)
    q, s = kernel.quantize_rows_fp8(x)
    q_ref, s_ref = kernel.quantize_rows_fp8_reference(x)
    assert q.dtype == E4M3 and q.shape == x.shape
    assert s.dtype == torch.float32 and s.shape == (*shape[:-1], 1)
    assert torch.equal(s, s_ref)
    assert same_bits(q, q_ref) == 0
    # the rule itself: scale = amax / 448 (IEEE), x ≈ x_q · scale within half an e4m3 step (2^-4 relative)
    xf = x.float()
    assert torch.equal(s, xf.abs().amax(-1, keepdim=True).clamp_min(kernel.FP8_TINY) / torch.full_like(s, 448.0))
    err = (q.float() * s - xf).abs()
    assert (err <= xf.abs() * 2**-4 + s * 2**-10).all()


def test_quantize_rounds_to_nearest_even_and_saturates(kernel):
    """A row whose amax is 448 has scale 1, so x / scale is x: ties between e4m3 values round to
    the even one, in the normal range (17 -> 16, 31 -> 32, 432 -> 448) and the subnormal one
    (2^-10 -> 0, 3·2^-10 -> 2^-8); an all-zero row gets FP8_TINY / 448 and zeros."""
    ties = [448.0, 17.0, 19.0, 31.0, -31.0, 432.0, 440.0, 1.0625, 1.1875, 2.0**-10, 3 * 2.0**-10, -(2.0**-9),
            0.0, -0.0, 0.0155, 2.0**-6]
    want = [448.0, 16.0, 20.0, 32.0, -32.0, 448.0, 448.0, 1.0, 1.25, 0.0, 2.0**-8, -(2.0**-9),
            0.0, 0.0, 0.015625, 2.0**-6]
    x = torch.tensor([ties, [0.0] * len(ties)], device=DEVICE)
    q, s = kernel.quantize_rows_fp8(x)
    assert s[0].item() == 1.0
    assert s[1].item() == (torch.tensor(kernel.FP8_TINY) / torch.tensor(448.0)).item()
    assert q[0].float().tolist() == want
    assert (q[1].float() == 0).all()
    assert same_bits(q, kernel.quantize_rows_fp8_reference(x)[0]) == 0


def test_quantize_layouts_empty_and_errors(kernel):
    x = _draw(40, 24, dtype=torch.bfloat16).T  # rows of 40 with a stride: copied once
    q, s = kernel.quantize_rows_fp8(x)
    q_ref, s_ref = kernel.quantize_rows_fp8_reference(x.contiguous())
    assert torch.equal(s, s_ref) and same_bits(q, q_ref) == 0
    q, s = kernel.quantize_rows_fp8(torch.ones(0, 16, device=DEVICE))
    assert q.shape == (0, 16) and s.shape == (0, 1)
    q, s = kernel.quantize_rows_fp8(torch.ones(3, 0, device=DEVICE))
    assert q.shape == (3, 0) and s.shape == (3, 1) and (s > 0).all()
    with pytest.raises(TypeError, match="unsupported dtype torch.int32"):
        kernel.quantize_rows_fp8(torch.ones(3, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="must be a torch.Tensor, got list"):
        kernel.quantize_rows_fp8([1.0])


# --- gated_dual_gemm_fp8 under the interpreter (or on the GPU) --------------------------------------

@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("shape", [(64, 64, 96), (33, 96, 40), (1, 32, 48), (130, 160, 200)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fp8_forward(kernel, shape, act):
    """The kernel with its own table (CONFIGS_FP8), and a tiny tile with every edge masked: rows,
    hidden and dim none a multiple of the tiles at 33 × 96 -> 40 and 130 × 160 -> 200."""
    ops = operands(kernel, *shape)
    assert kernel.fp8_fallback_reason(ops[0], ops[2]) is None
    ref = reference(*ops, act)
    for config in (None, SMALL):
        h = kernel.gated_dual_gemm_fp8(*ops, act, _config=config)
        assert h.shape == (shape[0], shape[2]) and h.dtype == torch.bfloat16
        assert rel_err(h, ref) <= TOL, config


@pytest.mark.parametrize("tma", [False, True], ids=["pointers", "descriptors"])
@pytest.mark.parametrize("persistent", [0, 1, 2])
def test_fp8_tile_walks_and_loads(kernel, persistent, tma):
    """Every way of walking tiles and of loading them covers a ragged grid of SMALL tiles, more tiles
    than programs: under the interpreter 67 rows and 104 columns of h (208 bytes a row: with
    descriptors h is stored through one too) in 32 × 32 tiles, dim 96 (three K tiles); on a GPU 4500
    × 1040 in 64 × 64 tiles (1207 of them), dim 384 (three K tiles)."""
    shape = (67, 96, 104) if DEVICE == "cpu" else (4500, 384, 1040)
    ops = operands(kernel, *shape, seed=4)
    h = kernel.gated_dual_gemm_fp8(*ops, "silu", _config=(*SMALL[:6], persistent), _tma=tma)
    assert rel_err(h, reference(*ops, "silu")) <= TOL


def test_fp8_leading_dimensions_strided_rows_and_scale_shapes(kernel):
    xq, xs, gq, gs, uq, us = operands(kernel, 34, 64, 48)
    ref = reference(xq, xs, gq, gs, uq, us)
    h = kernel.gated_dual_gemm_fp8(xq.view(2, 17, 64), xs.view(2, 17, 1), gq, gs.view(-1, 1), uq, us)
    assert h.shape == (2, 17, 48) and rel_err(h.view(34, 48), ref) <= TOL
    h = kernel.gated_dual_gemm_fp8(xq, xs.view(-1), gq, gs, uq, us, _config=SMALL)
    assert rel_err(h, ref) <= TOL
    wide = torch.zeros(34, 96, dtype=E4M3, device=DEVICE)
    wide[:, 16:80] = xq  # rows with a stride of 96, read in place
    h = kernel.gated_dual_gemm_fp8(wide[:, 16:80], xs, gq, gs, uq, us, _config=SMALL)
    assert rel_err(h, ref) <= TOL


def test_fp8_empty(kernel):
    xq, xs, gq, gs, uq, us = operands(kernel, 4, 32, 16)
    assert kernel.gated_dual_gemm_fp8(xq[:0], xs[:0], gq, gs, uq, us).shape == (0, 16)
    assert kernel.gated_dual_gemm_fp8(xq, xs, gq[:0], gs[:0], uq[:0], us[:0]).shape == (4, 0)
    h = kernel.gated_dual_gemm_fp8(xq[:, :0], xs, gq[:, :0], gs, uq[:, :0], us)
    assert h.shape == (4, 16) and (h == 0).all()


def test_fp8_errors(kernel):
    xq, xs, gq, gs, uq, us = operands(kernel, 8, 32, 16)
    f = kernel.gated_dual_gemm_fp8
    with pytest.raises(TypeError, match=r"x_q.dtype=torch.bfloat16: a float8 tensor is expected"):
        f(xq.to(torch.bfloat16), xs, gq, gs, uq, us)
    with pytest.raises(TypeError, match=r"w_up_scale.dtype=torch.float16 must be torch.float32"):
        f(xq, xs, gq, gs, uq, us.half())
    with pytest.raises(ValueError, match=r"x_q.shape=\(8, 31\): its last dimension must be w_gate_q.shape\[1\]=32"):
        f(xq[:, :31], xs, gq, gs, uq, us)
    with pytest.raises(ValueError, match=r"w_up_q.shape=\(15, 32\) must match"):
        f(xq, xs, gq, gs, uq[:15], us)
    with pytest.raises(ValueError, match=r"x_scale.shape=\(7, 1\) must be \(8, 1\)"):
        f(xq, xs[:7], gq, gs, uq, us)
    with pytest.raises(ValueError, match=r"w_gate_scale.shape=\(15,\) must be \(16,\)"):
        f(xq, xs, gq, gs[:15], uq, us)
    with pytest.raises(ValueError, match="activation='relu'; valid: 'gelu_tanh', 'silu'"):
        f(xq, xs, gq, gs, uq, us, "relu")
    with pytest.raises(ValueError, match="BLOCK_K=16: an FP8 dot needs K tiles of at least 32"):
        f(xq, xs, gq, gs, uq, us, _config=(32, 32, 16, 2, 4, 2, 1))
    with pytest.raises(TypeError, match="must be a torch.Tensor, got list"):
        kernel.fp8_fallback_reason([1.0], gq)


# --- the fallback: its reasons, and its numerics on a CPU --------------------------------------------

def test_fallback_dequantized_numerics(kernel, fp8):
    """_triton=False computes the same h without the kernel: on a CPU from operands dequantized to
    float32 (on a GPU through torch._scaled_mm where dim and hidden are multiples of 16)."""
    for shape in ((33, 96, 40), (1, 32, 48), (64, 64, 96)):
        ops = operands(kernel, *shape)
        for act in sorted(ACTS):
            h = kernel.gated_dual_gemm_fp8(*ops, act, _triton=False)
            assert h.shape == (shape[0], shape[2]) and h.dtype == torch.bfloat16
            assert rel_err(h, reference(*ops, act)) <= TOL


def test_fallback_reasons(kernel, fp8, monkeypatch):
    """Each reason names what the kernel lacks, and the call still computes h (by the fallback);
    forcing the kernel then raises with the reason."""
    xq, xs, gq, gs, uq, us = operands(kernel, 8, 40, 24)  # dim 40: 40-byte rows
    reason = kernel.fp8_fallback_reason(xq, gq)
    assert reason.startswith("dim=40 is not a multiple of 16") and "computed by float32 dequantization" in reason
    assert rel_err(kernel.gated_dual_gemm_fp8(xq, xs, gq, gs, uq, us), reference(xq, xs, gq, gs, uq, us)) <= TOL
    with pytest.raises(ValueError, match="the Triton kernel cannot run here: dim=40"):
        kernel.gated_dual_gemm_fp8(xq, xs, gq, gs, uq, us, _triton=True)

    xq, xs, gq, gs, uq, us = operands(kernel, 8, 32, 24)
    ref = reference(xq, xs, gq, gs, uq, us)
    e5 = gq.float().to(torch.float8_e5m2)  # another float8: the kernel takes e4m3 only
    assert kernel.fp8_fallback_reason(xq, e5).startswith("w_gate_q.dtype=torch.float8_e5m2: the kernel takes")
    h = kernel.gated_dual_gemm_fp8(xq, xs, e5, gs, uq, us)
    assert rel_err(h, reference(xq, xs, e5, gs, uq, us)) <= TOL
    column_major = gq.T.contiguous().T  # [hidden, dim] with dim's stride not 1
    assert "strides (1, 24): the kernel reads row-major" in kernel.fp8_fallback_reason(xq, column_major)
    assert rel_err(kernel.gated_dual_gemm_fp8(xq, xs, column_major, gs, uq, us), ref) <= TOL
    assert kernel.fp8_fallback_reason(xq, gq) is None  # the interpreter (CPU) or Hopper
    if DEVICE == "cpu":
        monkeypatch.setattr(fp8._dual_gemm, "_INTERPRETED", False)
        reason = kernel.fp8_fallback_reason(xq, gq)
        assert reason.startswith("no CUDA: x_q is on cpu") and reason.endswith("computed by float32 dequantization")
        assert rel_err(kernel.gated_dual_gemm_fp8(xq, xs, gq, gs, uq, us), ref) <= TOL
        q, s = kernel.quantize_rows_fp8(xq.float())  # quantization falls back to the PyTorch rule too
        q_ref, s_ref = kernel.quantize_rows_fp8_reference(xq.float())
        assert torch.equal(s, s_ref) and same_bits(q, q_ref) == 0


# --- the configuration table and the sweep --------------------------------------------------------

def test_config_table_and_sweep_candidates(kernel, fp8):
    """CONFIGS_FP8 and the sweep's FP8 candidates are valid configurations with K tiles of 64 or
    128 bytes; the sweep script imports on a CPU; its --fp8 mode compiles few enough candidates."""
    spec = importlib.util.spec_from_file_location("dual_gemm_sweep", ROOT / "scripts" / "dual_gemm_sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    assert 1 <= len(sweep.FP8_CANDIDATES) <= 8
    for config in (*kernel.CONFIGS_FP8.values(), *sweep.FP8_CANDIDATES):
        assert fp8._check_fp8_config(config) == config and config[2] >= 64
    assert set(kernel.CONFIGS_FP8.values()) <= set(sweep.FP8_CANDIDATES)
    assert sweep.FP8_SHAPES == ((8192, 768, 3072), (8192, 4096, 14336), (4096, 2048, 16384), (1, 2048, 16384),
                                (333, 768, 3000))
    assert kernel.fp8_config(1) == kernel.CONFIGS_FP8["decode"]
    assert kernel.fp8_config(kernel.FP8_DECODE_TOKENS + 1) == kernel.CONFIGS_FP8["prefill"]


# --- on a Hopper GPU: the real kernel -----------------------------------------------------------------

@hopper
@pytest.mark.parametrize("shape", [(8192, 4096), (333, 3000), (1, 16384), (7, 20000), (64, 14336)],
                         ids=lambda s: "x".join(map(str, s)))
def test_gpu_quantize_matches_the_reference(kernel, shape):
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        x = _draw(*shape, dtype=dtype, seed=5)
        q, s = kernel.quantize_rows_fp8(x)
        q_ref, s_ref = kernel.quantize_rows_fp8_reference(x)
        assert torch.equal(s, s_ref), (s - s_ref).abs().max().item()
        assert same_bits(q, q_ref) == 0, f"{same_bits(q, q_ref)} of {q.numel()} differ ({dtype})"


# (tokens, dim, hidden): the blog's dims, the irregular 333 × 768 -> 3000, one token, a dim beyond one
# K tile that is no multiple of 128 (528), a hidden size whose rows of h are not 16-byte aligned (300:
# TMA loads, pointer stores), decode's table entry at 48 tokens, and dim 4096 (fast accumulation's error).
GPU_SHAPES = [(2048, 768, 3072), (333, 768, 3000), (1, 2048, 4096), (130, 528, 1000), (65, 256, 300),
              (48, 512, 1024), (512, 4096, 1024)]


@hopper
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_fp8_forward(kernel, fp8, shape):
    ops = operands(kernel, *shape, seed=6)
    assert kernel.fp8_fallback_reason(ops[0], ops[2]) is None
    acts = sorted(ACTS) if shape[0] in (2048, 333) else ["gelu_tanh"]
    for act in acts:
        ref = reference(*ops, act)
        h = kernel.gated_dual_gemm_fp8(*ops, act)
        assert h.shape == (shape[0], shape[2]) and h.dtype == torch.bfloat16
        assert rel_err(h, ref) <= TOL, act
        # the fallback agrees: torch._scaled_mm where hidden is a multiple of 16, else dequantized
        assert rel_err(kernel.gated_dual_gemm_fp8(*ops, act, _triton=False), ref) <= TOL
    if shape[2] % 16 == 0:
        assert not fp8._SCALED_MM_FAILED, "torch._scaled_mm raised on this GPU: the fallback dequantized"


@hopper
@pytest.mark.parametrize("config", [None, (128, 128, 128, 8, 8, 3, 0), (128, 128, 128, 8, 8, 3, 1),
                                    (64, 128, 128, 8, 4, 4, 0)], ids=str)
@pytest.mark.parametrize("tma", [None, False], ids=["auto", "pointers"])
def test_gpu_fp8_configs_and_loads(kernel, config, tma):
    """The table's entries (None: chosen by tokens), the persistent walks, and pointer loads on Hopper."""
    for shape in ((333, 768, 3000), (1, 2048, 4096)):
        ops = operands(kernel, *shape, seed=7)
        h = kernel.gated_dual_gemm_fp8(*ops, _config=config, _tma=tma)
        assert rel_err(h, reference(*ops)) <= TOL, shape


@hopper
def test_gpu_no_fallback_at_the_tuned_shapes(kernel):
    """At the sweep's shapes (scripts/dual_gemm_sweep.py --fp8) the kernel runs, no fallback."""
    for m, k, n in ((8192, 768, 3072), (8192, 4096, 14336), (4096, 2048, 16384), (1, 2048, 16384), (333, 768, 3000)):
        x_q = torch.empty(m, k, dtype=E4M3, device=DEVICE)
        w_q = torch.empty(n, k, dtype=E4M3, device=DEVICE)
        assert kernel.fp8_fallback_reason(x_q, w_q) is None, (m, k, n)


# --- the planned eager path -----------------------------------------------------------------------

def test_fp8_plans_are_made_once_per_key(kernel, fp8, monkeypatch):
    """Checks and launch decisions once per key of shapes, strides, dtypes and device: a second call
    of a key allocates and launches only, and gives what the general path gives, bit for bit."""
    made = []
    for name in ("_make_quantize_plan", "_make_fp8_plan"):
        real = getattr(fp8, name)
        monkeypatch.setattr(fp8, name, lambda *a, _real=real, _name=name: made.append(_name) or _real(*a))
    fp8._QUANTIZE_PLANS.clear()
    fp8._FP8_PLANS.clear()
    x = _draw(2, 5, 48, dtype=torch.bfloat16, seed=11)
    ops = operands(kernel, 10, 48, 40, seed=12)  # planned: three keys for quantize_rows_fp8 (x and two weights)
    made.clear()
    for _ in range(3):
        xq, xs = kernel.quantize_rows_fp8(x)
        h = kernel.gated_dual_gemm_fp8(xq.view(10, 48), xs.view(10, 1), *ops[2:], "silu")
    assert made == ["_make_quantize_plan", "_make_fp8_plan"]
    q_ref, s_ref = fp8._quantize_rows(x)
    assert same_bits(xq, q_ref) == 0 and torch.equal(xs, s_ref)
    general = kernel.gated_dual_gemm_fp8(xq.view(10, 48), xs.view(10, 1), *ops[2:], "silu", _triton=True)
    assert torch.equal(h, general)
    kernel.quantize_rows_fp8(x[:1])  # another key
    assert made[-1] == "_make_quantize_plan" and len(made) == 3


def test_fp8_keys_the_plan_cannot_take_run_the_general_path(kernel, fp8):
    """Rows that need a copy (a last dimension with a stride), x_scale as [rows] and empty inputs:
    the plan says no once, and every call is still right."""
    fp8._QUANTIZE_PLANS.clear()
    fp8._FP8_PLANS.clear()
    x = _draw(40, 24, dtype=torch.bfloat16, seed=13).T
    for _ in range(2):
        q, s = kernel.quantize_rows_fp8(x)
        q_ref, s_ref = kernel.quantize_rows_fp8_reference(x.contiguous())
        assert same_bits(q, q_ref) == 0 and torch.equal(s, s_ref)
    assert list(fp8._QUANTIZE_PLANS.values()) == [False]
    ops = operands(kernel, 6, 32, 24, seed=14)
    for _ in range(2):
        h = kernel.gated_dual_gemm_fp8(ops[0], ops[1].view(-1), *ops[2:])
        assert rel_err(h, reference(*ops)) <= TOL
        empty = kernel.gated_dual_gemm_fp8(ops[0][:0], ops[1][:0], *ops[2:])
        assert empty.shape == (0, 24)


def test_fp8_bad_input_is_named_on_the_planned_path(kernel):
    ops = list(operands(kernel, 4, 32, 16, seed=15))
    kernel.gated_dual_gemm_fp8(*ops)  # the key of good operands is planned
    ops[1] = ops[1].half()
    with pytest.raises(TypeError, match="x_scale.dtype=torch.float16"):
        kernel.gated_dual_gemm_fp8(*ops)
    with pytest.raises(TypeError, match="unsupported dtype torch.int32"):
        kernel.quantize_rows_fp8(torch.ones(3, 16, dtype=torch.int32, device=DEVICE))


@hopper
def test_gpu_fp8_later_calls_launch_the_compiled_kernels(kernel, fp8):
    """After a key's first call, both kernels launch through the kept compiled kernel (no Triton
    binding); an x_q off 16-byte alignment under a descriptor plan takes the general path."""
    x = _draw(8192, 768, dtype=torch.bfloat16, seed=16)
    ops = operands(kernel, 8192, 768, 3072, seed=17)
    xq, xs = kernel.quantize_rows_fp8(x)
    kernel.gated_dual_gemm_fp8(xq, xs, *ops[2:])
    quant, gemm = (fp8.launcher(k) for k in (fp8._quantize_rows_kernel, fp8._gate_up_fp8_kernel))
    before = quant.fast_calls, gemm.fast_calls
    xq, xs = kernel.quantize_rows_fp8(x)
    h = kernel.gated_dual_gemm_fp8(xq, xs, *ops[2:])
    assert (quant.fast_calls, gemm.fast_calls) == (before[0] + 1, before[1] + 1)
    want = reference(xq, xs, *ops[2:])
    assert rel_err(h, want) <= TOL
    shifted = torch.empty(8192 * 768 + 16, dtype=E4M3, device=DEVICE)[16:].view(8192, 768)
    shifted.copy_(xq)  # same key at another address, still 16-byte aligned: the kept kernel
    assert rel_err(kernel.gated_dual_gemm_fp8(shifted, xs, *ops[2:]), want) <= TOL
    assert gemm.fast_calls == before[1] + 2
    odd = torch.empty(8192 * 768 + 1, dtype=E4M3, device=DEVICE)[1:].view(8192, 768)
    odd.copy_(xq)  # same key, off alignment: pointer loads, a kernel of their own compiled first
    assert rel_err(kernel.gated_dual_gemm_fp8(odd, xs, *ops[2:]), want) <= TOL
    assert gemm.fast_calls == before[1] + 2
