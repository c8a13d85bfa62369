"""The ASV classes of one op in one tier's family, made from the registry.

Two classes (three for an op with compiled variants) whose parameters are the axes variant × dtype ×
shape, so ASV's report offers each axis as a selector and draws one line per chosen combination:

- `<Op>Device`: `track_device_time` (CUDA-graph-replay samples, returned as {"samples", "number"} so
  ASV computes confidence intervals and `asv compare` tests significance), `track_peak_memory`
  (bytes), `track_kernels_per_call` and `track_host_time_back_to_back`;
- `<Op>Host`: `track_host_time` (samples of single synchronised calls) and `track_box_id`;
- `<Op>Codegen`: `track_codegen`, a fingerprint of what torch.compile generated.

They share one setup_cache (asv_measure). The classes and their parameters depend on nothing of the
machine or the environment; a combination that cannot run here raises NotImplementedError in
`setup` with the reason (ASV's skip): one that is not a case, a GPU-sized shape on a CPU, device
figures without a GPU, a Triton kernel on a CPU.
"""

from __future__ import annotations

import functools
import sys
import types
from pathlib import Path

from .. import registry, runner, timing
from .measure import each, entry, measure_case
from .tiers import cases, reason_not_here, selected, shapes
from ..ops import FLOATS, FP8
from ..ops._fp8 import NO_FP8_PATH
from ..record import METRICS

# Bump when what a benchmark measures changes, so ASV starts a new series instead of drawing a step;
# the gate compares a benchmark across commits only within one version.
# v4: parameters became variant × dtype × shape (they were one case id), and host time became
# samples taken in the measuring process (`track_host_time`, was ASV's own `time_host`).
VERSION = f"mlpbench-v4-device-v{timing.DEVICE_METHOD_VERSION}"

# The op classes' benchmarks: ASV method names of mlpbench/record.py's METRICS, each reading its record field.
# Back-to-back host time exists on a GPU only, so it sits with the device figures (that class skips
# without CUDA); the box id sits with host time, which runs everywhere: the gate finds it by case.
DEVICE_METRICS = ("track_device_time", "track_peak_memory", "track_kernels_per_call", "track_host_time_back_to_back")
HOST_METRICS = ("track_host_time", "track_box_id")
CODEGEN_METRICS = ("track_codegen",)


def own_cache_key(setup_cache, owner: str):
    """Give a generated setup_cache a cache key of its own.

    ASV keys a setup_cache result by its function's module and first line, and hands one result to
    every class with that key. Functions made by one factory share the line, so every tier's and
    op's classes would read the first one's cache. Each function gets a module name of its own (an
    empty module registered in sys.modules, which is how ASV looks it up); the classes of one tier
    and op share the function, hence one measurement.
    """
    name = f"{__name__}.{owner}"
    sys.modules.setdefault(name, types.ModuleType(name))
    setup_cache.__module__ = name
    return setup_cache


def _not_a_case(op: str, variant: str, dtype: str, shape_id: str, tier: str) -> str:
    (shape,) = [s for s in registry.SHAPES if s.op == op and s.id == shape_id]
    v = registry.OPS[op].variant(variant)
    why = (f"shape {shape_id} is measured in {', '.join(shape.dtypes)} only" if dtype not in shape.dtypes else
           f"{variant} has {NO_FP8_PATH}" if dtype == FP8 and v.fp8 is None else
           f"{variant} is measured in the {', '.join(v.only_tiers)} tier only, not in {tier} (its compile is "
           "costly)" if not v.in_tier(tier) else
           f"{variant} is measured at {', '.join(v.only_shapes or ['every shape'])} in "
           f"{', '.join(v.only_dtypes or shape.dtypes)} only (its compile is costly)")
    return f"{registry.case_id(op, variant, dtype, shape_id)} is not a case: {why}"


def dtype_axis(tier: str, op: str) -> list[str]:
    """The dtype parameter of `op`'s classes in the family of `tier`: fp32, bf16 and fp16 always (the
    axis ASV's history has), and a dtype appended since (fp8) only where a shape of the op in this tier
    lists it, so that an op without it gains no combinations that are never cases."""
    listed = {dt for s in shapes(tier, op) for dt in s.dtypes}
    return [dt for dt in registry.DTYPES if dt in FLOATS or dt in listed]


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


def shared_setup_cache(tier: str, ops: list[str], results: Path | None = None):
    """The setup_cache of the classes of `ops` in the family of `tier`: one process measures the selected
    cases of them all, in registry order (one op: its own classes' cache, as a plain `asv run` has it)."""
    def setup_cache(self):
        # measure_case holds the CPU's thread count (runner.measuring_threads) while it measures
        return each(selected([c.id for op in ops for c in cases(tier, op)]), f"{tier}.{'+'.join(ops)}",
                    functools.partial(measure_case, results=results))

    setup_cache.timeout = 3600
    return own_cache_key(setup_cache, f"{tier}.{'_'.join(registry.class_name(op) for op in ops)}")


def op_classes(tier: str, op: str, results: Path | None = None, group: list[str] | None = None,
               setup_cache=None) -> dict[str, type]:
    """The classes of `op` in the family of `tier`, by class name. `results`: the results root that
    compiled cases' codegen records go under (None: nowhere). `group` and `setup_cache`: the ops whose
    cases one setup_cache measures with this op's, and that function (shared_setup_cache); by default
    the op alone."""
    ids = {c.id for c in cases(tier, op)}
    params = [list(registry.OPS[op].variant_names), dtype_axis(tier, op), [s.id for s in shapes(tier, op)]]
    group = group or [op]
    setup_cache = setup_cache or shared_setup_cache(tier, group, results)

    def entry_of(cache, variant, dtype, shape):
        case_id = registry.case_id(op, variant, dtype, shape)
        if case_id not in ids:
            raise NotImplementedError(_not_a_case(op, variant, dtype, shape, tier))
        return entry(cache, case_id)

    def device_setup(self, cache, variant, dtype, shape):
        self.entry = entry_of(cache, variant, dtype, shape)
        if METRICS["track_device_time"].field not in self.entry:
            raise NotImplementedError("no GPU here: device time, peak memory and kernels per call need CUDA "
                                      f"(host time is in {registry.class_name(op)}Host)")

    def host_setup(self, cache, variant, dtype, shape):
        self.entry = entry_of(cache, variant, dtype, shape)

    def codegen_setup(self, cache, variant, dtype, shape):
        self.entry = entry_of(cache, variant, dtype, shape)
        if METRICS["track_codegen"].field not in self.entry:
            raise NotImplementedError("no Triton kernel to fingerprint: " + (
                "Inductor generates C++ on a CPU" if runner.default_device() == "cpu" else
                "Inductor generated none for this case (library calls only)"))

    def dry_cache():
        # What setup_cache would hand `setup` here, without measuring: each case's skip, or the
        # fields this device records (asv_skips).
        device = runner.default_device()
        out = {}
        for i in selected([c.id for g in group for c in cases(tier, g)]):
            case = registry.case_by_id(i)
            reason = reason_not_here(case, device) or runner.timing_skip_reason(case, device)
            fields = (DEVICE_METRICS + (CODEGEN_METRICS if registry.variant_of(case).compiles else ())
                      if device == "cuda" else ())
            out[i] = {"skip": reason} if reason else {METRICS[m].field: None for m in fields}
        return out

    common = {"params": params, "param_names": ["variant", "dtype", "shape"], "version": VERSION,
              "timeout": 600, "setup_cache": setup_cache, "dry_cache": staticmethod(dry_cache), "results_root": results}
    what = registry.OPS[op].what
    name = registry.class_name(op)
    compilers = list(registry.OPS[op].of_role("compiler"))
    codegen_classes = {} if not compilers else {
        f"{name}Codegen": type(f"{name}Codegen", (), {
            **common, "params": [compilers, *params[1:]], "setup": codegen_setup, **_tracks(CODEGEN_METRICS),
            "__doc__": f"What torch.compile generated for {op} ({tier} tier), as a fingerprint that "
                       "changes with the kernels' source or launch configuration (mlpbench/compile/codegen.py).",
        }),
    }
    return codegen_classes | {
        f"{name}Device": type(f"{name}Device", (), {
            **common, "setup": device_setup, **_tracks(DEVICE_METRICS),
            "__doc__": f"Device time, peak memory and kernels per call of {op} ({tier} tier): {what}.",
        }),
        f"{name}Host": type(f"{name}Host", (), {
            **common, "setup": host_setup, **_tracks(HOST_METRICS),
            "__doc__": f"Host time per synchronised call of {op} ({tier} tier): {what}.",
        }),
    }
