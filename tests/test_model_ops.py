"""The model ops (mlpbench/ops/llama_model.py, gemma_model.py): transformers' causal LMs with their MLPs
kernelized by our layers, gated on their logits in float64; at the CPU size of the quick tier."""

import dataclasses
import subprocess
import sys

import pytest

from mlpbench.asv import suite as asv_suite, tiers as asv_tiers
from mlpbench import registry, runner
from mlpbench.ops import _model, gemma_model, llama_model

MODEL_OPS = {"llama_model": llama_model, "gemma_model": gemma_model}
# Each model's MLP kernelized with the other's activation: what the gate must reject.
WRONG_LAYER = {"llama_model": ("GeGLUMLP", "gelu_mul"), "gemma_model": ("SwiGLUMLP", "silu_mul")}
EAGER_VARIANTS = ("eager", "ours", "dualgemm")


def quick_shape(op: str) -> registry.Shape:
    (shape,) = [s for s in registry.OPS[op].shapes if "quick" in s.tiers]
    return shape


def tiny(op: str, dtype: str = "fp32"):
    """The quick shape's causal LM, built as the op builds it, with its model description."""
    import torch

    from mlpbench import workloads

    model = MODEL_OPS[op].MODEL
    torch.manual_seed(0)
    lm = model.classes()[0](model.config_for(quick_shape(op).as_dict()))
    return lm.to(workloads.TORCH_DTYPES[dtype]).eval().requires_grad_(False), model


def ids(op: str):
    import torch

    return torch.randint(0, _model.counts(MODEL_OPS[op].MODEL, quick_shape(op).as_dict())["vocab"],
                         (1, quick_shape(op).as_dict()["t"]), generator=torch.Generator().manual_seed(1))


def test_the_ops_have_the_asked_for_shapes_variants_and_dtypes():
    std = {c.id for c in registry.select("standard", ops=list(MODEL_OPS))}
    variants = ("eager", "compiled", "ours", "dualgemm", "ourscompiled", "dualgemmcompiled")
    for op, prefill, decode in (("llama_model", "t2048-d4096-h14336-l2", "t1-d4096-h14336-l2"),
                                ("gemma_model", "t2048-d3072-h24576-l2", "t1-d3072-h24576-l2")):
        assert registry.OPS[op].variant_names == variants
        assert {f"{op}/{v}/bf16/{s}" for v in variants for s in (prefill, decode)} == {i for i in std if i.startswith(op)}
        quick = {c.id for c in registry.select("quick", ops=[op])}
        assert quick == {f"{op}/{v}/{dt}/{quick_shape(op).id}" for v in EAGER_VARIANTS for dt in ("fp32", "bf16")}
    # ASV classes of the tiers' families, generated from the registry like every op's
    for tier, kinds in (("quick", ("Device", "Host")), ("standard", ("Device", "Host", "Codegen"))):
        classes = asv_suite.classes(tier)
        assert {f"{name}{k}" for name in ("LlamaModel", "GemmaModel") for k in kinds} <= set(classes)


@pytest.mark.parametrize("case", [c for c in registry.select("quick", ops=list(MODEL_OPS))], ids=lambda c: c.id)
def test_quick_cases_pass_the_float64_gate_on_their_logits(case):
    pytest.importorskip("transformers")
    from mlpbench import workloads

    wl = workloads.build(case, "cpu")
    assert wl.tolerance == _model.LOGITS_TOLERANCE[case.dtype]
    assert workloads.check(wl) <= wl.tolerance
    logits = wl.fn(*wl.make_inputs(0))
    assert logits.shape == (1, case.shape.as_dict()["t"], _model.counts(MODEL_OPS[case.op].MODEL, case.shape.as_dict())["vocab"])


@pytest.mark.parametrize("op", MODEL_OPS)
def test_kernelize_replaces_every_mlp_forward_with_our_layer_and_nothing_else(op):
    pytest.importorskip("transformers")
    from mlpbench import sources

    lm, model = tiny(op)
    _, mlp_class = model.classes()
    out = _model.kernelized(lm, model, model.layer, model.repo, "cpu")
    ours = getattr(sources.local_kernel(model.repo).layers, model.layer).forward
    mlps = [m for m in out.modules() if isinstance(m, mlp_class)]
    assert len(mlps) == quick_shape(op).as_dict()["l"]
    assert all(m.forward.__func__ is ours for m in mlps)
    # the norms and the rotary embedding keep their own forward; the original model is untouched
    others = [m for m in out.modules() if not isinstance(m, mlp_class) and "forward" in vars(m)]
    assert [type(m).__name__ for m in others] == []
    assert all(type(m) is mlp_class and "forward" not in vars(m) for m in lm.modules() if isinstance(m, mlp_class))


@pytest.mark.parametrize("op", MODEL_OPS)
def test_the_bf16_bound_lies_between_the_models_own_error_and_a_wrong_activations(op):
    pytest.importorskip("transformers")
    import copy

    import torch

    x = ids(op)
    for dtype in ("fp32", "bf16"):
        lm, model = tiny(op, dtype)
        with torch.no_grad():
            ref = copy.deepcopy(lm).double()(input_ids=x).logits

            def err(m):
                return ((m(input_ids=x).logits.double() - ref).norm() / ref.norm()).item()

            wrong = _model.kernelized(lm, model, *WRONG_LAYER[op], "cpu")
            assert err(lm) <= _model.LOGITS_TOLERANCE[dtype] / 2 < 2 * _model.LOGITS_TOLERANCE[dtype] <= err(wrong)


@pytest.mark.parametrize("op", MODEL_OPS)
def test_kernelized_models_trace_as_one_graph_with_our_op_in_it(op):
    """torch.compile sees each model whole: no graph break, kernelized or not (Dynamo alone, no Inductor)."""
    pytest.importorskip("transformers")
    import torch

    from mlpbench import sources
    from mlpbench.ops._gated import DUAL_GEMM_REPO

    lm, model = tiny(op)
    dual = _model.kernelized(lm, model, model.layer, DUAL_GEMM_REPO, "cpu", for_compile=True)
    sources.local_kernel(DUAL_GEMM_REPO).interleave_gate_up(dual)
    models = {"original": (lm, None), "ours": (_model.kernelized(lm, model, model.layer, model.repo, "cpu", for_compile=True),
                                                model.repo),
              "dualgemm": (dual, DUAL_GEMM_REPO)}
    for name, (m, repo) in models.items():
        torch._dynamo.reset()
        explained = torch._dynamo.explain(m)(input_ids=ids(op), use_cache=False)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), (name, explained.break_reasons)
        targets = [str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"]
        # our kernel's op, one node per layer, in the namespace `kernels` loaded the repository under
        ours = [t for t in targets if repo and t.startswith(sources.local_kernel(repo).__name__ + ".")]
        assert len(ours) == (quick_shape(op).as_dict()["l"] if repo else 0), (name, targets)
    torch._dynamo.reset()


@pytest.mark.slow
def test_one_tiny_kernelized_then_compiled_model_passes_the_float64_gate():
    """The one compiled model case the CPU test command runs (each compile of a model costs seconds
    here): Llama kernelized with our SiLU·mul layer, then torch.compile(fullgraph=True), in fp32."""
    pytest.importorskip("transformers")
    import torch

    from mlpbench import workloads

    case = registry.Case("llama_model", "ourscompiled", "fp32", quick_shape("llama_model"))
    wl = workloads.build(case, "cpu")
    assert workloads.check(wl) <= _model.LOGITS_TOLERANCE["fp32"]
    torch._dynamo.reset()


def test_without_transformers_every_model_case_skips_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # what importing an absent package finds
    cases = [c for c in registry.all_cases() if c.op in MODEL_OPS]
    assert cases
    for device in ("cpu", "cuda"):
        reasons = {runner.skip_reason(c, device) for c in cases}
        assert reasons == {"transformers is not installed (pip install transformers)"}
    quick = registry.select("quick", ops=list(MODEL_OPS))
    assert {asv_tiers.reason_not_here(c, "cpu") for c in quick} == {"transformers is not installed (pip install transformers)"}


def test_the_registry_and_the_op_modules_import_no_transformers():
    code = ("import sys; sys.modules['transformers'] = None; from mlpbench import registry; registry.all_cases(); "
            "from mlpbench.ops import llama_model, gemma_model; "
            "assert not [m for m in sys.modules if m.startswith('transformers.')]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_build_without_transformers_fails_on_the_import():
    code = ("import sys; sys.modules['transformers'] = None; from mlpbench import registry, workloads; "
            "c = registry.select('quick', ops=['llama_model'], variants=['eager'])[0]\n"
            "try:\n    workloads.build(c, 'cpu')\nexcept ImportError as e:\n    print('ImportError', e)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.startswith("ImportError")


def test_the_standard_shapes_are_the_asked_for_model_dims():
    from mlpbench.ops import _model as m

    for op, d, h, heads, kv, head_dim in (("llama_model", 4096, 14336, 32, 8, 128),
                                          ("gemma_model", 3072, 24576, 16, 16, 256)):
        model = MODEL_OPS[op].MODEL
        g = model.geometry_of({"d": d})
        assert (g.heads, g.kv_heads, g.head_dim) == (heads, kv, head_dim)
        assert all(s.as_dict()["l"] == 2 and s.as_dict()["h"] == h for s in registry.OPS[op].shapes if "standard" in s.tiers)
        assert m.counts(model, {"d": d, "h": h})["head"] < m.counts(model, {"d": d, "h": h})["mlp"] * 2 / 10
    assert dict(llama_model.MODEL.config)["rope_theta"] == 500000.0 and dict(llama_model.MODEL.config)["rms_norm_eps"] == 1e-5
    assert dict(gemma_model.MODEL.config)["hidden_act"] == "gelu_pytorch_tanh"


def test_a_workload_with_its_own_tolerance_is_gated_and_recorded_with_it():
    pytest.importorskip("transformers")
    from mlpbench import workloads

    case = registry.select("quick", ops=["gemma_model"], variants=["eager"], dtypes=["bf16"])[0]
    wl = workloads.build(case, "cpu")
    assert workloads.tolerance(wl) == _model.LOGITS_TOLERANCE["bf16"] != workloads.TOLERANCE["bf16"]
    strict = dataclasses.replace(wl, tolerance=1e-6)
    with pytest.raises(workloads.CorrectnessError, match="tolerance 1e-06"):
        workloads.check(strict)
    p = runner.prepare(case, "cpu")
    assert runner.describe(p, "quick").tolerance == _model.LOGITS_TOLERANCE["bf16"]
