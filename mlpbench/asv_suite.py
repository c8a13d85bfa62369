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

The classes and their parameters depend on nothing of the machine or the environment (only what a
setup_cache measures does: $MLPBENCH_CASES narrows it). A combination that cannot run here raises
NotImplementedError in `setup` with the reason (ASV's skip): one that is not a case
(fp32 at a shape measured in half precision only), a GPU-sized shape on a CPU, device figures
without a GPU, a Triton kernel on a CPU. A case whose output fails the float64 check raises
CorrectnessError in the cache and is recorded as failed.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import types
from pathlib import Path

from . import asv_machine, codegen_record, registry, runner, timing
from .record import METRICS
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


def measure_case(case_id: str, results: Path | None = None) -> dict:
    """Everything the op classes report for one case, after its float64 check. A compiled case's
    codegen record goes under `results` (the results root, the folder holding asv/; None: nowhere)."""
    case = registry.case_by_id(case_id)
    device = runner.default_device()
    reason = reason_not_here(case, device)
    if reason:
        raise NotImplementedError(reason)
    with runner.measuring_threads(device):
        p = runner.prepare(case, device)  # raises CorrectnessError: recorded as failed, never timed
        reason = runner.timing_skip_reason(case, device)
        if reason:
            raise NotImplementedError(reason)
        record = runner.describe(p, None).set(**runner.device_metrics(p), **runner.back_to_back_metrics(p),
                                              **runner.structure(p))
        # A tenth of a second of single calls (at least ten): host time is reported, not gated, on a GPU,
        # and a nightly of ~270 cases must leave time for the compile benchmarks.
        record.set(host_time_samples_s=timing.host_time_samples(p.workload.fn, p.input_sets[0], budget_s=0.1,
                                                                min_samples=10))
    if record.codegen_fingerprint is not None and results is not None:
        # ASV keeps numbers only: the fingerprint goes into its results (track_codegen), the record
        # beside them, content-addressed, for the gate to say what changed (results_dir's parent).
        codegen_record.store(record.codegen, results)
    return record.extra_info()


# ASV never tells a benchmark process what `--bench` selected, so a setup_cache measures every case of
# its op unless this variable, a regular expression searched in case ids, narrows what it measures.
CASES_ENV = "MLPBENCH_CASES"


def selected(ids: list[str]) -> list[str]:
    """The ids that $MLPBENCH_CASES selects (all of them when it is unset or empty)."""
    import re

    pattern = os.environ.get(CASES_ENV, "")
    if not pattern:
        return ids
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise registry.SelectionError(f"{CASES_ENV}={pattern!r} is not a regular expression: {exc}") from None
    return [i for i in ids if rx.search(i)]


def _entry(cache: dict, case_id: str) -> dict:
    if case_id not in cache:
        if os.environ.get(CASES_ENV):
            raise NotImplementedError(f"{case_id} was not measured: {CASES_ENV}={os.environ[CASES_ENV]!r} "
                                      "does not select it")
        raise NotImplementedError(f"{case_id} is not a case of the registry")
    entry = cache[case_id]
    if "skip" in entry:
        raise NotImplementedError(entry["skip"])
    if "error" in entry:
        raise RuntimeError(entry["error"])
    return entry


def _not_a_case(op: str, variant: str, dtype: str, shape_id: str) -> str:
    (shape,) = [s for s in registry.SHAPES if s.op == op and s.id == shape_id]
    v = registry.OPS[op].variant(variant)
    why = (f"shape {shape_id} is measured in {', '.join(shape.dtypes)} only" if dtype not in shape.dtypes else
           f"{variant} is measured at {', '.join(v.only_shapes or ['every shape'])} in "
           f"{', '.join(v.only_dtypes or shape.dtypes)} only (its compile is costly)")
    return f"{registry.case_id(op, variant, dtype, shape_id)} is not a case: {why}"


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


def op_classes(family: str, op: str, results: Path | None = None) -> dict[str, type]:
    ids = {c.id for c in cases(family, op)}
    params = [list(registry.OPS[op].variant_names), list(registry.DTYPES), [s.id for s in shapes(family, op)]]

    def setup_cache(self):
        # measure_case holds the CPU's thread count (runner.measuring_threads) while it measures
        return _each(selected([c.id for c in cases(family, op)]), f"{family}.{op}",
                     functools.partial(measure_case, results=results))

    setup_cache.timeout = 3600
    setup_cache = _own_cache_key(setup_cache, f"{family}.{registry.class_name(op)}")

    def entry(cache, variant, dtype, shape):
        case_id = registry.case_id(op, variant, dtype, shape)
        if case_id not in ids:
            raise NotImplementedError(_not_a_case(op, variant, dtype, shape))
        return _entry(cache, case_id)

    def device_setup(self, cache, variant, dtype, shape):
        self.entry = entry(cache, variant, dtype, shape)
        if METRICS["track_device_time"].field not in self.entry:
            raise NotImplementedError("no GPU here: device time, peak memory and kernels per call need CUDA "
                                      f"(host time is in {registry.class_name(op)}Host)")

    def host_setup(self, cache, variant, dtype, shape):
        self.entry = entry(cache, variant, dtype, shape)

    def dry_cache():
        # What setup_cache would hand `setup` here, without measuring: each case's skip, or the
        # fields this device records (see skip_reasons).
        device = runner.default_device()
        out = {}
        for i in selected([c.id for c in cases(family, op)]):
            case = registry.case_by_id(i)
            reason = reason_not_here(case, device) or runner.timing_skip_reason(case, device)
            fields = (DEVICE_METRICS + (CODEGEN_METRICS if registry.OPS[op].variant(case.variant).compiles else ())
                      if device == "cuda" else ())
            out[i] = {"skip": reason} if reason else {METRICS[m].field: None for m in fields}
        return out

    common = {"params": params, "param_names": ["variant", "dtype", "shape"], "version": VERSION,
              "timeout": 600, "setup_cache": setup_cache, "dry_cache": staticmethod(dry_cache), "results_root": results}
    what = registry.OPS[op].what
    name = registry.class_name(op)
    compilers = list(registry.OPS[op].of_role("compiler"))

    def codegen_setup(self, cache, variant, dtype, shape):
        self.entry = entry(cache, variant, dtype, shape)
        if METRICS["track_codegen"].field not in self.entry:
            raise NotImplementedError("no Triton kernel to fingerprint: " + (
                "Inductor generates C++ on a CPU" if runner.default_device() == "cpu" else
                "Inductor generated none for this case (library calls only)"))

    codegen_classes = {} if not compilers else {
        f"{name}Codegen": type(f"{name}Codegen", (), {
            **common, "params": [compilers, *params[1:]], "setup": codegen_setup, **_tracks(CODEGEN_METRICS),
            "__doc__": f"What torch.compile generated for {op} ({family} shapes), as a fingerprint that "
                       "changes with the kernels' source or launch configuration (mlpbench/codegen.py).",
        }),
    }
    return codegen_classes | {
        f"{name}Device": type(f"{name}Device", (), {
            **common, "setup": device_setup, **_tracks(DEVICE_METRICS),
            "__doc__": f"Device time, peak memory and kernels per call of {op} ({family} shapes): {what}.",
        }),
        f"{name}Host": type(f"{name}Host", (), {
            **common, "setup": host_setup, **_tracks(HOST_METRICS),
            "__doc__": f"Host time per synchronised call of {op} ({family} shapes): {what}.",
        }),
    }


# The op classes' benchmarks: ASV method names of mlpbench/record.py's METRICS, each reading its record field.
# Back-to-back host time exists on a GPU only, so it sits with the device figures (that class skips
# without CUDA); the box id sits with host time, which runs everywhere: the gate finds it by case.
DEVICE_METRICS = ("track_device_time", "track_peak_memory", "track_kernels_per_call", "track_host_time_back_to_back")
HOST_METRICS = ("track_host_time", "track_box_id")
CODEGEN_METRICS = ("track_codegen",)


def _tracks(names) -> dict:
    def reader(name):
        metric = METRICS[name]

        def track(self, cache, variant, dtype, shape):
            if metric.field not in self.entry:
                raise RuntimeError(self.entry.get("profile_error", f"no {metric.field} recorded"))
            value = self.entry[metric.field]
            return {"samples": value, "number": 1} if metric.samples else value

        track.__name__ = track.__qualname__ = name
        track.unit = metric.unit
        return track

    return {name: reader(name) for name in names}


def probe_cases(family: str) -> list[registry.Case]:
    """The compiled cases whose compile time stands for each op of the family that asks for it
    (Op.probe_compile): each compiler variant at its first shape, in fp32 for quick shapes (they run
    on a CPU too) and bf16 for GPU ones. Cold compiles cost seconds to minutes each, so one per
    op and compiler."""
    if family not in PROBE_DTYPE:
        return []
    out = []
    for rank in (0, 1):  # each op's default compiler first, then its others (max-autotune): ids keep their place
        for op in registry.OPS.values():
            compilers = op.of_role("compiler")
            if not op.probe_compile:
                continue
            for variant in compilers[:1] if rank == 0 else compilers[1:]:
                hits = [c for c in cases(family, op.name) if c.variant == variant and c.dtype == PROBE_DTYPE[family]]
                out += hits[:1]
    return out


def _probe_here(case: registry.Case | str) -> None:
    case = registry.case_by_id(case) if isinstance(case, str) else case
    reason = reason_not_here(case, runner.default_device()) or runner.timing_skip_reason(case, runner.default_device())
    if reason:
        raise NotImplementedError(reason)


def _skip_in_setup(self, cache, param):
    # ASV skips a case only when setup raises NotImplementedError; raised from a benchmark's body it
    # counts as a failure.
    _entry(cache, param)


def _probe_class(name: str, family: str, ids: list[str], measure, tracks: dict[str, str], doc: str,
                 param_name: str = "case", precheck=None) -> type:
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
        "dry_cache": staticmethod(lambda: {i: _dry_probe(precheck or _probe_here, i) for i in ids}), "__doc__": doc,
    })


def _dry_probe(precheck, param) -> dict:
    try:
        precheck(param)
    except NotImplementedError as exc:
        return {"skip": str(exc)}
    return {}


def _probe(case_id: str, **kw) -> dict:
    _probe_here(registry.case_by_id(case_id))
    return probe(case_id, **kw)


DYNAMIC = registry.DYNAMIC  # a sequence id's variant suffix: the compiler variant with dynamic=True


def sequences(family: str) -> dict[str, tuple[registry.Case, bool]]:
    """The changing-shapes runs of the family: id → (case, dynamic). Per op that asks for them
    (Op.changing_shapes), every variant but the baseline and the costly compilers, the default
    compiler also with dynamic=True;
    ids like 'mlp/compiled-dynamic/bf16/d768-h3072' (the dims without the token count)."""
    out = {}
    for probe_case in probe_cases(family):
        op = registry.OPS[probe_case.op]
        if not op.changing_shapes:
            continue
        if probe_case.variant != op.of_role("compiler")[0]:
            continue  # max-autotune over ten shapes would compile GEMM templates ten times: minutes each
        for v in op.variants[1:]:
            if v.compiles and v.name != probe_case.variant:
                continue
            case = registry.case(op.name, v.name, probe_case.dtype, probe_case.shape.id)
            out[registry.sequence_id(op.name, v.name, case.dtype, case.shape)] = (case, False)
            if v.compiles:
                out[registry.sequence_id(op.name, v.name, case.dtype, case.shape, dynamic=True)] = (case, True)
    return out


def compile_classes(family: str) -> dict[str, type]:
    probes = probe_cases(family)
    if not probes:
        return {}
    runs = sequences(family)
    dynamic_probes = [c for c in probes
                      if registry.OPS[c.op].changing_shapes and c.variant == registry.OPS[c.op].of_role("compiler")[0]]

    def sequence(seq_id):
        case, dynamic = runs[seq_id]
        _probe_here(case)
        return probe(case.id, dynamic=dynamic, sequence=True)

    return {
        "CompileTime": _probe_class(
            "CompileTime", family, [c.id for c in probes], _probe,
            {"track_cold_compile": "cold_compile_s", "track_recompile_new_shape": "recompile_s"},
            "torch.compile's cold compile (empty caches, fresh process) and recompile for a new token count."),
        "CompileTimeDynamic": _probe_class(
            "CompileTimeDynamic", family, [c.id for c in dynamic_probes], functools.partial(_probe, dynamic=True),
            {"track_recompile_new_shape_dynamic": "recompile_s"},
            "torch.compile(dynamic=True): recompile for a new token count (the MLP only)."),
        "ChangingShapes": _probe_class(
            "ChangingShapes", family, list(runs), sequence, {"track_total": "total_s"},
            "The MLP over ten token counts in a row, compilation included (compile_probe.TOKEN_SEQUENCE).",
            param_name="sequence", precheck=lambda seq_id: _probe_here(runs[seq_id][0])),
    }


def preload() -> None:
    """Import what every benchmark's process would otherwise import again, without touching the GPU.

    ASV (launch_method forkserver, asv.conf.json) forks each benchmark's process from one server
    that imported the benchmark modules, so modules imported here are already there in every child:
    torch.compile's Dynamo and Inductor alone take seconds to import, and ASV starts a process per
    parameter combination. CUDA is initialised in the children only, which keeps the fork safe.
    """
    import importlib

    for name in ("torch._dynamo", "torch._inductor.compile_fx", "kernels"):
        importlib.import_module(name)
    for op in registry.OPS.values():
        for v in op.variants:
            try:
                if v.preload:
                    v.preload()
            except ImportError:
                pass  # an optional package that is missing: its cases say so when they run
    # Objects that exist now are never collected in the forked children: freezing them keeps the
    # collector from touching (and so copying) their pages in every child.
    import gc

    gc.freeze()


def family(name: str, results: Path | None = None) -> dict[str, type]:
    """Every ASV benchmark class of a family, by class name: the same on every machine. `results`:
    the results root that the compiled cases' codegen records go under (the family modules in
    benchmarks/ name it from their own location: ASV passes ASV_CONF_DIR to build commands only, never
    to benchmark processes); None (a test building the classes): nowhere."""
    results = Path(results) if results is not None else None
    if name not in FAMILIES:
        raise registry.SelectionError(f"unknown benchmark family {name!r}; valid: {', '.join(FAMILIES)}")
    import torch

    # In a benchmark process of an environment ASV made: its results must not be filed under a torch
    # other than the one measuring (asv_machine).
    asv_machine.check_environment_name(os.environ.get("ASV_ENV_NAME"), torch.__version__)
    if runner.default_device() == "cuda":
        preload()
    out = {}
    for op in registry.OPS:
        if shapes(name, op):
            out |= op_classes(name, op, results)
    return out | compile_classes(name)


def skip_reasons(names=tuple(FAMILIES), bench: str | None = None):
    """(ASV's name of a benchmark with its parameters, why its `setup` skips it on this machine or
    None) for every benchmark of the families that `bench` (ASV's --bench: a regex searched in that
    name) selects. It calls each class's own `setup` on what its cache would hold, without measuring,
    so what only measuring shows (a compile that generates no Triton kernel to fingerprint) is not
    listed."""
    import itertools
    import re

    rx = re.compile(bench) if bench else None
    for name in names:
        for cls_name, cls in family(name).items():
            cache = cls.dry_cache()
            methods = sorted(m for m in vars(cls) if m.startswith(("track_", "time_")))
            for values in itertools.product(*cls.params):
                label = ", ".join(repr(v) for v in values)
                benches = [f"{name}.{cls_name}.{m}({label})" for m in methods]
                benches = [b for b in benches if rx is None or rx.search(b)]
                if not benches:
                    continue
                try:
                    cls.setup(cls(), cache, *values)
                    reason = None
                except NotImplementedError as exc:
                    reason = str(exc)
                for b in benches:
                    yield b, reason


def tier_regex(tier: str) -> str:
    """An `asv run --bench` expression selecting the registry tier `tier` (ASV matches it against
    'family.Class.benchmark(param, ...)'): standard is the standard family, full adds the large one,
    quick is the quick family and the standard family's shapes that every tier shares."""
    registry.select(tier)  # raises SelectionError naming a bad tier
    if tier == "quick":
        # by class and shape: another op may have a standard shape with the same id
        shared = "|".join(rf"{registry.class_name(s.op)}(Device|Host)\.\w+\(.*'{s.id}'\)"
                          for s in registry.SHAPES if s.tier == registry.EVERY_TIER)
        return rf"^quick\.|^standard\.({shared})$"
    return r"^standard\." if tier == "standard" else r"^(standard|large)\."
