"""Structure of a call as data: which kernels it launches, how long each runs, what the host spends.

A profiler pass runs outside every timed region (after timing, on the same prepared case). It
answers the blog's "guess first, then look": eager MLP launches 5 kernels, compiled 4 with one
fused Triton GeLU·mul kernel, and so on. `expectations.toml` states those guesses; `check` compares.
"""

from __future__ import annotations

import re
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

EXPECTATIONS = Path(__file__).with_name("expectations.toml")
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


def patterns(path: Path = EXPECTATIONS) -> dict[str, str]:
    """expectations.toml's named kernel-name patterns (gemm, split_k, ...)."""
    return tomllib.loads(path.read_text()).get("patterns", {})


def load_expectations(path: Path = EXPECTATIONS) -> list[dict]:
    doc = tomllib.loads(path.read_text())
    patterns = doc.get("patterns", {})
    out = []
    for e in doc["expect"]:
        e = dict(e)
        e["split_k"] = patterns.get("split_k")
        e["match"] = [patterns.get(m, m) for m in e.get("match", [])]
        e["count"] = {patterns.get(k, k): n for k, n in e.get("count", {}).items()}
        out.append(e)
    return out


def applies(expectation: dict, op: str, variant: str, shape: dict, layout: str | None = None,
            dtype: str | None = None) -> bool:
    return (
        expectation["op"] == op
        and expectation["variant"] == variant
        and ("dtypes" not in expectation or dtype in expectation["dtypes"])
        and shape.get("t", 0) >= expectation.get("min_tokens", 0)
        and shape.get("t", 0) < expectation.get("max_tokens", float("inf"))
        and expectation.get("layout") == layout
    )


def check(op: str, variant: str, shape: dict, kernel_names: list[str], kernels_per_call: float,
          expectations: list[dict] | None = None, layout: str | None = None, dtype: str | None = None) -> list[str]:
    """Mismatches between what a call launched and what `expectations.toml` says it should, for
    inputs of `layout` (Shape.layout; None: contiguous) and `dtype` (for expectations that name dtypes)."""
    problems = []
    for e in expectations if expectations is not None else load_expectations():
        if not applies(e, op, variant, shape, layout, dtype):
            continue
        # A GEMM that cuBLAS split along K brings a kernel of its own: counted apart (see the file).
        split = [k for k in kernel_names if e.get("split_k") and re.search(e["split_k"], k)]
        main = [k for k in kernel_names if k not in split]
        launched = kernels_per_call - len(split)
        if launched != e["kernels"]:
            extra = f" (not counting {len(split)} split-K kernels)" if split else ""
            problems.append(f"{op}/{variant}: expected {e['kernels']} kernels per call ({e['why']}), "
                            f"saw {launched:g}{extra}: {kernel_names}")
        for pattern in e["match"]:
            if not any(re.search(pattern, n) for n in main):
                problems.append(f"{op}/{variant}: expected a kernel matching /{pattern}/ ({e['why']}), "
                                f"saw {kernel_names}")
        for pattern, n in e["count"].items():
            seen = sum(bool(re.search(pattern, k)) for k in main)
            if seen != n:
                problems.append(f"{op}/{variant}: expected {n} kernels matching /{pattern}/, saw {seen}: {kernel_names}")
    return problems
