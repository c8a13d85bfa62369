"""Cold-compile and recompile time of one compiled case, in a fresh process with empty compiler caches.

    python -m mlpbench.compile_probe CASE_ID      → prints one JSON object

A process of its own, because torch.compile, Inductor and Triton keep in-memory caches that no API
empties completely; empty on-disk caches (fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR) are
set up by `probe()` before it starts the process.

cold_compile_s: wall time of the first call minus a steady-state call (CUDA and cuBLAS are already
initialised by an eager call of the same op). recompile_s: the same for the first call with a new
token count on the already compiled callable (Dynamo recompiles, by default with dynamic shapes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile


def _measure(case_id: str) -> dict:
    from . import registry, workloads
    from .runner import default_device
    from .timing import sync_perf_counter

    case = registry.case_by_id(case_id)
    if case.variant != "compiled":
        raise SystemExit(f"compile_probe: {case_id!r} is not a compiled case")
    device = default_device()
    eager = workloads.build(dataclasses.replace(case, variant="eager"), device)
    eager.fn(*eager.make_inputs(0))  # CUDA context, cuBLAS handles: not compile time

    wl = workloads.build(case, device)
    inputs = wl.make_inputs(0)
    t0 = sync_perf_counter()
    wl.fn(*inputs)
    first = sync_perf_counter() - t0
    steady = statistics.median(_timed(wl.fn, inputs) for _ in range(5))

    dims = case.shape.as_dict()
    dims["t"] = dims["t"] + 17  # a token count the compiled graph has not seen
    other = dataclasses.replace(case, shape=dataclasses.replace(case.shape, dims=tuple(dims.items())))
    new_inputs = workloads.build(dataclasses.replace(other, variant="eager"), device).make_inputs(1)
    t0 = sync_perf_counter()
    wl.fn(*new_inputs)
    first_new = sync_perf_counter() - t0
    steady_new = statistics.median(_timed(wl.fn, new_inputs) for _ in range(5))
    return {
        "case": case_id,
        "cold_compile_s": first - steady,
        "recompile_s": first_new - steady_new,
        "steady_call_s": steady,
        "recompile_tokens": dims["t"],
        "method": "fresh process, empty TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR; first call minus steady call",
    }


def _timed(fn, inputs) -> float:
    from .timing import sync_perf_counter

    t0 = sync_perf_counter()
    fn(*inputs)
    return sync_perf_counter() - t0


def probe(case_id: str, timeout: float = 900) -> dict:
    """Run the probe for `case_id` in a new process with empty compiler caches; return its JSON."""
    with tempfile.TemporaryDirectory(prefix="mlpbench-compile-") as tmp:
        env = os.environ | {
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(tmp, "triton"),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "mlpbench.compile_probe", case_id],
            env=env, capture_output=True, text=True, timeout=timeout,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"compile probe for {case_id} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1])))
