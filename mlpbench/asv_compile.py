"""The compile tax as ASV classes of a tier's family, timed by mlpbench/compile_probe.py in fresh processes.

`CompileTime` (cold compile, recompile for a new token count), `CompileTimeDynamic` (the MLP with
dynamic=True) and `ChangingShapes` (the MLP over ten token counts in a row, compilation included,
for compiled, Liger and ours).
"""

from __future__ import annotations

import functools
import sys

from . import registry, runner
from .asv_classes import VERSION, own_cache_key
from .asv_measure import each, entry
from .asv_tiers import CPU_TIER, cases, reason_not_here
from .compile_probe import probe, started


def probe_cases(tier: str) -> list[registry.Case]:
    """The compiled cases whose compile time stands for each op of the tier that asks for it
    (Op.probe_compile): each compiler variant at its first shape of the tier, in fp32 in the CPU tier
    (it runs on a CPU too) and bf16 in the GPU tiers. Cold compiles cost seconds to minutes each, so
    one per op and compiler."""
    dtype = "fp32" if tier == CPU_TIER else "bf16"
    out = []
    for rank in (0, 1):  # each op's default compiler first, then its others (max-autotune): ids keep their place
        for op in registry.OPS.values():
            compilers = op.of_role("compiler")
            if not op.probe_compile:
                continue
            for variant in compilers[:1] if rank == 0 else compilers[1:]:
                hits = [c for c in cases(tier, op.name) if c.variant == variant and c.dtype == dtype]
                out += hits[:1]
    return out


def sequences(tier: str) -> dict[str, tuple[registry.Case, bool]]:
    """The changing-shapes runs of the tier: id → (case, dynamic). Per op that asks for them
    (Op.changing_shapes), every variant but the baseline and the costly compilers, the default
    compiler also with dynamic=True;
    ids like 'mlp/compiled-dynamic/bf16/d768-h3072' (the dims without the token count)."""
    out = {}
    for probe_case in probe_cases(tier):
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


def _probe_here(case: registry.Case | str) -> None:
    case = registry.case_by_id(case) if isinstance(case, str) else case
    reason = reason_not_here(case, runner.default_device()) or runner.timing_skip_reason(case, runner.default_device())
    if reason:
        raise NotImplementedError(reason)


def _skip_in_setup(self, cache, param):
    # ASV skips a case only when setup raises NotImplementedError; raised from a benchmark's body it
    # counts as a failure.
    entry(cache, param)


def _dry_probe(precheck, param) -> dict:
    try:
        precheck(param)
    except NotImplementedError as exc:
        return {"skip": str(exc)}
    return {}


def _probe_class(name: str, tier: str, ids: list[str], measure, tracks: dict[str, str], doc: str,
                 param_name: str = "case", precheck=None, spec=None) -> type:
    """An ASV class whose one setup_cache runs `measure` per id (each probe in a fresh process of its
    own) and whose `track_*` benchmarks read `tracks[benchmark]` (seconds) from the result. `spec(id)`:
    the id's probe arguments (case id, dynamic, sequence), for its process to be started ahead."""
    def setup_cache(self):
        return measure_probes(ids, f"{tier}.{name}", measure, precheck or _probe_here, spec)

    setup_cache.timeout = 3600

    def reader(key):
        def track(self, cache, param):
            return entry(cache, param)[key]

        track.unit = "seconds"
        return track

    body = {}
    for bench, key in tracks.items():
        body[bench] = reader(key)
        body[bench].__name__ = body[bench].__qualname__ = bench
    return type(name, (), {
        "params": [ids], "param_names": [param_name], "version": VERSION, "timeout": 3600,
        "setup_cache": own_cache_key(setup_cache, f"{tier}.{name}"), "setup": _skip_in_setup, **body,
        "dry_cache": staticmethod(lambda: {i: _dry_probe(precheck or _probe_here, i) for i in ids}), "__doc__": doc,
    })


def measure_probes(ids: list[str], label: str, measure, precheck, spec) -> dict:
    """`each(ids, label, measure)`, the processes of the probes that can run here started ahead, all at
    once (compile_probe.started): each imports torch and the suite and warms the device beside the
    others, and only then is the first probe timed, one at a time, every other process idle."""
    from .precompile import wait_for_ahead

    # first calls made ahead of this run hold the CPU: no probe starts before they are done
    wait_for_ahead(say=lambda m: print(f"[{label}] {m}", file=sys.stderr, flush=True))
    specs = []
    for i in ids:
        try:
            precheck(i)
        except NotImplementedError:
            continue  # `measure` raises it again, and `each` files it as a skip
        specs.append(spec(i) if spec else (i, False, False))
    with started(specs):
        return each(ids, label, measure)


def _probe(case_id: str, **kw) -> dict:
    _probe_here(registry.case_by_id(case_id))
    return probe(case_id, **kw)


def compile_classes(tier: str) -> dict[str, type]:
    """The compile-tax classes of the family of `tier`, by class name (none where it has no probe)."""
    probes = probe_cases(tier)
    if not probes:
        return {}
    runs = sequences(tier)
    dynamic_probes = [c for c in probes
                      if registry.OPS[c.op].changing_shapes and c.variant == registry.OPS[c.op].of_role("compiler")[0]]

    def sequence(seq_id):
        case, dynamic = runs[seq_id]
        _probe_here(case)
        return probe(case.id, dynamic=dynamic, sequence=True)

    return {
        "CompileTime": _probe_class(
            "CompileTime", tier, [c.id for c in probes], _probe,
            {"track_cold_compile": "cold_compile_s", "track_recompile_new_shape": "recompile_s"},
            "torch.compile's cold compile (empty caches, fresh process) and recompile for a new token count."),
        "CompileTimeDynamic": _probe_class(
            "CompileTimeDynamic", tier, [c.id for c in dynamic_probes], functools.partial(_probe, dynamic=True),
            {"track_recompile_new_shape_dynamic": "recompile_s"},
            "torch.compile(dynamic=True): recompile for a new token count (the MLP only).",
            spec=lambda i: (i, True, False)),
        "ChangingShapes": _probe_class(
            "ChangingShapes", tier, list(runs), sequence, {"track_total": "total_s"},
            "The MLP over ten token counts in a row, compilation included (compile_probe.TOKEN_SEQUENCE).",
            param_name="sequence", precheck=lambda seq_id: _probe_here(runs[seq_id][0]),
            spec=lambda seq_id: (runs[seq_id][0].id, runs[seq_id][1], True)),
    }
