"""The compile tax, each figure from a fresh process with empty compiler caches.

    python -m mlpbench.compile_probe CASE_ID [--dynamic]          cold compile and recompile
    python -m mlpbench.compile_probe CASE_ID --sequence [--dynamic] a run over changing token counts

A process of its own, because torch.compile, Inductor and Triton keep in-memory caches that no API
empties completely; `probe()` gives it fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR.

cold_compile_s: wall time of the first call minus a steady-state call (CUDA and cuBLAS are already
initialised by an eager call of the same op). recompile_s: the same for the first call with a new
token count on the already compiled callable: a full recompile with static shapes (the default,
as in the blog), none expected with dynamic=True.

--sequence: the blog's closing trade-off as one number. The callable meets TOKEN_SEQUENCE in
order, a new shape each step, and total_s is the wall time of all steps, compilation included:
static compilation pays a compile per shape, dynamic compilation one or two, Liger and our kernel
none.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Ten token counts an inference server meets in a few seconds: decode, ragged prefills, full batches.
TOKEN_SEQUENCE = (1, 16, 64, 128, 333, 512, 1000, 2048, 4096, 8192)


def _timed(fn, inputs) -> float:
    from .timing import sync_perf_counter

    t0 = sync_perf_counter()
    fn(*inputs)
    return sync_perf_counter() - t0


def _with_tokens(case, tokens: int):
    dims = dict(case.shape.dims)
    dims["t"] = tokens
    return dataclasses.replace(case, shape=dataclasses.replace(case.shape, dims=tuple(dims.items())))


def _baseline(case):
    from .registry import OPS

    return dataclasses.replace(case, variant=OPS[case.op].baseline)


def _inputs_for(case, tokens: int, device: str, seed: int) -> tuple:
    from . import workloads

    return workloads.build(_baseline(_with_tokens(case, tokens)), device).make_inputs(seed)


def _warm_device(case, device: str) -> None:
    from . import workloads

    eager = workloads.build(_baseline(case), device)
    eager.fn(*eager.make_inputs(0))  # CUDA context, cuBLAS handles: not compile time


def _cold_and_recompile(case, device: str, dynamic: bool) -> dict:
    from . import workloads

    wl = workloads.build(case, device, dynamic=dynamic)
    inputs = wl.make_inputs(0)
    first = _timed(wl.fn, inputs)
    steady = statistics.median(_timed(wl.fn, inputs) for _ in range(5))
    tokens = case.shape.as_dict()["t"] + 17  # a token count the compiled graph has not seen
    new_inputs = _inputs_for(case, tokens, device, 1)
    first_new = _timed(wl.fn, new_inputs)
    steady_new = statistics.median(_timed(wl.fn, new_inputs) for _ in range(5))
    return {
        "cold_compile_s": first - steady,
        "recompile_s": first_new - steady_new,
        "steady_call_s": steady,
        "recompile_tokens": tokens,
    }


def _sequence(case, device: str, dynamic: bool, tokens_seq=TOKEN_SEQUENCE) -> dict:
    from . import workloads

    wl = workloads.build(_with_tokens(case, tokens_seq[0]), device, dynamic=dynamic)
    steps = []
    for k, tokens in enumerate(tokens_seq):
        inputs = _inputs_for(case, tokens, device, k)
        steps.append(_timed(wl.fn, inputs))
    return {"tokens": list(tokens_seq), "step_s": steps, "total_s": sum(steps)}


def measure(case_id: str, dynamic: bool = False, sequence: bool = False) -> dict:
    from . import registry
    from .runner import default_device

    case = registry.case_by_id(case_id)
    if not registry.variant_of(case).compiles and not sequence:
        raise SystemExit(f"compile_probe: {case_id!r} is not a compiled case")
    device = default_device()
    _warm_device(case, device)
    result = _sequence(case, device, dynamic) if sequence else _cold_and_recompile(case, device, dynamic)
    return {
        "case": case_id,
        "dynamic": dynamic,
        **result,
        "method": "fresh process, empty TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR; synchronised wall time"
                  + ("" if sequence else "; first call minus steady call"),
    }


def probe(case_id: str, *, dynamic: bool = False, sequence: bool = False, timeout: float = 900) -> dict:
    """Run a probe for `case_id` in a new process with empty compiler caches; return its JSON."""
    args = [case_id] + (["--dynamic"] if dynamic else []) + (["--sequence"] if sequence else [])
    with tempfile.TemporaryDirectory(prefix="mlpbench-compile-") as tmp:
        env = os.environ | {
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(tmp, "triton"),
        }
        proc = subprocess.run([sys.executable, "-m", "mlpbench.compile_probe", *args],
                              env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"compile probe {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    from mlpbench import environment

    environment.prepare()  # inherited from the process that started the probe; a probe run by hand needs it too
    parser = argparse.ArgumentParser(prog="python -m mlpbench.compile_probe")
    parser.add_argument("case_id")
    parser.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True)")
    parser.add_argument("--sequence", action="store_true", help=f"run over token counts {TOKEN_SEQUENCE}")
    a = parser.parse_args()
    print(json.dumps(measure(a.case_id, dynamic=a.dynamic, sequence=a.sequence)))
