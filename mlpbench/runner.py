"""One case, start to finish: can it run here, build it, check it against float64, then measure it.

The pytest-benchmark suite and the ASV benchmarks both go through these functions, so a case is
prepared, gated and measured the same way whichever runner asked for it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import statistics
import time
from dataclasses import dataclass, field

import torch

from . import registry, timing, workloads
from .envinfo import environment
from .ops import FP8, _fp8
from .ops._fp8 import NO_FP8_PATH
from .record import Record
from .registry import Case, variant_of


_FROZEN = False
# A case may leave this much more GPU memory allocated than it found and still be taken as having given
# its own back: the first GEMM on a stream keeps a cuBLAS workspace, which stays allocated.
RELEASE_SLACK_BYTES = 256 * 2**20


def allocated_bytes() -> int | None:
    """GPU memory allocated now (torch's caching allocator); None without an initialised GPU."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.memory_allocated()
    return None


def release_memory(allocated_before: int | None = None) -> None:
    """Give cached GPU memory back after a case, so one that ran out of memory does not starve the next.

    A full collection first, for tensors held in reference cycles, unless `allocated_before` (what was
    allocated when the case started) shows that reference counting already freed what the case
    allocated, but for RELEASE_SLACK_BYTES: a full collection walks every object of the process
    (torch, Inductor, transformers), a large part of a µs case's wall time, and most cases free their
    tensors without one. Garbage a case leaves under the slack waits for the next collection (the
    interpreter's own, or one a later case needs). The first case is always collected. After the
    first case, what is still alive (torch's, Inductor's and Triton's modules and the caches a first
    case builds) is frozen out of later collections (gc.freeze) for the same reason. Frozen objects are
    still freed when their last reference goes, but one that later becomes garbage inside a reference
    cycle is never collected: at worst, once per process, what its first case left alive. They are
    unfrozen at exit, so the interpreter's last collection frees them: Triton's nanobind bindings would
    otherwise report the Triton objects among them as leaked."""
    import gc

    global _FROZEN
    now = allocated_bytes()
    if allocated_before is None or now is None or now > allocated_before + RELEASE_SLACK_BYTES or not _FROZEN:
        gc.collect()
    if not _FROZEN:
        gc.freeze()
        atexit.register(gc.unfreeze)
        _FROZEN = True
    if now is not None:
        torch.cuda.empty_cache()


def preload(ops=None) -> None:
    """Import what the cases of `ops` (op names; None: every op) would otherwise import in their first
    calls, without touching the GPU: Dynamo, Inductor, `kernels` and each variant's own modules (Liger's,
    transformers').

    Done before the first case, so that no case's wall time holds a package's import, and so that
    what they create is frozen out of the collections after each case (release_memory)."""
    import importlib

    from .registry import OPS

    for name in ("torch._dynamo", "torch._inductor.compile_fx", "kernels"):
        importlib.import_module(name)
    for op in OPS.values() if ops is None else [OPS[name] for name in dict.fromkeys(ops)]:
        for v in op.variants:
            try:
                if v.preload:
                    v.preload()
            except ImportError:
                pass  # an optional package that is missing: its cases say so when they run


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_threads() -> int:
    """The intra-op threads torch measures with on a CPU: one fewer than the cores this process may use."""
    # A core left for the harness and the OS: with a thread on every core, one gets descheduled and
    # each parallel region waits a scheduler tick (milliseconds) for it.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores - 1)


@contextlib.contextmanager
def measuring_threads(device: str):
    """torch's intra-op thread count set to `cpu_threads()` on a CPU (left alone on a GPU), and put
    back afterwards. Hold it over building a case as well as timing it: Inductor compiles the thread
    count of the moment into its C++ kernels."""
    if device != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(cpu_threads())
    try:
        yield
    finally:
        torch.set_num_threads(before)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def skip_reason(case: Case, device: str) -> str | None:
    """Why `case` cannot run at all on `device`, or None when it can (what its variant needs:
    mlpbench/ops/)."""
    v = variant_of(case)
    if case.dtype == FP8:  # what the fp8 dtype needs first (a GPU that runs e4m3 GEMMs), then the variant's path
        reason = _fp8.unsupported_reason(device) or (NO_FP8_PATH if v.fp8 is None else None) \
            or (v.fp8_skip_reason() if v.fp8_skip_reason else None)
        if reason:
            return reason
    reason = v.skip_reason() if v.skip_reason else None
    if reason:
        return reason
    if v.requires and importlib.util.find_spec(v.requires) is None:
        package = v.requires.replace("_", "-")
        return f"{package} is not installed (pip install {package})"
    if device == "cpu" and v.cpu_reason:
        return v.cpu_reason
    if device == "cpu" and v.triton and not interpreting():
        return "Triton kernels run on a CPU only under TRITON_INTERPRET=1, which is not set"
    return None


def timing_skip_reason(case: Case, device: str) -> str | None:
    """Why `case` is checked for correctness but not timed on `device`, or None."""
    if device == "cpu" and variant_of(case).triton:
        return ("correctness checked under TRITON_INTERPRET=1; not timed, because on a CPU the "
                "interpreter's speed says nothing about the kernel")
    return None


# The phases of a case's wall time (record fields, mlpbench/record.py): where the suite's time goes.
PHASES = {"check": "phase_check_s", "device": "phase_device_s", "host": "phase_host_s", "profile": "phase_profile_s"}


@dataclass
class Phases:
    """Wall time of one case, from its start (creating this) to `fields()`, and the part of it each
    phase took; a phase timed twice adds up."""

    start: float = field(default_factory=time.perf_counter)
    spent: dict = field(default_factory=dict)

    @contextlib.contextmanager
    def __call__(self, phase: str):
        if phase not in PHASES:
            raise KeyError(f"{phase!r} is not a phase; phases are {', '.join(PHASES)}")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[phase] = self.spent.get(phase, 0.0) + time.perf_counter() - t0

    def fields(self) -> dict:
        """`wall_s` until now and each phase's seconds (0 for a phase that did not run)."""
        wall = time.perf_counter() - self.start
        return {"wall_s": wall} | {name: self.spent.get(phase, 0.0) for phase, name in PHASES.items()}


@dataclass
class Prepared:
    case: Case
    device: str
    workload: workloads.Workload
    max_rel_err: float
    input_sets: list[tuple]
    codegen: dict | None = None  # what Inductor generated, for compiler variants (mlpbench/compile/codegen.py)


def prepare(case: Case, device: str, input_sets: int | None = None) -> Prepared:
    """Build the case, gate it on the float64 reference (raises CorrectnessError), make inputs.

    The correctness call is the first call, so torch.compile has compiled and autotuned by the time
    this returns: for compiler variants hermetically (empty compiler caches of their own, see
    mlpbench/compile/codegen.py), and what it generated is recorded. `input_sets` defaults to as many as
    device timing needs to keep repeated calls out of L2.
    """
    variant = variant_of(case)
    generated = None
    if variant.compiles:
        from .compile import codegen

        pin, pinned_from = codegen.pins_for(case.id)
        seed = codegen.seed_for(case.id)  # a worker's compile of it, made ahead (mlpbench/compile/precompile.py)
        with codegen.hermetic(pin, seed) as cache:
            before, hits = codegen.snapshot(), codegen.cache_hits()
            wl = workloads.build(case, device)
            err = workloads.check(wl)
            # a worker's folder counts only where the compile read it (a cache hit), not merely when it was there
            seeded = None if seed is None else codegen.cache_hits() > hits
            generated = codegen.record(before, variant.compile_mode, cache, pinned_from, seeded=seeded)
    else:
        wl = workloads.build(case, device)
        err = workloads.check(wl)
    n = input_sets or (timing.input_sets_needed(wl.bytes, device) if device == "cuda" else 1)
    return Prepared(case, device, wl, err, [wl.make_inputs(seed) for seed in range(n)], generated)


def describe(p: Prepared, tier: str | None) -> Record:
    """The fields every result record carries, whatever was measured."""
    c = p.case
    return Record(
        case=c.id, op=c.op, variant=c.variant, dtype=c.dtype, shape=c.shape.as_dict(), shape_id=c.shape.id,
        tier=tier, device=p.device, flops=p.workload.flops, bytes=p.workload.bytes, max_rel_err=p.max_rel_err,
        tolerance=workloads.tolerance(p.workload), source=p.workload.source,
        gpu=environment()["gpu"] if p.device == "cuda" else None,
        box_id=environment()["box_id"],
        threads=torch.get_num_threads(),
        codegen=p.codegen,
        # No Triton kernel (a CPU run: Inductor generated C++), nothing for the gate to compare.
        codegen_fingerprint=p.codegen["fingerprint"] if p.codegen and p.codegen["kernels"] else None,
    ).set(**p.workload.extra)


def device_metrics(p: Prepared) -> dict:
    """Device time samples and peak memory on a GPU; the method names how host time is taken too."""
    host_method = "host: wall time per call, torch.cuda.synchronize() before and after (pytest-benchmark/ASV timer)"
    if p.device != "cuda":
        return {"timing_method": f"host: wall time per call (CPU, intra-op threads: {torch.get_num_threads()}; "
                                 "no device time exists)"}
    dev = timing.device_time(p.workload.fn, p.input_sets)
    return {
        "device_time_s": dev.median_s,
        "device_time_samples_s": dev.samples_s,
        "device_calls_per_replay": dev.calls_per_replay,
        "input_sets": dev.input_sets,
        "timing_method": f"device: {dev.method}; {host_method}",
        "peak_memory_bytes": timing.peak_memory_bytes(p.workload.fn, p.input_sets[0]),
    }


def back_to_back_metrics(p: Prepared) -> dict:
    """Host time per call with calls queued back to back (GPU only: on a CPU nothing overlaps, and
    the synchronised host time already says it). Read by the report's overhead crossover."""
    if p.device != "cuda":
        return {}
    samples = timing.back_to_back_host_times(p.workload.fn, p.input_sets)
    return {"host_time_back_to_back_s": statistics.median(samples),
            "host_time_back_to_back_samples_s": samples,
            "host_time_back_to_back_method": "wall time of calls queued back to back, synchronised before "
                                             "and after each round, / calls per round; one sample per round; "
                                             f"rounds of {timing.BACK_TO_BACK_ROUND_S * 1e3:.0f} ms, "
                                             "at least 10 calls, at most 200"}


def paired_reference(case: Case, device: str, input_sets: int) -> Prepared | None:
    """The case of `case`'s op, dtype and shape in the op's baseline variant (eager, what speedups are
    taken against and where a user starts), built and checked against float64 like any case
    (prepare), with `input_sets` input sets; None on a CPU (no back-to-back host time there), for the
    baseline's case itself, and where the op has no such case."""
    baseline = registry.OPS[case.op].baseline
    if device != "cuda" or case.variant == baseline:
        return None
    try:
        ref = registry.case(case.op, baseline, case.dtype, case.shape.id)
    except registry.SelectionError:
        return None
    return prepare(ref, device, input_sets)


def paired_metrics(p: Prepared, ref: Prepared | None) -> dict:
    """Back-to-back host time of `p` over `ref`'s, their rounds interleaved (timing.paired_back_to_back_
    host_times): the ratio a loop feels, free of the drift in the host's speed between the stretches of
    a process in which two cases are timed apart. {} without a reference."""
    if ref is None:
        return {}
    mine, theirs = timing.paired_back_to_back_host_times(p.workload.fn, p.input_sets, ref.workload.fn,
                                                         ref.input_sets)
    ratios = [a / b for a, b in zip(mine, theirs)]
    return {"host_time_back_to_back_vs_eager": statistics.median(ratios),
            "host_time_back_to_back_vs_eager_samples": ratios,
            "host_time_back_to_back_vs_eager_method": (
                f"{len(ratios)} pairs of back-to-back rounds, this case's and {ref.case.id}'s (built and checked "
                "in this process), the order inside a pair alternating; ratio per pair, median of the pairs")}


def trace_name(case: Case) -> str:
    """A file name for a case's trace: its id with '/' made filesystem-safe."""
    return case.id.replace("/", "__") + ".json"


def structure(p: Prepared, trace_dir=None) -> dict:
    """Kernels per call, their names and device times, from a profiler pass outside any timing.

    A profiler that fails here (no CUPTI, say) must not cost the case its timings: the error is
    recorded instead, and tests/test_expectations.py fails loudly on a GPU.
    """
    if p.device != "cuda":
        return {}
    from pathlib import Path

    from . import expectations, profiling

    try:
        trace = Path(trace_dir) / trace_name(p.case) if trace_dir else None
        prof = profiling.profile_call(p.workload.fn, p.input_sets[0], trace_path=trace)
    except Exception as exc:  # noqa: BLE001 - recorded with the result
        return {"profile_error": f"{type(exc).__name__}: {exc}"}
    c = p.case
    return prof.as_extra() | {
        "structure_problems": expectations.check(c.op, c.variant, c.shape.as_dict(), prof.kernel_names,
                                              prof.kernels_per_call, layout=c.shape.layout, dtype=c.dtype),
    }
