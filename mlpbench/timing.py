"""The one measurement module: device time, host time, peak memory and this machine's ceilings.

Device time is what the GPU spends on a call: CUDA events around CUDA-graph replays of many calls,
so the host's launch path is not in the figure: events around a single call of a few-µs kernel
time mostly the launch, and vary between runs far more than graph replays do. Host time is wall time per call with a
synchronisation on each side, so it includes the CPU dispatch that the blog dissects; it is the
only time that exists on a CPU. Both are kept as samples; medians are derived.

Callers warm up (and compile) before calling anything here: `workloads.check` runs every variant
once, and `device_time` warms up again on its capture stream.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import asdict, dataclass

import torch

# Graph replays are sampled this many times; each replay lasts at least TARGET_REPLAY_S so that the
# ~0.5 µs resolution of CUDA events is far below a sample.
REPLAYS = 20
TARGET_REPLAY_S = 2e-3
MAX_CALLS_PER_REPLAY = 200
# With the working set inside L2 (tens of MB on current GPUs), repeated calls would measure the cache, not
# HBM: rotate among enough input sets to cover twice the L2, up to this many.
MAX_INPUT_SETS = 16
# Bump when the way device time is measured changes. v2: calls per replay sized from a probe graph
# (v1 sized it from eager calls, which gave too few calls, hence noisy samples, for µs kernels).
# v3: replays for WARMUP_S before the timed ones.
DEVICE_METHOD_VERSION = 3
WARMUP_S = 0.05


def sync_perf_counter() -> float:
    """A timer for pytest-benchmark and ASV: waits for queued GPU work, then reads the clock."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


@dataclass
class DeviceTiming:
    samples_s: list[float]  # per-call time of each replay
    calls_per_replay: int
    replays: int
    input_sets: int
    method: str

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    def as_dict(self) -> dict:
        return asdict(self) | {"median_s": self.median_s}


def l2_bytes(device) -> int:
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


def input_sets_needed(bytes_per_call: int, device) -> int:
    """How many distinct input sets keep repeated calls from being served out of L2."""
    if bytes_per_call <= 0:
        return 1
    return max(1, min(MAX_INPUT_SETS, math.ceil(2 * l2_bytes(device) / bytes_per_call)))


def device_time(fn, input_sets: list[tuple], *, replays: int = REPLAYS) -> DeviceTiming:
    """Median-able per-call device time of `fn` from CUDA-graph replays, rotating `input_sets`.

    Falls back to CUDA events around single calls when the call cannot be captured in a graph,
    and says so in `method`.
    """
    n = len(input_sets)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # capture requires a warm-up on a side stream
        for k in range(max(3, n)):
            fn(*input_sets[k % n])
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()

    # Size the replay from a short graph of the same calls: timing eager calls would measure the
    # host's launch path (tens of µs) instead of a 1 µs kernel, and give far too few calls.
    try:
        probe_calls = max(4, n)
        # No warm-up for the probe: it only sizes the timed graph, whose replays are warmed up.
        probe = _capture(fn, input_sets, probe_calls)
        per_call = statistics.median(_replay_samples(probe, 3, warmup_s=0.0)) / probe_calls
        del probe
        calls = max(1, min(MAX_CALLS_PER_REPLAY, math.ceil(TARGET_REPLAY_S / max(per_call, 1e-7))))
        calls = math.ceil(calls / n) * n  # every input set is used equally often
        graph = _capture(fn, input_sets, calls)
    except Exception as exc:  # noqa: BLE001 - any capture failure falls back, recorded in `method`
        torch.cuda.synchronize()
        return _event_time(fn, input_sets, replays, reason=f"{type(exc).__name__}: {exc}")

    samples = [t / calls for t in _replay_samples(graph, replays)]
    del graph
    return DeviceTiming(
        samples, calls, replays, n,
        method=(
            f"cuda-graph-replay/v{DEVICE_METHOD_VERSION}: {calls} calls captured in one CUDA graph, "
            f"{replays} replays timed with CUDA events after {WARMUP_S * 1e3:.0f} ms of warm-up replays, "
            f"sample = replay time / {calls}, "
            f"{n} rotating input set(s)"
        ),
    )


def _capture(fn, input_sets, calls: int) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for k in range(calls):
            fn(*input_sets[k % len(input_sets)])
    return graph


def _replay_samples(graph: torch.cuda.CUDAGraph, replays: int, warmup_s: float = WARMUP_S) -> list[float]:
    """Seconds of each of `replays` back-to-back replays, timed with CUDA events, after `warmup_s` of replays."""
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    # Warm up for WARMUP_S: the first few replays of a graph run slower than the rest, which would
    # widen every interval the gate computes.
    deadline = time.perf_counter() + warmup_s
    while time.perf_counter() < deadline:
        graph.replay()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in events]


def _event_time(fn, input_sets, replays, reason: str) -> DeviceTiming:
    n = len(input_sets)
    samples = []
    for k in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*input_sets[k % n])
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return DeviceTiming(
        samples, 1, replays, n,
        method=f"cuda-events-per-call/v{DEVICE_METHOD_VERSION} (graph capture failed: {reason})",
    )


# Seconds of synchronised single calls per case, in `mlpbench run` (pytest-benchmark's max time, at
# least its 5 rounds) and in ASV's setup_cache (at least 10 calls) alike: their median is listed, not
# gated.
HOST_SAMPLES_S = 0.05


def host_time_samples(fn, inputs: tuple, *, budget_s: float = 0.25, min_samples: int = 5,
                      max_samples: int = 200) -> list[float]:
    """Wall time of single calls, each between two `sync_perf_counter` reads: as many as fit in
    `budget_s` (at least `min_samples`). The ASV suite's host time, taken in the process that already
    compiled and checked the case, so that ASV need not build it again in a process of its own."""
    samples: list[float] = []
    spent = 0.0
    while len(samples) < min_samples or (spent < budget_s and len(samples) < max_samples):
        t0 = sync_perf_counter()
        fn(*inputs)
        samples.append(sync_perf_counter() - t0)
        spent += samples[-1]
    return samples


def evenly_spaced(samples, keep: int = 100) -> list[float]:
    """At most `keep` of `samples`, evenly spaced and in order: what a record keeps of pytest-benchmark's
    rounds, which number in the thousands for a µs call."""
    n = len(samples)
    return [float(x) for x in samples] if n <= keep else [float(samples[k * n // keep]) for k in range(keep)]


# Seconds of one round of back-to-back calls (at least ten calls, at most 200). The spread between rounds
# comes from the box, not from the round's length, so a round long enough for ten calls of the slowest
# case serves.
BACK_TO_BACK_ROUND_S = 0.02


def back_to_back_host_times(fn, input_sets: list[tuple], *, rounds: int = 5, round_s: float = BACK_TO_BACK_ROUND_S,
                            max_calls: int = 200) -> list[float]:
    """Wall time per call over calls queued back to back, one synchronisation before and after each
    round (seconds per call, one sample per round), rotating `input_sets`.

    This is the host figure of a serving loop: the CPU dispatches the next call while the GPU runs
    the last, so a call costs its CPU dispatch where that is the longer part and its device time
    where the GPU is. A synchronised single call (`sync_perf_counter`) instead adds the dispatch of
    its first kernel and the synchronisation to the device time, figures that scatter too much
    between cases of one size to say where compiling starts to pay.
    """
    sync = _sync()
    calls = _calls_per_round(fn, input_sets, round_s, max_calls, sync)
    return [_round(fn, input_sets, calls, sync) for _ in range(rounds)]


def paired_back_to_back_host_times(fn, input_sets: list[tuple], ref_fn, ref_input_sets: list[tuple], *,
                                   rounds: int = 5, round_s: float = BACK_TO_BACK_ROUND_S,
                                   max_calls: int = 200) -> tuple[list[float], list[float]]:
    """Back-to-back host time of `fn` and of a reference `ref_fn` (seconds per call, one sample per
    round each), their rounds interleaved in pairs whose order alternates: fn then ref, ref then fn, ...

    A process's host speed drifts over seconds (clocks, other tenants of the box), by more than two
    implementations of one step differ, while the rounds of one stretch agree. Rounds of the two taken
    side by side see the same host, so the ratio of a pair is what one costs against the other at that
    moment; alternating the order inside the pairs keeps a steady drift from favouring either side.
    """
    sync = _sync()
    calls = _calls_per_round(fn, input_sets, round_s, max_calls, sync)
    ref_calls = _calls_per_round(ref_fn, ref_input_sets, round_s, max_calls, sync)
    mine, ref = [], []
    for k in range(rounds):
        if k % 2:
            ref.append(_round(ref_fn, ref_input_sets, ref_calls, sync))
        mine.append(_round(fn, input_sets, calls, sync))
        if not k % 2:
            ref.append(_round(ref_fn, ref_input_sets, ref_calls, sync))
    return mine, ref


def _sync():
    return torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else (lambda: None)


def _calls_per_round(fn, input_sets, round_s, max_calls, sync) -> int:
    sync()
    t0 = time.perf_counter()
    fn(*input_sets[0])
    sync()
    one = time.perf_counter() - t0
    return max(10, min(max_calls, int(round_s / max(one, 1e-7))))


def _round(fn, input_sets, calls: int, sync) -> float:
    n = len(input_sets)
    sync()
    t0 = time.perf_counter()
    for k in range(calls):
        fn(*input_sets[k % n])
    sync()
    return (time.perf_counter() - t0) / calls


def peak_memory_bytes(fn, inputs: tuple) -> int | None:
    """Bytes the call allocates at its peak above what was allocated before it (CUDA only)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn(*inputs)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return int(peak)


_CEILINGS: dict | None = None
# Bump when a ceiling is measured differently. v2: the copy ceiling is the best of three methods
# (mlpbench/bandwidth.py); v1 (no field) was copy_ alone, which our GeLU·mul beat by 1–2%.
CEILINGS_VERSION = 2


def memory_ceiling(numel: int = 2**30 // 4, device: str = "cuda") -> dict:
    """The copy ceiling as the best of bandwidth.probes, each method's figure kept, and the
    vendor's figure beside it. Eager calls between events, not graph replay: captured into a CUDA
    graph, copy_ becomes a memcpy node served by the copy engines, which move less than elementwise
    kernels do."""
    from . import bandwidth

    rates = {}
    for name, fn, nbytes in bandwidth.probes(numel, device):
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            fn()
            start.record()
            for _ in range(10):
                fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / 10)
        rates[name] = nbytes / statistics.median(times)
    best = max(rates, key=rates.get)
    torch.cuda.empty_cache()
    return {"copy_bandwidth_Bps": rates[best], "copy_method": best, "copy_methods_Bps": rates,
            "vendor_bandwidth_Bps": bandwidth.vendor_bandwidth(torch.cuda.get_device_name()),
            "ceilings_version": CEILINGS_VERSION}


def fp8_gemm_ceiling(gen: torch.Generator, m: int = 8192) -> dict:
    """The fp8 GEMM rate, `gemm_fp8_flops`: an m³ torch._scaled_mm of e4m3 operands made from random
    data, row-wise float32 scales (scale_a [m, 1], scale_b [1, m]), bf16 out, as the fp8 cases call it.
    {} where this GPU does not run fp8 (mlpbench/ops/_fp8.py), and `gemm_fp8_error` where it
    failed: a failure here must not cost a run its other rates."""
    from .ops import _fp8

    if _fp8.unsupported_reason("cuda"):
        return {}
    try:
        a = torch.randn(m, m, device="cuda", generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(m, m, device="cuda", generator=gen).to(torch.float8_e4m3fn)  # [n, k], row-major
        sa = torch.rand(m, 1, device="cuda", generator=gen).add_(0.5)
        sb = torch.rand(m, device="cuda", generator=gen).add_(0.5)
        t = device_time(lambda: _fp8.scaled_mm(a, sa, b, sb), [()], replays=5)
        del a, b, sa, sb
        return {"gemm_fp8_flops": 2 * m**3 / t.median_s}
    except Exception as exc:  # noqa: BLE001 - recorded instead of the rate
        with contextlib.suppress(Exception):  # a failed kernel can leave an error that synchronize raises again
            torch.cuda.synchronize()
        return {"gemm_fp8_error": f"{type(exc).__name__}: {exc}"}


def ceilings() -> dict:
    """This GPU's copy bandwidth and large-GEMM rate per dtype, measured once per process (fp8's
    only where the GPU runs it: fp8_gemm_ceiling).

    Copy: the best of three ways to stream 1 GiB buffers (memory_ceiling), bytes read plus written. GEMM: 8192³ on random data
    (a GEMM of zeros draws less power, so runs faster, and would flatter every fraction computed
    against it).
    Empty on a CPU.
    """
    global _CEILINGS
    if _CEILINGS is not None:
        return _CEILINGS
    if not torch.cuda.is_available():
        _CEILINGS = {}
        return _CEILINGS
    out: dict = {}
    out.update(memory_ceiling())
    # A generator of its own: the default CUDA generator is left unusable by a capture that failed.
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        m = 8192
        a = torch.randn(m, m, device="cuda", dtype=dt, generator=gen)
        b = torch.randn(m, m, device="cuda", dtype=dt, generator=gen)
        t = device_time(lambda: torch.mm(a, b), [()], replays=5)
        out[f"gemm_{name}_flops"] = 2 * m**3 / t.median_s
        del a, b
    out.update(fp8_gemm_ceiling(gen))
    out["method"] = ("copy: the best of copy_, a streaming Triton copy and a Triton 2-reads-1-write kernel on "
                     "1 GiB float32 buffers, (read+write bytes)/time, events around 10 eager calls, median of 5 "
                     "(winner in copy_method); gemm: 8192³ torch.mm on randn by cuda-graph replay; gemm_fp8: "
                     "8192³ torch._scaled_mm of e4m3 randn with row-wise float32 scales, bf16 out, by cuda-graph "
                     "replay, where the GPU runs fp8")
    torch.cuda.empty_cache()
    _CEILINGS = out
    return out
