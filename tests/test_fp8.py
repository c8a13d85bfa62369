"""The fp8 dtype on a CPU: the quantization rule, the float64 reference and its tolerance (a correct
fp8 computation passes, wrong ones fail), why fp8 cases skip, where fp8 cases are, and the guard
around the fp8 GEMM ceiling. The GEMMs run as torch._scaled_mm where this torch has it on a CPU, and
emulated from the dequantized operands everywhere; nothing here is timed."""

import dataclasses
import sys
import types

import pytest
import torch

from mlpbench import registry, runner, sources, timing, workloads
from mlpbench.ops import FP8, shape
from mlpbench.ops import _fp8

E4M3 = torch.float8_e4m3fn


def _emulated_scaled_mm(a_q, a_scale, w_q, w_scale, bias=None):
    """torch._scaled_mm's row-wise product from the dequantized operands: fp32 accumulation, bf16 out."""
    out = (a_q.float() * a_scale) @ (w_q.float() * w_scale[:, None]).t()
    if bias is not None:
        out = out + bias.float()
    return out.to(torch.bfloat16)


def _scaled_mm_on_cpu() -> bool:
    try:
        a = torch.ones(2, 16).to(E4M3)
        torch._scaled_mm(a, a.t(), scale_a=torch.ones(2, 1), scale_b=torch.ones(1, 2), out_dtype=torch.bfloat16)
    except Exception:  # noqa: BLE001 - absent or unsupported on this CPU build
        return False
    return True


@pytest.fixture(params=["emulated", "scaled_mm"])
def gemm(request, monkeypatch):
    """The fp8 GEMM the modules call: emulated, or torch._scaled_mm itself where a CPU runs it."""
    if request.param == "emulated":
        monkeypatch.setattr(_fp8, "scaled_mm", _emulated_scaled_mm)
    elif not _scaled_mm_on_cpu():
        pytest.skip("torch._scaled_mm does not run e4m3 on this CPU build; the emulated GEMM stands in")
    return request.param


def _small(case_id, **dims):
    """A registry case at CPU size (its op, variant and dtype; these dims)."""
    big = registry.case_by_id(case_id)
    return dataclasses.replace(big, shape=dataclasses.replace(big.shape, dims=tuple(dims.items())))


MLP_SMALL = [("mlp/eager/fp8/t8192-d768-h3072", dict(t=64, d=256, h=1024)),
             ("swiglu_mlp/eager/fp8/t8192-d768-h3072", dict(t=48, d=256, h=896)),
             ("mlp/eager/fp8/t1-d2048-h16384", dict(t=1, d=512, h=2048))]
LINEAR_SMALL = ("linear/eager/fp8/t8192-i4096-o4096", dict(t=33, i=256, o=128))


# --- The quantization rule --------------------------------------------------------------------------

@pytest.mark.parametrize("rows, k", [(7, 333), (1, 16), (64, 4096)])
def test_rows_quantize_with_scale_amax_over_448_and_round_trip_within_half_an_e4m3_step(rows, k):
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(k), dtype=torch.bfloat16) * 3
    q, scale = _fp8.quantize_rows(x)
    assert q.dtype == E4M3 and q.shape == x.shape and scale.dtype == torch.float32 and scale.shape == (rows, 1)
    amax = x.float().abs().amax(dim=-1, keepdim=True)
    assert torch.equal(scale, amax / 448)
    assert torch.equal(q.float().abs().amax(dim=-1, keepdim=True), torch.full((rows, 1), 448.0))  # each row's max hits 448
    back = _fp8.dequantize_rows(q, scale)
    x64 = x.double()
    normal = x64.abs() >= scale.double() * 2**-6  # e4m3's normal range, scaled
    rel = ((back - x64).abs() / x64.abs())[normal]
    assert rel.max() <= 2**-4 + 1e-12  # 3 mantissa bits: rounding moves a value by at most half a 2**-3 step
    assert rel.max() > 2**-6  # and it did round: the check above can fail
    half_step = (scale.double() * 2**-10).expand_as(x64)  # subnormals: half of their 2**-9 step, scaled
    assert ((back - x64).abs()[~normal] <= half_step[~normal] * (1 + 1e-9)).all()


def test_leading_dims_are_rows_too():
    x = torch.randn(2, 3, 40, dtype=torch.bfloat16)
    q, scale = _fp8.quantize_rows(x)
    assert q.shape == (2, 3, 40) and scale.shape == (2, 3, 1)
    q2, scale2 = _fp8.quantize_rows(x.reshape(6, 40))
    assert torch.equal(q.reshape(6, 40).float(), q2.float()) and torch.equal(scale.reshape(6, 1), scale2)


def test_a_zero_row_quantizes_to_zeros_with_a_finite_scale():
    x = torch.zeros(3, 333, dtype=torch.bfloat16)
    x[1] = torch.linspace(-2, 2, 333)
    q, scale = _fp8.quantize_rows(x)
    assert torch.isfinite(scale).all() and (scale > 0).all()
    assert scale[0].item() == scale[2].item() == (torch.tensor(torch.finfo(torch.float32).tiny) / 448).item()
    assert (q[0].float() == 0).all() and (q[2].float() == 0).all()
    assert torch.isfinite(_fp8.dequantize_rows(q, scale)).all()


def test_values_are_clamped_to_448_not_cast_past_e4m3s_range():
    # x / scale may round just past 448; CUDA's cast of a value past e4m3's range gives NaN
    x = torch.tensor([[1.0, -3.0, 2.999]])
    q, scale = _fp8.quantize_rows(x)
    assert q.float().abs().max().item() == 448.0 and torch.isfinite(q.float()).all()
    big = torch.tensor([[1e30, -1e30, 1.0]])
    q, scale = _fp8.quantize_rows(big)
    assert q.float().tolist()[0][:2] == [448.0, -448.0]


def test_weights_are_quantized_per_output_channel():
    lin = torch.nn.Linear(333, 48, bias=False).to(torch.bfloat16)
    w_q, w_scale = _fp8.quantized_weight(lin)
    assert w_q.shape == (48, 333) and w_q.dtype == E4M3 and w_scale.shape == (48,) and w_scale.dtype == torch.float32
    assert torch.equal(w_scale, lin.weight.float().abs().amax(dim=1) / 448)
    # half of e4m3's largest step (32, between 256 and 448), scaled by each row's own scale
    assert ((_fp8.dequantized(w_q, w_scale) - lin.weight.double()).abs() <= 16 * w_scale.double()[:, None]).all()


def test_the_float64_requantization_is_the_same_rule():
    h = torch.randn(5, 200, dtype=torch.float64)
    q, scale = _fp8.quantize_rows(h.float())
    assert torch.allclose(_fp8.quantize_rows_float64(h), _fp8.dequantize_rows(q, scale), rtol=2**-3, atol=0)


# --- The reference and its tolerance ---------------------------------------------------------------

@pytest.mark.parametrize("case_id, dims", MLP_SMALL)
def test_the_eager_fp8_mlp_passes_its_reference_with_room(case_id, dims, gemm):
    wl = workloads.build(_small(case_id, **dims), "cpu")
    err = workloads.check(wl)
    assert workloads.tolerance(wl) == _fp8.TOLERANCE
    assert 0 < err < 0.75 * _fp8.TOLERANCE, err
    # what the re-quantization of h is worth: without it the same output sits further from the reference
    x = wl.make_inputs(7)[0]
    out = wl.fn(x).double()
    with_h = _fp8.quantized_mlp_reference(x, wl.fn)
    without = _fp8.quantized_mlp_reference(x, wl.fn, requantize_h=False)
    assert (out - with_h).norm() < (out - without).norm()


def test_the_eager_fp8_linear_passes_its_reference(gemm):
    wl = workloads.build(_small(*LINEAR_SMALL[:1], **LINEAR_SMALL[1]), "cpu")
    assert workloads.tolerance(wl) == _fp8.LINEAR_TOLERANCE
    assert 0 < workloads.check(wl) < 0.5 * _fp8.LINEAR_TOLERANCE


def _wrong(wl, fn):
    return dataclasses.replace(wl, fn=fn)


@pytest.mark.parametrize("case_id, dims", MLP_SMALL[:2])
def test_wrong_fp8_mlps_fail_the_reference(case_id, dims, gemm):
    wl = workloads.build(_small(case_id, **dims), "cpu")
    base = wl.fn
    (bf16,) = base.bf16

    def stale_scale(x):  # h dequantized with its first row's scale for every row
        b = base
        x_q, xs = _fp8.quantize_rows(x)
        h = b.step(_fp8.scaled_mm(x_q, xs, b.w_gate_q, b.w_gate_scale), _fp8.scaled_mm(x_q, xs, b.w_up_q, b.w_up_scale))
        h_q, hs = _fp8.quantize_rows(h)
        return _fp8.scaled_mm(h_q, hs[:1].expand_as(hs).contiguous(), b.w_down_q, b.w_down_scale)

    def other_activation(x):
        gelu = "gelu_tanh" not in base.activation
        step = (lambda g, u: torch.nn.functional.gelu(g, approximate="tanh") * u) if gelu else \
            (lambda g, u: torch.nn.functional.silu(g) * u)
        b = base
        x_q, xs = _fp8.quantize_rows(x)
        h = step(_fp8.scaled_mm(x_q, xs, b.w_gate_q, b.w_gate_scale), _fp8.scaled_mm(x_q, xs, b.w_up_q, b.w_up_scale))
        h_q, hs = _fp8.quantize_rows(h)
        return _fp8.scaled_mm(h_q, hs, b.w_down_q, b.w_down_scale)

    for bad in (stale_scale, other_activation, bf16, lambda x: base(x) * 1.05):  # bf16: unquantized weights
        with pytest.raises(workloads.CorrectnessError, match="tolerance"):
            workloads.check(_wrong(wl, bad))


def test_wrong_fp8_linears_fail_the_reference(gemm):
    wl = workloads.build(_small(*LINEAR_SMALL[:1], **LINEAR_SMALL[1]), "cpu")
    base = wl.fn
    (lin,) = base.bf16
    unquantized_x = lambda x: (x.double() @ _fp8.dequantized(base.w_q, base.w_scale).t()  # noqa: E731
                               + base.bias.double()).to(torch.bfloat16)
    no_bias = lambda x: _fp8.scaled_mm(*_fp8.quantize_rows(x), base.w_q, base.w_scale)  # noqa: E731
    for bad in (lin, unquantized_x, no_bias):
        with pytest.raises(workloads.CorrectnessError, match="tolerance"):
            workloads.check(_wrong(wl, bad))


def test_the_tolerance_rule_is_the_one_documented():
    assert _fp8.TOLERANCE == 2**-4 / 2 + 2**-8
    assert _fp8.LINEAR_TOLERANCE == workloads.TOLERANCE["bf16"]
    from pathlib import Path

    method = (Path(__file__).resolve().parent.parent / "docs" / "method.md").read_text()
    assert "2⁻⁴/2 + 2⁻⁸" in method and "re-quantizes h" in method


# --- Our kernel's fp8 path, with a stand-in for the kernel --------------------------------------------

def _stand_in_kernel(reason):
    def gated_dual_gemm_fp8(x_q, x_scale, wg_q, wg_scale, wu_q, wu_scale, activation):
        from mlpbench.ops._gated import act_mul

        return act_mul(activation)(_fp8.scaled_mm(x_q, x_scale, wg_q, wg_scale), _fp8.scaled_mm(x_q, x_scale, wu_q, wu_scale))

    return types.SimpleNamespace(quantize_rows_fp8=_fp8.quantize_rows, gated_dual_gemm_fp8=gated_dual_gemm_fp8,
                                 fp8_fallback_reason=lambda x_q, w_q: reason)


@pytest.mark.parametrize("reason", [None, "a stand-in kernel"])
def test_ours_calls_the_kernels_fp8_functions_and_names_the_path_taken(monkeypatch, reason):
    monkeypatch.setattr(_fp8, "scaled_mm", _emulated_scaled_mm)
    monkeypatch.setattr(sources, "local_kernel", lambda repo: _stand_in_kernel(reason))
    wl = workloads.build(_small("swiglu_mlp/ours/fp8/t8192-d4096-h14336", t=16, d=128, h=448), "cpu")
    assert workloads.check(wl) < _fp8.TOLERANCE
    assert "kernels_local/gated_dual_gemm" in wl.source
    assert ("not taken: a stand-in kernel" in wl.source) if reason else wl.source.endswith("; FP8 Triton path")


@pytest.mark.parametrize("case_id", ["mlp/ours/fp8/t8192-d768-h3072", "swiglu_mlp/ours/fp8/t8192-d4096-h14336"])
def test_ours_runs_the_real_kernel_repository_and_passes_the_reference(case_id):
    """The harness and kernels_local/gated_dual_gemm agree on the FP8 API: its Triton kernels (under the
    interpreter here) through the ours case, at unaligned tokens and hidden size, against float64."""
    wl = workloads.build(_small(case_id, t=7, d=64, h=40), "cpu")
    assert workloads.check(wl) < _fp8.TOLERANCE
    assert "kernels_local/gated_dual_gemm" in wl.source


# --- Why fp8 cases skip -------------------------------------------------------------------------------

def _case(case_id):
    return registry.case_by_id(case_id)


def test_fp8_cases_skip_on_a_cpu_with_the_reason():
    for case_id in ("mlp/eager/fp8/t8192-d768-h3072", "linear/torchao/fp8/t1-i4096-o4096",
                    "swiglu_mlp/ours/fp8/t8192-d4096-h14336"):
        reason = runner.skip_reason(_case(case_id), "cpu")
        assert "compute capability 8.9" in reason and "this is a cpu" in reason, reason
    assert runner.skip_reason(_case("mlp/eager/bf16/t8192-d768-h3072"), "cpu") is None  # other dtypes unchanged


def test_fp8_skips_on_a_gpu_older_than_ada_and_runs_on_hopper(monkeypatch):
    monkeypatch.setattr(_fp8, "_cuda_capability", lambda: ("NVIDIA A100-SXM4-80GB", (8, 0)))
    assert "this NVIDIA A100-SXM4-80GB is 8.0" in _fp8.unsupported_reason("cuda")
    monkeypatch.setattr(_fp8, "_cuda_capability", lambda: None)
    assert "torch sees no CUDA GPU" in _fp8.unsupported_reason("cuda")
    for capability in ((8, 9), (9, 0), (10, 0)):
        monkeypatch.setattr(_fp8, "_cuda_capability", lambda: ("a GPU", capability))
        assert _fp8.unsupported_reason("cuda") is None
        assert runner.skip_reason(_case("mlp/eager/fp8/t8192-d768-h3072"), "cuda") is None


@pytest.fixture
def fp8_gpu(monkeypatch):
    """As if on a GPU that runs fp8."""
    monkeypatch.setattr(_fp8, "unsupported_reason", lambda device: None)


def test_torchao_cases_skip_where_torchao_is_missing(fp8_gpu, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))
    assert runner.skip_reason(_case("mlp/torchao/fp8/t8192-d768-h3072"), "cuda") == \
        "torchao is not installed (pip install torchao)"


def test_torchao_cases_skip_where_torchao_fails_to_import(fp8_gpu, monkeypatch, tmp_path):
    fake = tmp_path / "torchao"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('torchao was built for another torch')\n")
    for name in [m for m in sys.modules if m == "torchao" or m.startswith("torchao.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    reason = runner.skip_reason(_case("linear/torchao/fp8/t8192-i4096-o4096"), "cuda")
    assert reason == "torchao does not import here: ImportError: torchao was built for another torch"


def test_ours_skips_while_the_kernel_repository_lacks_the_fp8_functions(fp8_gpu, monkeypatch):
    case = _case("mlp/ours/fp8/t8192-d768-h3072")
    have = [f for f in _fp8.FP8_KERNEL_FUNCTIONS if hasattr(sources.local_kernel("gated_dual_gemm"), f)]
    reason = runner.skip_reason(case, "cuda")
    if len(have) < len(_fp8.FP8_KERNEL_FUNCTIONS):  # the kernel's branch not merged yet
        assert reason.startswith("kernels_local/gated_dual_gemm has no ") and "FP8 kernel" in reason, reason
    else:
        assert reason is None
    monkeypatch.setattr(sources, "local_kernel", lambda repo: types.SimpleNamespace(quantize_rows_fp8=None))
    reason = runner.skip_reason(case, "cuda")
    assert "has no gated_dual_gemm_fp8, fp8_fallback_reason" in reason
    monkeypatch.setattr(sources, "local_kernel", lambda repo: _stand_in_kernel(None))
    assert runner.skip_reason(case, "cuda") is None
    assert runner.skip_reason(_case("mlp/ours/bf16/t8192-d768-h3072"), "cuda") is None  # bf16's path: unaffected


def test_variants_without_an_fp8_path_have_no_fp8_cases_and_skip_if_asked(fp8_gpu):
    fp8_variants = {(c.op, c.variant) for c in registry.all_cases() if c.dtype == FP8}
    assert fp8_variants == {(op, v) for op in ("mlp", "swiglu_mlp") for v in ("eager", "compiled", "ours", "torchao")} \
        | {("linear", v) for v in ("eager", "compiled", "torchao")}
    shape_ = registry.case_by_id("mlp/eager/fp8/t8192-d768-h3072").shape
    for variant in ("liger", "dualgemm", "maxautotune"):
        assert not registry.variant_of(registry.Case("mlp", variant, FP8, shape_)).measured_at(shape_, FP8)
        assert runner.skip_reason(registry.Case("mlp", variant, FP8, shape_), "cuda") == _fp8.NO_FP8_PATH
    with pytest.raises(ValueError, match="no FP8 path"):
        registry.OPS["mlp"].variant("liger").maker(FP8)
    assert registry.OPS["mlp"].variant("torchao").only_dtypes == (FP8,)


# --- Where fp8 cases are ------------------------------------------------------------------------------

def test_fp8_cases_are_in_the_standard_tier_at_the_blogs_and_llamas_shapes_and_at_one_token():
    std = {c.id for c in registry.select("standard", dtypes=[FP8])}
    for op in ("mlp", "swiglu_mlp"):
        for variant in ("eager", "compiled", "ours", "torchao"):
            assert {f"{op}/{variant}/fp8/t8192-d768-h3072", f"{op}/{variant}/fp8/t8192-d4096-h14336"} <= std
    assert {"mlp/eager/fp8/t1-d2048-h16384", "swiglu_mlp/torchao/fp8/t1-d4096-h14336",
            "linear/eager/fp8/t8192-i4096-o4096", "linear/torchao/fp8/t1-i4096-o4096"} <= std
    assert {c.id for c in registry.select("full", dtypes=[FP8])} == std
    # bf16 beside fp8 at the swiglu MLP's new blog-sized shape
    assert "swiglu_mlp/eager/bf16/t8192-d768-h3072" in {c.id for c in registry.select("standard")}


def test_fp8_is_in_no_quick_case_and_a_quick_shape_refuses_it():
    assert not [c for c in registry.select("quick") if c.dtype == FP8]
    assert "fp8/t8192-d768-h3072" not in {c.id for c in registry.select("quick")}
    with pytest.raises(ValueError, match="fp8 needs an fp8-capable GPU"):
        shape(("quick",), "an fp8 shape on a CPU", ("bf16", FP8), t=1)
    with pytest.raises(ValueError, match="dtypes 'bf16'"):
        shape(("quick",), "dtypes given as one string", "bf16", t=1)


def test_fp8_case_ids_and_selection():
    assert registry.case_by_id("mlp/ours/fp8/t8192-d4096-h14336").dtype == FP8
    assert registry.select("standard", ops=["gelu_mul"], dtypes=[FP8]) == []
    assert "fp8" in registry.DTYPES and registry.DTYPES[:3] == ("fp32", "bf16", "fp16")  # appended last


# --- The fp8 GEMM ceiling's guard ---------------------------------------------------------------------

def test_the_fp8_ceiling_is_left_out_where_fp8_does_not_run():
    assert timing.fp8_gemm_ceiling(torch.Generator()) == {}  # this CPU


def test_a_failing_fp8_ceiling_is_recorded_not_raised(fp8_gpu, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")

    monkeypatch.setattr(torch, "randn", broken)
    monkeypatch.setattr(torch.cuda, "synchronize", broken)  # as after a failed kernel: raises again
    assert timing.fp8_gemm_ceiling(torch.Generator()) == {"gemm_fp8_error": "RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED"}


def test_the_fp8_ceiling_measures_scaled_mm_with_row_wise_scales(fp8_gpu, monkeypatch):
    seen = {}

    def fake_device_time(fn, input_sets, replays):
        monkeypatch.setattr(_fp8, "scaled_mm", lambda a, sa, b, sb: seen.update(a=a, sa=sa, b=b, sb=sb))
        fn()
        return types.SimpleNamespace(median_s=0.5)

    real_randn = torch.randn
    monkeypatch.setattr(torch, "randn", lambda *a, device=None, **k: real_randn(*a, **k))
    monkeypatch.setattr(torch, "rand", lambda *a, device=None, generator=None, **k: torch.ones(*a))
    monkeypatch.setattr(timing, "device_time", fake_device_time)
    out = timing.fp8_gemm_ceiling(torch.Generator(), m=32)
    assert out == {"gemm_fp8_flops": 2 * 32**3 / 0.5}
    assert seen["a"].dtype == seen["b"].dtype == E4M3 and seen["sa"].shape == (32, 1) and seen["sb"].shape == (32,)


# --- A peer's own scale rule: torchao's ----------------------------------------------------------------

def test_the_bf16_scale_rule_is_torchaos_bit_for_bit():
    primitives = pytest.importorskip("torchao.quantization.quant_primitives",
                                     reason="torchao is an optional extra (pip install -e .[fp8])")
    torch.manual_seed(3)
    for t in (torch.randn(64, 333, dtype=torch.bfloat16), torch.nn.Linear(256, 40).to(torch.bfloat16).weight.detach()):
        want_s = primitives._choose_scale_float8(t, block_size=[1, t.shape[-1]], float8_dtype=E4M3)
        want_q = primitives._quantize_affine_float8(t, want_s, E4M3)
        q, s = _fp8.quantize_rows(t, torch.bfloat16)
        assert torch.equal(s, want_s.reshape(s.shape)) and torch.equal(q.view(torch.uint8), want_q.view(torch.uint8))
        # and it is not our float32 rule: some scales differ, and so do some elements
        assert not torch.equal(_fp8.quantize_rows(t)[1], s)


def _bf16_rule_make(kind):
    """make(base) of a peer that quantizes every operand by the bf16 scale rule (as torchao does),
    from the base's bf16 module, GEMMs emulated from the dequantized operands."""
    def make(base):
        (bf16,) = base.bf16
        rule = torch.bfloat16
        if kind == "linear":
            w_q, w_s = _fp8.quantized_weight(bf16, rule)
            return (lambda x: _emulated_scaled_mm(*_fp8.quantize_rows(x, rule), w_q, w_s, base.bias)), "bf16 rule"
        w = {n: _fp8.quantized_weight(getattr(bf16, f"{n}_proj"), rule) for n in ("gate", "up", "down")}

        def mlp(x):
            x_q, xs = _fp8.quantize_rows(x, rule)
            h = base.step(_emulated_scaled_mm(x_q, xs, *w["gate"]), _emulated_scaled_mm(x_q, xs, *w["up"]))
            return _emulated_scaled_mm(*_fp8.quantize_rows(h, rule), *w["down"])
        return mlp, "bf16 rule"
    make.fp8_scale_dtype = "bfloat16"
    return make


def test_a_peer_with_its_own_scale_rule_is_checked_against_a_reference_by_that_rule():
    assert _fp8.scale_rule(_fp8.torchao_make) is torch.bfloat16 and _fp8.scale_rule(lambda b: b) is None
    case = _small(*LINEAR_SMALL[:1], **LINEAR_SMALL[1])
    peer = _bf16_rule_make("linear")
    wl = _fp8.linear_workload(case, "cpu", peer)
    assert 0 < workloads.check(wl) < 0.5 * _fp8.LINEAR_TOLERANCE
    # held to our float32 rule's reference instead, the same correct computation reads as an error
    # several times bf16's: the elements its scales moved onto a neighbouring e4m3 value
    ours_ref = _fp8.linear_workload(case, "cpu", lambda base: peer(base))
    with pytest.raises(workloads.CorrectnessError, match="tolerance"):
        workloads.check(ours_ref)
    from mlpbench.ops import mlp, swiglu_mlp

    for case_id, dims in MLP_SMALL[:2]:
        op = mlp if case_id.startswith("mlp/") else swiglu_mlp
        wl = _fp8.mlp_workload(_small(case_id, **dims), "cpu", _bf16_rule_make("mlp"), op.LAYER, op.ACTIVATION)
        assert 0 < workloads.check(wl) < 0.75 * _fp8.TOLERANCE


def test_a_variants_scale_rule_reaches_its_reference_through_workloads_build(monkeypatch):
    """As the runner builds a case: workloads.build wraps the variant's make, and the rule it
    declares must survive the wrapping, or the peer is held to our rule's reference after all."""
    peer = _bf16_rule_make("linear")

    def fp8(base, device, **options):
        return peer(base)
    fp8.fp8_scale_dtype = peer.fp8_scale_dtype
    op = workloads.OPS["linear"]
    variants = tuple(dataclasses.replace(v, fp8=fp8, skip_reason=None, fp8_skip_reason=None, requires=None)
                     if v.name == "torchao" else v for v in op.variants)
    monkeypatch.setitem(workloads.OPS, "linear", dataclasses.replace(op, variants=variants))
    wl = workloads.build(_small("linear/torchao/fp8/t8192-i4096-o4096", **LINEAR_SMALL[1]), "cpu")
    assert 0 < workloads.check(wl) < 0.5 * _fp8.LINEAR_TOLERANCE
    del fp8.fp8_scale_dtype  # the same make without its rule: our reference, which it fails
    with pytest.raises(workloads.CorrectnessError, match="tolerance"):
        workloads.check(workloads.build(_small("linear/torchao/fp8/t8192-i4096-o4096", **LINEAR_SMALL[1]), "cpu"))
