"""ASV benchmark classes generated from the registry (benchmarks/asv_cases.py assigns them).

Per op, two classes, each parametrised by the stable case ids:

- `<Op>Device` (GPU only): `track_device_time` returns the CUDA-graph-replay samples as
  {"samples": [...], "number": 1}, so ASV keeps them, computes confidence intervals and applies its
  significance test in `asv compare`; `track_peak_memory` in bytes; `track_kernels_per_call`
  (compute kernels one call launches, from a profiler pass), so a lost fusion shows as a step. One `setup_cache` measures
  every case of the op once, because building a case (and compiling it) costs far more than
  measuring it and ASV runs each benchmark in its own process.
- `<Op>Host`: `time_host`, one synchronised call timed by ASV with `timing.sync_perf_counter`.

`CompileTime` runs `compile_probe` for the compiled cases that stand for each op (cold compile,
recompile for a new token count), `CompileTimeDynamic` the MLP's with dynamic=True;
`ChangingShapes` times the MLP over ten token counts in a row, compilation included, for compiled
(static and dynamic), Liger and ours: the blog's closing trade-off.

Cases that cannot run here are skipped with NotImplementedError (ASV's skip), carrying the reason;
a case whose output fails the float64 check raises CorrectnessError and is recorded as failed.
Selection: MLPBENCH_TIER (default standard on a GPU, quick on a CPU) and MLPBENCH_CASES
(comma-separated fnmatch patterns on case ids).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import sys
import time
import types

from . import registry, runner, timing
from .compile_probe import probe

# Bumped with the timing method: ASV then starts a new series instead of comparing across methods.
VERSION = f"mlpbench-device-v{timing.DEVICE_METHOD_VERSION}"


def tier() -> str:
    t = os.environ.get("MLPBENCH_TIER") or ("standard" if runner.default_device() == "cuda" else "quick")
    registry.select(t)  # raises SelectionError naming a bad tier
    return t


def _matches(case_id: str) -> bool:
    """Whether MLPBENCH_CASES (comma-separated fnmatch patterns; empty: all) selects `case_id`."""
    patterns = [p for p in os.environ.get("MLPBENCH_CASES", "").split(",") if p]
    return not patterns or any(fnmatch.fnmatch(case_id, p) for p in patterns)


def _wanted(selected: list[registry.Case]) -> list[registry.Case]:
    return [c for c in selected if _matches(c.id)]


def cases(op: str | None = None) -> list[registry.Case]:
    return _wanted(registry.select(tier(), ops=[op] if op else None))


@functools.cache
def _prepared(case_id: str, input_sets: int | None = None) -> runner.Prepared:
    case = registry.case_by_id(case_id)
    device = runner.default_device()
    reason = runner.skip_reason(case, device) or None
    if reason:
        raise NotImplementedError(reason)
    t0 = time.perf_counter()
    p = runner.prepare(case, device, input_sets)
    # On stderr (asv run --show-stderr): where an ASV run's time goes, case by case.
    print(f"prepared {case_id} in {time.perf_counter() - t0:.2f} s", file=sys.stderr, flush=True)
    reason = runner.timing_skip_reason(case, device)
    if reason:
        raise NotImplementedError(reason)
    return p


def _each(ids: list[str], label: str, measure) -> dict:
    """`measure(id)` for every id, as ASV's setup_cache returns it: a case that cannot run maps to
    {"skip": reason} (it raised NotImplementedError), one that failed to {"error": ...}, and the
    other cases still run. Progress goes to stderr (asv run --show-stderr)."""
    out = {}
    for k, i in enumerate(ids, 1):
        print(f"{label} [{k}/{len(ids)}] {i}", file=sys.stderr, flush=True)
        try:
            out[i] = measure(i)
        except NotImplementedError as exc:
            out[i] = {"skip": str(exc)}
        except Exception as exc:  # noqa: BLE001 - recorded per case; the other cases still run
            out[i] = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            _prepared.cache_clear()  # free each case's GPU memory before the next
            runner.release_memory()
    return out


def measure_device(op: str) -> dict:
    """Device samples, peak memory and launch structure for every case of `op`."""
    def measure(case_id):
        p = _prepared(case_id)
        return runner.device_metrics(p) | runner.structure(p) | {"max_rel_err": p.max_rel_err}

    return _each([c.id for c in cases(op)], op, measure)


def _from_cache(cache: dict, case_id: str) -> dict:
    entry = cache[case_id]
    if "skip" in entry:
        raise NotImplementedError(entry["skip"])
    if "error" in entry:
        raise RuntimeError(entry["error"])
    return entry


def _own_cache_key(setup_cache, owner: str):
    """Give a generated class's setup_cache a cache key of its own.

    ASV keys a setup_cache result by its function's module and first line, and hands one result to
    every class with that key. Functions made by one factory share the line, so in a single `asv run`
    every op's Device class would read the first op's cache (the compile classes did, in a CPU run:
    KeyError on every other class's case ids). Each function gets a module name of its own instead.
    """
    name = f"{__name__}.{owner}"
    sys.modules.setdefault(name, types.ModuleType(name))
    setup_cache.__module__ = name
    return setup_cache


def device_class(op: str) -> type:
    ids = [c.id for c in cases(op)]

    def setup_cache(self):
        return measure_device(op)

    setup_cache.timeout = 3600

    def setup(self, cache, case_id):
        _from_cache(cache, case_id)

    def track_device_time(self, cache, case_id):
        return {"samples": _from_cache(cache, case_id)["device_time_samples_s"], "number": 1}

    track_device_time.unit = "seconds"

    def track_peak_memory(self, cache, case_id):
        return _from_cache(cache, case_id)["peak_memory_bytes"]

    track_peak_memory.unit = "bytes"

    def track_kernels_per_call(self, cache, case_id):
        entry = _from_cache(cache, case_id)
        if "kernels_per_call" not in entry:
            raise RuntimeError(entry.get("profile_error", "no profile recorded"))
        return entry["kernels_per_call"]

    track_kernels_per_call.unit = "kernels"
    return type(f"{camel(op)}Device", (), {
        "params": [ids], "param_names": ["case"], "version": VERSION, "timeout": 600,
        "setup_cache": _own_cache_key(setup_cache, f"{camel(op)}Device"), "setup": setup,
        "track_device_time": track_device_time, "track_peak_memory": track_peak_memory,
        "track_kernels_per_call": track_kernels_per_call,
        "__doc__": f"Device time and peak memory of {op}: {registry.OPS[op]['what']}.",
    })


def host_class(op: str) -> type:
    ids = [c.id for c in cases(op)]

    def setup(self, case_id):
        # Each case runs in a process of its own, where compile caches are warm (setup_cache of the
        # Device class compiled it first), so a pool of compile workers started in every one of
        # them would cost more than the compile it serves. (Each time_host case took ~6 s on the
        # H200, results/asv/h200/78787db7-*.json durations; that pool's start is the suspected
        # part of it, not yet measured.)
        import torch._inductor.config

        torch._inductor.config.compile_threads = 1
        # Cached per process (ASV re-runs setup before every sample); one input set, since host
        # time is per call of the same inputs and the rotation is for device time.
        p = _prepared(case_id, 1)
        self.fn, self.inputs = p.workload.fn, p.input_sets[0]

    def time_host(self, case_id):
        self.fn(*self.inputs)

    return type(f"{camel(op)}Host", (), {
        "params": [ids], "param_names": ["case"], "version": VERSION, "timeout": 600,
        # One call per sample, timed with a synchronisation on each side; the float64 check in
        # setup already warmed up and compiled.
        "timer": staticmethod(timing.sync_perf_counter), "number": 1, "rounds": 1,
        "repeat": (10, 50, 0.5), "warmup_time": 0.05,
        "setup": setup, "time_host": time_host,
        "__doc__": f"Host time per synchronised call of {op}: {registry.OPS[op]['what']}.",
    })


def _skip_in_setup(self, cache, case_id):
    # ASV skips a case only when setup raises NotImplementedError; raised from a benchmark's body it
    # counts as a failure (seen on the H200: results/logs/h200-20261130-mlp/compile-dynamic-fix.log).
    _from_cache(cache, case_id)


def _probe_class(name: str, ids: list[str], label: str, measure, tracks: dict[str, str], doc: str,
                 param_name: str = "case") -> type:
    """An ASV class whose one setup_cache runs `measure` per id (each probe starts fresh processes of
    its own) and whose `track_*` benchmarks read `tracks[benchmark]` (seconds) from the result."""
    def setup_cache(self):
        return _each(ids, label, measure)

    setup_cache.timeout = 3600

    def reader(key):
        def track(self, cache, case_id):
            return _from_cache(cache, case_id)[key]

        track.unit = "seconds"
        return track

    body = {}
    for bench, key in tracks.items():
        body[bench] = reader(key)
        body[bench].__name__ = body[bench].__qualname__ = bench
    return type(name, (), {
        "params": [ids], "param_names": [param_name], "version": VERSION, "timeout": 3600,
        "setup_cache": _own_cache_key(setup_cache, name), "setup": _skip_in_setup, **body, "__doc__": doc,
    })


def compile_class() -> type:
    return _probe_class(
        "CompileTime", [c.id for c in _wanted(registry.compile_probe_cases(tier()))], "compile probe", probe,
        {"track_cold_compile": "cold_compile_s", "track_recompile_new_shape": "recompile_s"},
        "torch.compile's cold compile (empty caches, fresh process) and recompile for a new token count.")


def dynamic_ids() -> list[str]:
    """The compiled cases probed with dynamic=True too: the MLP's, the blog's trade-off."""
    return [c.id for c in _wanted(registry.compile_probe_cases(tier())) if c.op == "mlp"]


def compile_dynamic_class() -> type:
    return _probe_class(
        "CompileTimeDynamic", dynamic_ids(), "compile probe, dynamic=True",
        lambda case_id: probe(case_id, dynamic=True), {"track_recompile_new_shape_dynamic": "recompile_s"},
        "torch.compile(dynamic=True): recompile for a new token count (the MLP only).")


SEQUENCE_VARIANTS = ("compiled", "compiled-dynamic", "liger", "ours")


def sequence_ids() -> list[str]:
    """The MLP over changing token counts, per variant: ids like 'mlp/compiled-dynamic/bf16/d768-h3072'."""
    (base,) = [c for c in registry.compile_probe_cases(tier()) if c.op == "mlp"] or [None]
    if base is None:
        return []
    dims = "-".join(f"{k}{v}" for k, v in base.shape.dims if k != "t")
    return [i for i in (f"mlp/{v}/{base.dtype}/{dims}" for v in SEQUENCE_VARIANTS) if _matches(i)]


def sequence_class() -> type:
    def measure(seq_id):
        (base,) = [c for c in registry.compile_probe_cases(tier()) if c.op == "mlp"]
        variant = seq_id.split("/")[1]
        case = registry.case_by_id(f"mlp/{variant.removesuffix('-dynamic')}/{base.dtype}/{base.shape.id}")
        device = runner.default_device()
        reason = runner.skip_reason(case, device) or runner.timing_skip_reason(case, device)
        if reason:
            raise NotImplementedError(reason)
        return probe(case.id, dynamic=variant.endswith("-dynamic"), sequence=True)

    return _probe_class(
        "ChangingShapes", sequence_ids(), "changing shapes", measure, {"track_total": "total_s"},
        "The MLP over ten token counts in a row, compilation included (compile_probe.TOKEN_SEQUENCE).",
        param_name="sequence")


def camel(op: str) -> str:
    return "".join(part.capitalize() for part in op.split("_"))


def preload() -> None:
    """Import what every case's process would otherwise import again, without touching the GPU.

    On a GPU box ASV forks each benchmark's process from one server process that imported this
    module (launch method forkserver), so modules imported here are already there in every child:
    torch.compile's Dynamo and Inductor alone take seconds to import, and ASV starts one process per
    case for host time. CUDA itself is initialised in the child only, which keeps the fork safe.
    """
    import importlib

    for name in ("torch._dynamo", "torch._inductor.compile_fx", "kernels", "liger_kernel.ops.geglu",
                 "liger_kernel.transformers.geglu"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # an optional package that is missing: its cases say so when they run
    from . import sources

    sources.ours()


def compile_class_names() -> list[str]:
    """The compile-time classes this selection has (they need no GPU to be listed)."""
    return ((["CompileTime"] if _wanted(registry.compile_probe_cases(tier())) else [])
            + (["CompileTimeDynamic"] if dynamic_ids() else [])
            + (["ChangingShapes"] if sequence_ids() else []))


def classes() -> dict[str, type]:
    """Every ASV benchmark class for this machine, by name."""
    if runner.default_device() == "cuda":
        preload()
    out = {}
    for op in registry.OPS:
        if not cases(op):
            continue
        if runner.default_device() == "cuda":
            out[f"{camel(op)}Device"] = device_class(op)
        out[f"{camel(op)}Host"] = host_class(op)
    if _wanted(registry.compile_probe_cases(tier())):
        out["CompileTime"] = compile_class()
    if dynamic_ids():
        out["CompileTimeDynamic"] = compile_dynamic_class()
    if sequence_ids():
        out["ChangingShapes"] = sequence_class()
    return out
