"""Launch-structure expectations: the matching logic on a CPU, the real thing on a GPU."""

import pytest
import torch

from mlpbench import expectations, profiling, registry, runner

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
    assert expectations.check("mlp", "eager", {"t": 8192}, H200_EAGER_MLP, 5) == []


def test_a_lost_fusion_is_reported_with_expected_and_seen():
    names = ["nvjet_a", "nvjet_b", "triton_poi_fused_gelu_0", "triton_poi_fused_mul_1", "nvjet_c"]
    problems = expectations.check("mlp", "compiled", {"t": 8192}, names, 5)
    assert any("expected 4 kernels per call" in p and "saw 5" in p for p in problems)
    assert any("fused" in p or "gelu" in p for p in problems)


def test_split_k_kernels_are_counted_apart_but_a_sixth_kernel_is_not():
    names = H200_EAGER_MLP + ["void cublasLt::splitKreduce_kernel<32, 16, int, float>"]
    assert expectations.check("mlp", "eager", {"t": 1}, names, 6) == []
    extra = H200_EAGER_MLP + ["void at::native::vectorized_elementwise_kernel<8, CopyFunctor>"]
    problems = expectations.check("mlp", "eager", {"t": 1}, extra, 6)
    assert problems and "expected 5 kernels per call" in problems[0] and "saw 6" in problems[0]


def test_the_committed_h200_standard_tier_meets_the_expectations(committed_results):
    """The newest committed H200 record of every standard-tier case, checked against expectations.toml
    (an older record was checked against the expectations of its own commit: a kernel's policy moves
    them, as MIN_FUSED_TOKENS did)."""
    import json

    newest = {b["extra_info"]["case"]: b["extra_info"]
              for path in sorted((committed_results / "pytest" / "h200").glob("*-standard-*[0-9].json"))
              for b in json.loads(path.read_text())["benchmarks"]}  # file names start with their UTC time
    records = list(newest.values())
    assert all("kernels_per_call" in r for r in records)
    # every case of today's standard tier has a committed H200 record
    assert {c.id for c in registry.select("standard")} <= {r["case"] for r in records}
    def layout(r):
        found = registry.shape_of(r["op"], r["shape_id"])
        return found.layout if found else None

    problems = [p for r in records for p in expectations.check(r["op"], r["variant"], r["shape"], r["kernel_names"],
                                                            r["kernels_per_call"], layout=layout(r),
                                                            dtype=r["dtype"])]
    assert problems == []


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
