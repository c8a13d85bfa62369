"""The benchmark suite as pytest tests: one test per registry case, timed by pytest-benchmark.

Each case is checked against float64 before it is timed (a wrong result fails the test and is never
timed), then its device time (CUDA-graph replay) and peak memory are measured by
`mlpbench.timing`, then host time of calls queued back to back (GPU only), then a profiler pass records the kernels
each call launches (GPU only), then pytest-benchmark times host calls with a synchronising timer.
The record keeps the case's wall time and the part each of these phases took (`runner.Phases`).
On a CPU the case is built and timed with `runner.cpu_threads()` intra-op threads, and the record says how many.
"""

import os
import time

import pytest
import torch

from mlpbench import runner, timing
from mlpbench.pytest_plugin import note_release, selected_cases, selected_tier
from mlpbench.timing import sync_perf_counter


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        cases = selected_cases(metafunc.config)
        metafunc.parametrize("case", cases, ids=[c.id for c in cases])


@pytest.fixture(autouse=True)
def _release_memory(request):
    """After each case, give its GPU memory back: a case that ran out of memory must not take the
    next cases down with it. MLPBENCH_MEMORY_LOG=FILE appends, per case, the GPU memory still
    allocated and reserved after that (to find what holds memory across cases)."""
    before = runner.allocated_bytes()
    yield
    t0 = time.perf_counter()
    runner.release_memory(before)
    note_release(time.perf_counter() - t0)
    log = os.environ.get("MLPBENCH_MEMORY_LOG")
    if log and torch.cuda.is_available() and torch.cuda.is_initialized():
        with open(log, "a") as f:
            f.write(f"{request.node.callspec.id} allocated={torch.cuda.memory_allocated()} "
                    f"reserved={torch.cuda.memory_reserved()}\n")


@pytest.mark.benchmark(timer=sync_perf_counter)
def test_case(benchmark, case, request):
    phases = runner.Phases()
    device = runner.default_device()
    reason = runner.skip_reason(case, device)
    if reason:
        pytest.skip(reason)
    with runner.measuring_threads(device):  # built and timed with the suite's thread count on a CPU
        with phases("check"):
            prepared = runner.prepare(case, device)  # raises CorrectnessError: failed, never timed
        benchmark.group = f"{case.op}/{case.shape.id}/{case.dtype}"
        record = runner.describe(prepared, selected_tier(request.config))
        reason = runner.timing_skip_reason(case, device)
        if reason:
            pytest.skip(reason)
        with phases("device"):
            record.set(**runner.device_metrics(prepared))
        with phases("host"):
            record.set(**runner.back_to_back_metrics(prepared))
        if request.config.getoption("--paired"):
            with phases("check"):  # the eager reference is built and checked like a case
                reference = runner.paired_reference(case, device, len(prepared.input_sets))
            with phases("host"):
                record.set(**runner.paired_metrics(prepared, reference))
            del reference
        with phases("profile"):
            record.set(**runner.structure(prepared, request.config.getoption("--trace-dir")))
        benchmark.extra_info.update(record.extra_info())
        with phases("host"):
            benchmark(prepared.workload.fn, *prepared.input_sets[0])
    if benchmark.stats is not None:  # None under --benchmark-disable: the call ran once, untimed
        stats = benchmark.stats.stats
        # Some of the rounds themselves: the tables' noise test looks for scheduler ticks in them.
        record.set(host_time_s=stats.median, host_time_samples_s=timing.evenly_spaced(stats.data))
    record.set(**phases.fields())
    benchmark.extra_info.update(record.extra_info())
