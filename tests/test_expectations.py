"""Launch-structure expectations: the matching logic on a CPU, the real thing on a GPU."""

import pytest
import torch
from fixture_builders import pytest_record, pytest_run

from mlpbench import expectations, profiling, registry, report, runner

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="kernel launches exist only on a CUDA GPU")

H200_EAGER_MLP = ["nvjet_sm90_tst_128x256", "nvjet_sm90_tst_128x256", "vectorized_elementwise_kernel<gelu>",
                  "vectorized_elementwise_kernel<mul>", "nvjet_sm90_tst_256x128"]


def test_expectations_file_loads_and_names_known_ops_and_variants():
    exps = expectations.load_expectations()
    assert exps
    for e in exps:
        assert e["variant"] in registry.OPS[e["op"]].variant_names
        assert e["why"]


def test_eager_mlp_with_five_kernels_passes():
    assert expectations.check("mlp", "eager", {"t": 8192}, H200_EAGER_MLP, 5, dtype="bf16") == []


def test_a_lost_fusion_is_reported_with_expected_and_seen():
    names = ["nvjet_a", "nvjet_b", "triton_poi_fused_gelu_0", "triton_poi_fused_mul_1", "nvjet_c"]
    problems = expectations.check("mlp", "compiled", {"t": 8192}, names, 5, dtype="bf16")
    assert any("expected 4 kernels per call" in p and "saw 5" in p for p in problems)
    assert any("fused" in p or "gelu" in p for p in problems)


def test_split_k_kernels_are_counted_apart_but_a_sixth_kernel_is_not():
    names = H200_EAGER_MLP + ["void cublasLt::splitKreduce_kernel<32, 16, int, float>"]
    assert expectations.check("mlp", "eager", {"t": 1}, names, 6, dtype="bf16") == []
    extra = H200_EAGER_MLP + ["void at::native::vectorized_elementwise_kernel<8, CopyFunctor>"]
    problems = expectations.check("mlp", "eager", {"t": 1}, extra, 6, dtype="bf16")
    assert problems and "expected 5 kernels per call" in problems[0] and "saw 6" in problems[0]


GEMMS = ["nvjet_sm90_tst_128x256", "nvjet_sm90_tst_128x256", "nvjet_sm90_tst_256x128"]
FUSED = "triton_poi_fused_gelu_mul_0"


def _launches(case, names):
    """A record of `case` whose profiler pass saw `names` once per call."""
    return pytest_record(case, 1e-4, kernel_names=names, kernels_per_call=float(len(names)), memsets_per_call=0.0)


def test_the_newest_record_of_each_case_is_checked_against_the_expectations(tmp_path):
    """The report's structure table: each case's newest record against expectations.toml, with
    the registry's input layout and the record's dtype (an older record was checked against the
    expectations of its own commit: a kernel's policy moves them, as MIN_FUSED_TOKENS did)."""
    older = [_launches("mlp/eager/bf16/t8192-d768-h3072", GEMMS + ["copy_kernel", "gelu", "mul"]),  # a stray copy
             _launches("mlp/compiled/bf16/t8192-d768-h3072", GEMMS + [FUSED])]
    newer = [_launches("mlp/eager/bf16/t8192-d768-h3072", GEMMS + ["gelu", "mul"]),
             _launches("mlp/compiled/bf16/t8192-d768-h3072", GEMMS + ["triton_poi_fused_gelu_0",
                                                                      "triton_poi_fused_mul_1"]),  # lost fusion
             # fp32: split-K kernels are counted apart, and the dual GEMM never fuses
             _launches("mlp/eager/fp32/t8192-d768-h3072", GEMMS + ["void cublasLt::splitKreduce_kernel<32, 16>",
                                                                   "gelu", "mul"]),
             _launches("mlp/dualgemm/bf16/t8192-d768-h3072", ["_gate_up_interleaved_kernel", GEMMS[2]]),
             _launches("mlp/dualgemm/fp32/t8192-d768-h3072", [GEMMS[0], "_act_mul_pairs_kernel", GEMMS[2]]),
             # merged inputs: Liger copies each strided half first
             _launches("gelu_mul/eager/bf16/t8192-h3072-merged", ["gelu", "mul"]),
             _launches("gelu_mul/liger/bf16/t8192-h3072-merged", ["copy", "copy", "_geglu_tanh_forward_kernel"]),
             _launches("gelu_mul/eager/bf16/t8192-h3072", ["gelu", "mul"]),
             _launches("gelu_mul/liger/bf16/t8192-h3072", ["_geglu_tanh_forward_kernel"])]
    pytest_run(tmp_path / "pytest", "h200", "20990101T000000Z", older)
    pytest_run(tmp_path / "pytest", "h200", "20990102T000000Z", newer)
    t = report.structure_table(report.load(tmp_path).records)
    rows = {(r[1], r[2]): r[3:] for r in t.rows if r[0] == "h200"}
    assert len(rows) == len(t.rows)
    assert rows == {
        ("mlp", "eager"): ["5", "1 of 2: fp32 t8192-d768-h3072", "0", "2 of 2"],
        ("mlp", "compiled"): ["5", "0 of 1", "0", "0 of 1"],
        ("mlp", "dualgemm"): ["2–3", "0 of 2", "0", "2 of 2"],
        ("gelu_mul", "eager"): ["2", "0 of 2", "0", "2 of 2"],
        ("gelu_mul", "liger"): ["1–3", "0 of 2", "0", "2 of 2"],
    }, rows


@needs_gpu
@pytest.mark.parametrize("case_id", [
    "linear/eager/bf16/t1024-i32-o64",
    "mlp/eager/bf16/t8192-d768-h3072",
    "mlp/compiled/bf16/t8192-d768-h3072",
    "mlp/liger/bf16/t8192-d768-h3072",
    "mlp/ours/bf16/t8192-d768-h3072",
    "gelu_mul/eager/bf16/t8192-h3072",
    "gelu_mul/compiled/bf16/t8192-h3072",
    "gelu_mul/liger/bf16/t8192-h3072",
    "gelu_mul/ours/bf16/t8192-h3072",
])
def test_the_blogs_expectations_hold_here(case_id):
    case = registry.case_by_id(case_id)
    p = runner.prepare(case, "cuda")
    prof = profiling.profile_call(p.workload.fn, p.input_sets[0])
    problems = expectations.check(case.op, case.variant, case.shape.as_dict(), prof.kernel_names, prof.kernels_per_call,
                               layout=case.shape.layout, dtype=case.dtype)
    assert not problems, "\n".join(problems)
    # one device time per launch, in order, adding up to the by-name figures
    assert len(prof.kernel_times_in_order_s) == len(prof.kernel_names) == prof.kernels_per_call
    assert abs(sum(prof.kernel_times_in_order_s) - sum(prof.kernel_times_s.values())) < 1e-9


def test_dualgemm_expectations_split_where_the_kernel_decides_to_fuse():
    """The expectations' token and dtype split is the kernel's own policy (fused_pays), so a change
    of MIN_FUSED_TOKENS cannot leave them behind."""
    from mlpbench import sources

    kernel = sources.local_kernel("gated_dual_gemm")
    fused = ["_gate_up_interleaved_kernel", "nvjet_sm90_tst_256x128"]
    unfused = ["nvjet_a", "_act_mul_pairs_kernel", "nvjet_c"]
    n = kernel.MIN_FUSED_TOKENS
    for t, dtype in ((n, "bf16"), (8192, "fp16"), (n - 1, "bf16"), (8192, "fp32"), (1, "fp32")):
        torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
        names = fused if kernel.fused_pays(t, torch_dtype) else unfused
        for op in ("mlp", "swiglu_mlp"):
            assert expectations.check(op, "dualgemm", {"t": t}, names, len(names), dtype=dtype) == [], (t, dtype)
            other = unfused if names is fused else fused
            assert expectations.check(op, "dualgemm", {"t": t}, other, len(other), dtype=dtype) != [], (t, dtype)
