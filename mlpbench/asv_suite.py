"""ASV's view of the suite: the same benchmark classes and parameters on every machine.

The benchmarks come in three families, one module each under benchmarks/, so that ASV's own
`--bench` picks a tier: `quick` (CPU-sized shapes), `standard` (the nightly set: GPU-sized shapes
and the small shapes every tier shares) and `large` (the shapes only the full tier adds). The full
tier is all three.

Per family and op, two classes whose parameters are the axes variant × dtype × shape, so ASV's
report offers each axis as a selector and draws one line per chosen combination:

- `<Op>Device`: `track_device_time` (CUDA-graph-replay samples, returned as {"samples", "number"} so
  ASV computes confidence intervals and `asv compare` tests significance), `track_peak_memory`
  (bytes) and `track_kernels_per_call` (compute kernels one call launches, from a profiler pass);
- `<Op>Host`: `track_host_time`, samples of single calls with a synchronisation on each side.

Both read one `setup_cache`, which builds, float64-checks and measures every case of the op in the
family once, in one process: building and compiling a case costs far more than measuring it, and
ASV starts a process for every parameter combination of every benchmark. Narrowing a run with
`--bench` narrows what is recorded; the cache still measures the whole op of that family.

`compile_probe` gives each family that has compiled cases `CompileTime` (cold compile, recompile for
a new token count), `CompileTimeDynamic` (the MLP with dynamic=True) and `ChangingShapes` (the MLP
over ten token counts in a row, compilation included, for compiled, Liger and ours).

Nothing here depends on the machine or on environment variables: a combination that cannot run
here raises NotImplementedError in `setup` with the reason (ASV's skip): one that is not a case
(fp32 at a shape measured in half precision only), a GPU-sized shape on a CPU, device figures
without a GPU, a Triton kernel on a CPU. A case whose output fails the float64 check raises
CorrectnessError in the cache and is recorded as failed.
"""

from __future__ import annotations

import functools
import sys
import time
import types

from . import registry, runner, timing
from .compile_probe import probe

# Bump when what a benchmark measures changes, so ASV starts a new series instead of drawing a step.
# v4: parameters became variant × dtype × shape (they were one case id), and host time became
# samples taken in the measuring process (`track_host_time`, was ASV's own `time_host`).
VERSION = f"mlpbench-v4-device-v{timing.DEVICE_METHOD_VERSION}"

# Family → the registry shape tiers it holds. Every shape belongs to exactly one family.
FAMILIES = {"quick": ("quick",), "standard": ("standard", registry.EVERY_TIER), "large": ("full",)}
# Shapes small enough to measure on a CPU.
CPU_SIZED = ("quick", registry.EVERY_TIER)
# The dtype of each family's compile probes: fp32 where they also run on a CPU, bf16 on a GPU.
PROBE_DTYPE = {"quick": "fp32", "standard": "bf16"}


def family_of(shape: registry.Shape) -> str:
    (family,) = [f for f, tiers in FAMILIES.items() if shape.tier in tiers]
    return family


def shapes(family: str, op: str) -> list[registry.Shape]:
    return [s for s in registry.SHAPES if s.op == op and family_of(s) == family]


def cases(family: str, op: str) -> list[registry.Case]:
    return [c for c in registry.all_cases() if c.op == op and family_of(c.shape) == family]


def reason_not_here(case: registry.Case, device: str) -> str | None:
    """Why `case` is not measured on `device` at all, or None."""
    if device == "cpu" and case.shape.tier not in CPU_SIZED:
        return (f"shape {case.shape.id} is GPU-sized (tier {case.shape.tiers[0]}): measured on a GPU only; "
                "on a CPU it would take minutes and say nothing about GPUs")
    return runner.skip_reason(case, device)


def _leave_a_core_for_asv() -> None:
    """On a CPU, measure with one thread fewer than there are cores.

    ASV's fork server polls for its child every millisecond while the child measures. With as many
    OpenMP threads as cores, each parallel region then waited for a descheduled thread: the eager
    MLP at t64-d128-h512 (fp32) took 60 ms per call on a 2-core box, against 0.28 ms in a process
    of its own. One core left free takes the server's wake-ups.
    """
    import os

    import torch

    if runner.default_device() == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))


def _each(ids: list[str], label: str, measure) -> dict:
    """`measure(id)` for every id, as a setup_cache returns it: a case that cannot run maps to
    {"skip": reason} (it raised NotImplementedError), one that failed to {"error": ...}, and the
    other cases still run. Progress goes to stderr (`asv run --show-stderr`)."""
    out = {}
    for k, i in enumerate(ids, 1):
        t0 = time.perf_counter()
        try:
            out[i] = measure(i)
            what = "measured"
        except NotImplementedError as exc:
            out[i] = {"skip": str(exc)}
            what = f"skipped ({exc})"
        except Exception as exc:  # noqa: BLE001 - recorded per case; the other cases still run
            out[i] = {"error": f"{type(exc).__name__}: {exc}"}
            what = f"FAILED ({out[i]['error']})"
        finally:
            runner.release_memory()  # free each case's GPU memory before the next
        print(f"[{label} {k}/{len(ids)}] {i}: {what}, {time.perf_counter() - t0:.2f} s",
              file=sys.stderr, flush=True)
    return out


def measure_case(case_id: str) -> dict:
    """Everything the op classes report for one case, after its float64 check."""
    case = registry.case_by_id(case_id)
    device = runner.default_device()
    reason = reason_not_here(case, device)
    if reason:
        raise NotImplementedError(reason)
    p = runner.prepare(case, device)  # raises CorrectnessError: recorded as failed, never timed
    reason = runner.timing_skip_reason(case, device)
    if reason:
        raise NotImplementedError(reason)
    out = runner.device_metrics(p) | runner.structure(p)
    # A tenth of a second of single calls (at least ten): host time is reported, not gated, on a GPU,
    # and a nightly of ~180 cases must leave time for the compile benchmarks.
    out["host_time_samples_s"] = timing.host_time_samples(p.workload.fn, p.input_sets[0], budget_s=0.1,
                                                          min_samples=10)
    return out


def _entry(cache: dict, case_id: str) -> dict:
    if case_id not in cache:
        raise NotImplementedError(f"{case_id} is not a case of the registry")
    entry = cache[case_id]
    if "skip" in entry:
        raise NotImplementedError(entry["skip"])
    if "error" in entry:
        raise RuntimeError(entry["error"])
    return entry


def _not_a_case(op: str, variant: str, dtype: str, shape_id: str) -> str:
    (shape,) = [s for s in registry.SHAPES if s.op == op and s.id == shape_id]
    return f"{op}/{variant}/{dtype}/{shape_id} is not a case: shape {shape_id} is measured in {', '.join(shape.dtypes)} only"


def _own_cache_key(setup_cache, owner: str):
    """Give a generated setup_cache a cache key of its own.

    ASV keys a setup_cache result by its function's module and first line, and hands one result to
    every class with that key. Functions made by one factory share the line, so every family's and
    op's classes would read the first one's cache. Each function gets a module name of its own; the
    Device and Host classes of one family and op share the function, hence one measurement.
    """
    name = f"{__name__}.{owner}"
    sys.modules.setdefault(name, types.ModuleType(name))
    setup_cache.__module__ = name
    return setup_cache


def op_classes(family: str, op: str) -> dict[str, type]:
    ids = {c.id for c in cases(family, op)}
    params = [list(registry.OPS[op]["variants"]), list(registry.DTYPES), [s.id for s in shapes(family, op)]]

    def setup_cache(self):
        # Runs in a process of ASV's own, so changing its thread count touches nothing else.
        _leave_a_core_for_asv()
        return _each([c.id for c in cases(family, op)], f"{family}.{op}", measure_case)

    setup_cache.timeout = 3600
    setup_cache = _own_cache_key(setup_cache, f"{family}.{registry.class_name(op)}")

    def entry(cache, variant, dtype, shape):
        case_id = f"{op}/{variant}/{dtype}/{shape}"
        if case_id not in ids:
            raise NotImplementedError(_not_a_case(op, variant, dtype, shape))
        return _entry(cache, case_id)

    def device_setup(self, cache, variant, dtype, shape):
        self.entry = entry(cache, variant, dtype, shape)
        if "device_time_samples_s" not in self.entry:
            raise NotImplementedError("no GPU here: device time, peak memory and kernels per call need CUDA "
                                      f"(host time is in {registry.class_name(op)}Host)")

    def track_device_time(self, cache, variant, dtype, shape):
        return {"samples": self.entry["device_time_samples_s"], "number": 1}

    track_device_time.unit = "seconds"

    def track_peak_memory(self, cache, variant, dtype, shape):
        return self.entry["peak_memory_bytes"]

    track_peak_memory.unit = "bytes"

    def track_kernels_per_call(self, cache, variant, dtype, shape):
        if "kernels_per_call" not in self.entry:
            raise RuntimeError(self.entry.get("profile_error", "no profile recorded"))
        return self.entry["kernels_per_call"]

    track_kernels_per_call.unit = "kernels"

    def host_setup(self, cache, variant, dtype, shape):
        self.entry = entry(cache, variant, dtype, shape)

    def track_host_time(self, cache, variant, dtype, shape):
        return {"samples": self.entry["host_time_samples_s"], "number": 1}

    track_host_time.unit = "seconds"

    common = {"params": params, "param_names": ["variant", "dtype", "shape"], "version": VERSION,
              "timeout": 600, "setup_cache": setup_cache}
    what = registry.OPS[op]["what"]
    return {
        f"{registry.class_name(op)}Device": type(f"{registry.class_name(op)}Device", (), {
            **common, "setup": device_setup, "track_device_time": track_device_time,
            "track_peak_memory": track_peak_memory, "track_kernels_per_call": track_kernels_per_call,
            "__doc__": f"Device time, peak memory and kernels per call of {op} ({family} shapes): {what}.",
        }),
        f"{registry.class_name(op)}Host": type(f"{registry.class_name(op)}Host", (), {
            **common, "setup": host_setup, "track_host_time": track_host_time,
            "__doc__": f"Host time per synchronised call of {op} ({family} shapes): {what}.",
        }),
    }


def probe_cases(family: str) -> list[registry.Case]:
    """The compiled cases whose compile time stands for each op of the family: its first shape, in
    fp32 for quick shapes (they run on a CPU too) and bf16 for GPU ones. Cold compiles cost seconds
    to minutes each, so one case per op."""
    if family not in PROBE_DTYPE:
        return []
    out = []
    for op in registry.OPS:
        hits = [c for c in cases(family, op) if c.variant == "compiled" and c.dtype == PROBE_DTYPE[family]]
        out += hits[:1]
    return out


def _probe_here(case: registry.Case) -> None:
    reason = reason_not_here(case, runner.default_device()) or runner.timing_skip_reason(case, runner.default_device())
    if reason:
        raise NotImplementedError(reason)


def _skip_in_setup(self, cache, param):
    # ASV skips a case only when setup raises NotImplementedError; raised from a benchmark's body it
    # counts as a failure (seen on the H200: results/logs/h200-20261130-mlp/compile-dynamic-fix.log).
    _entry(cache, param)


def _probe_class(name: str, family: str, ids: list[str], measure, tracks: dict[str, str], doc: str,
                 param_name: str = "case") -> type:
    """An ASV class whose one setup_cache runs `measure` per id (each probe starts fresh processes of
    its own) and whose `track_*` benchmarks read `tracks[benchmark]` (seconds) from the result."""
    def setup_cache(self):
        return _each(ids, f"{family}.{name}", measure)

    setup_cache.timeout = 3600

    def reader(key):
        def track(self, cache, param):
            return _entry(cache, param)[key]

        track.unit = "seconds"
        return track

    body = {}
    for bench, key in tracks.items():
        body[bench] = reader(key)
        body[bench].__name__ = body[bench].__qualname__ = bench
    return type(name, (), {
        "params": [ids], "param_names": [param_name], "version": VERSION, "timeout": 3600,
        "setup_cache": _own_cache_key(setup_cache, f"{family}.{name}"), "setup": _skip_in_setup, **body,
        "__doc__": doc,
    })


def _probe(case_id: str, **kw) -> dict:
    _probe_here(registry.case_by_id(case_id))
    return probe(case_id, **kw)


SEQUENCE_VARIANTS = ("compiled", "compiled-dynamic", "liger", "ours")


def sequence_ids(family: str) -> list[str]:
    """The MLP over changing token counts, per variant: ids like 'mlp/compiled-dynamic/bf16/d768-h3072'."""
    base = [c for c in probe_cases(family) if c.op == "mlp"]
    if not base:
        return []
    dims = "-".join(f"{k}{v}" for k, v in base[0].shape.dims if k != "t")
    return [f"mlp/{v}/{base[0].dtype}/{dims}" for v in SEQUENCE_VARIANTS]


def compile_classes(family: str) -> dict[str, type]:
    probes = probe_cases(family)
    if not probes:
        return {}
    (mlp,) = [c for c in probes if c.op == "mlp"]

    def sequence(seq_id):
        variant = seq_id.split("/")[1]
        case = registry.case_by_id(f"mlp/{variant.removesuffix('-dynamic')}/{mlp.dtype}/{mlp.shape.id}")
        _probe_here(case)
        return probe(case.id, dynamic=variant.endswith("-dynamic"), sequence=True)

    return {
        "CompileTime": _probe_class(
            "CompileTime", family, [c.id for c in probes], _probe,
            {"track_cold_compile": "cold_compile_s", "track_recompile_new_shape": "recompile_s"},
            "torch.compile's cold compile (empty caches, fresh process) and recompile for a new token count."),
        "CompileTimeDynamic": _probe_class(
            "CompileTimeDynamic", family, [mlp.id], functools.partial(_probe, dynamic=True),
            {"track_recompile_new_shape_dynamic": "recompile_s"},
            "torch.compile(dynamic=True): recompile for a new token count (the MLP only)."),
        "ChangingShapes": _probe_class(
            "ChangingShapes", family, sequence_ids(family), sequence, {"track_total": "total_s"},
            "The MLP over ten token counts in a row, compilation included (compile_probe.TOKEN_SEQUENCE).",
            param_name="sequence"),
    }


def preload() -> None:
    """Import what every benchmark's process would otherwise import again, without touching the GPU.

    ASV (launch_method forkserver, asv.conf.json) forks each benchmark's process from one server
    that imported the benchmark modules, so modules imported here are already there in every child:
    torch.compile's Dynamo and Inductor alone take seconds to import, and ASV starts a process per
    parameter combination. CUDA is initialised in the children only, which keeps the fork safe.
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
    # Objects that exist now are never collected in the forked children: freezing them keeps the
    # collector from touching (and so copying) their pages in every child.
    import gc

    gc.freeze()


def family(name: str) -> dict[str, type]:
    """Every ASV benchmark class of a family, by class name: the same on every machine."""
    if name not in FAMILIES:
        raise registry.SelectionError(f"unknown benchmark family {name!r}; valid: {', '.join(FAMILIES)}")
    if runner.default_device() == "cuda":
        preload()
    out = {}
    for op in registry.OPS:
        if shapes(name, op):
            out |= op_classes(name, op)
    return out | compile_classes(name)


def tier_regex(tier: str) -> str:
    """An `asv run --bench` expression selecting the registry tier `tier` (ASV matches it against
    'family.Class.benchmark(param, ...)'): standard is the standard family, full adds the large one,
    quick is the quick family and the standard family's shapes that every tier shares."""
    registry.select(tier)  # raises SelectionError naming a bad tier
    if tier == "quick":
        shared = "|".join(s.id for s in registry.SHAPES if s.tier == registry.EVERY_TIER)
        return rf"^quick\.|^standard\.\w+(Device|Host)\.\w+\(.*'({shared})'\)$"
    return r"^standard\." if tier == "standard" else r"^(standard|large)\."
