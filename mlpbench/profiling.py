"""Structure of a call as data: which kernels it launches, how long each runs, what the host spends.

A profiler pass runs outside every timed region (after timing, on the same prepared case). It
answers the blog's "guess first, then look": eager MLP launches 5 kernels, compiled 4 with one
fused Triton GeLU·mul kernel, and so on. `expectations.toml` states those guesses;
mlpbench/expectations.py compares.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# Device activity that is not a compute kernel: counted apart, as the blog's traces show them apart.
_MEMSET = re.compile(r"^memset", re.I)
_MEMCPY = re.compile(r"^memcpy", re.I)


@dataclass
class Profile:
    kernels_per_call: float
    kernel_names: list[str]  # one call's compute kernels, in launch order
    memsets_per_call: float
    kernel_times_s: dict[str, float]  # device seconds per call, by kernel name
    # Device seconds per call of each kernel in launch order, aligned with kernel_names: the MLP's
    # gate and up GEMMs often share a kernel name, and by name their times would be one figure.
    # None when the calls did not all launch the same sequence.
    kernel_times_in_order_s: list[float] | None
    profiled_host_time_per_call_s: float  # wall time per call under the profiler (inflated by it)

    def as_extra(self) -> dict:
        return asdict(self)


def _split(names: list[str]) -> tuple[list[str], int, int]:
    compute = [n for n in names if not (_MEMSET.match(n) or _MEMCPY.match(n))]
    return compute, sum(bool(_MEMSET.match(n)) for n in names), sum(bool(_MEMCPY.match(n)) for n in names)


def profile_call(fn, inputs: tuple, *, calls: int = 5, trace_path: Path | None = None) -> Profile:
    """Profile `calls` back-to-back calls of a warmed-up `fn` on the GPU."""
    import torch  # here, not at import: the report reads expectations without torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    if trace_path is not None:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
    device = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    compute, memsets, _ = _split([e.name for e in device])
    events = [e for e in device if e.name in compute]
    times: dict[str, float] = {}
    for e in events:
        times[e.name] = times.get(e.name, 0.0) + e.device_time_total * 1e-6 / calls
    per_call = len(compute) / calls
    n = round(per_call)
    in_order = None
    if n and len(compute) == n * calls and all(compute[k] == compute[k % n] for k in range(len(compute))):
        in_order = [sum(e.device_time_total for e in events[i::n]) * 1e-6 / calls for i in range(n)]
    return Profile(
        kernels_per_call=per_call,
        kernel_names=compute[:n],
        memsets_per_call=memsets / calls,
        kernel_times_s=times,
        kernel_times_in_order_s=in_order,
        profiled_host_time_per_call_s=wall / calls,
    )
