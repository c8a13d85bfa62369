"""Launch-structure expectations: the matching logic on a CPU, the real thing on a GPU."""

import pytest
import torch

from mlpbench import profiling, registry, runner

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="kernel launches exist only on a CUDA GPU")

H200_EAGER_MLP = ["nvjet_sm90_tst_128x256", "nvjet_sm90_tst_128x256", "vectorized_elementwise_kernel<gelu>",
                  "vectorized_elementwise_kernel<mul>", "nvjet_sm90_tst_256x128"]


def test_expectations_file_loads_and_names_known_ops_and_variants():
    exps = profiling.load_expectations()
    assert exps
    for e in exps:
        assert e["variant"] in registry.OPS[e["op"]]["variants"]
        assert e["why"]


def test_eager_mlp_with_five_kernels_passes():
    assert profiling.check("mlp", "eager", {"t": 8192}, H200_EAGER_MLP, 5) == []


def test_a_lost_fusion_is_reported_with_expected_and_seen():
    names = ["nvjet_a", "nvjet_b", "triton_poi_fused_gelu_0", "triton_poi_fused_mul_1", "nvjet_c"]
    problems = profiling.check("mlp", "compiled", {"t": 8192}, names, 5)
    assert any("expected 4 kernels per call" in p and "saw 5" in p for p in problems)
    assert any("fused" in p or "gelu" in p for p in problems)


def test_decode_sizes_are_exempt_from_gemm_counts():
    names = H200_EAGER_MLP + ["splitKreduce_kernel"]
    assert profiling.check("mlp", "eager", {"t": 1}, names, 6) == []
    assert profiling.check("mlp", "eager", {"t": 8192}, names, 6) != []


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
    problems = profiling.check(case.op, case.variant, case.shape.as_dict(), prof.kernel_names, prof.kernels_per_call)
    assert not problems, "\n".join(problems)
