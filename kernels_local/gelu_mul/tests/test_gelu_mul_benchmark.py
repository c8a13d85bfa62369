"""benchmarks/benchmark.py runs under the `kernels benchmark` runner and its workloads verify."""

import sys
from pathlib import Path

from kernels.cli.benchmark import discover_benchmark_classes, run_benchmark_class

REPO = Path(__file__).resolve().parents[1]


def test_every_workload_runs_and_verifies():
    classes = {cls.__name__: cls for cls in discover_benchmark_classes(REPO / "benchmarks" / "benchmark.py", REPO)}
    script = sys.modules[classes["GeluMulForward"].__module__]
    expected = {"GeluMulForward": set(script.WORKLOADS), "GeluMulBackward": set(script.BACKWARD_WORKLOADS)}
    assert set(classes) == set(expected)
    for name, cls in classes.items():
        # One timed iteration each: the runner raises when a workload's verify_* disagrees.
        results, _ = run_benchmark_class(cls, iterations=1, warmup=0, repo_id=str(REPO), is_local=True, revision="")
        assert set(results) == expected[name]
