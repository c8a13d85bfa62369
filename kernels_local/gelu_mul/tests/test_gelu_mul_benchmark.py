"""benchmarks/benchmark.py runs under the `kernels benchmark` runner and its workloads verify."""

import sys
from pathlib import Path

from kernels.cli.benchmark import discover_benchmark_classes, run_benchmark_class

from mlpbench.sources import kernel_repo

REPO = Path(__file__).resolve().parents[1]
BUILT = kernel_repo(REPO.name)  # build/torch-universal, written from torch-ext/ into mlpbench's cache


def test_every_workload_runs_and_verifies():
    classes = {cls.__name__: cls for cls in discover_benchmark_classes(REPO / "benchmarks" / "benchmark.py", REPO)}
    script = sys.modules[classes["GeluMulForward"].__module__]
    expected = {"GeluMulForward": set(script.WORKLOADS), "GeluMulBackward": set(script.BACKWARD_WORKLOADS)}
    assert set(classes) == set(expected)
    for name, cls in classes.items():
        # One timed iteration each: the runner raises when a workload's verify_* disagrees.
        results, _ = run_benchmark_class(cls, iterations=1, warmup=0, repo_id=str(BUILT), is_local=True, revision="")
        assert set(results) == expected[name]
