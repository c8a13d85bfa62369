"""The compile tax as ASV classes of a tier's family, timed by mlpbench/compile/compile_probe.py in fresh processes.

`CompileTime` (cold compile, recompile for a new token count), `CompileTimeDynamic` (the MLP with
dynamic=True) and `ChangingShapes` (the MLP over ten token counts in a row, compilation included,
for compiled, Liger and ours).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from typing import Callable

from .. import registry, runner
from .classes import VERSION, own_cache_key
from .measure import each, entry
from .tiers import CPU_TIER, GROUPED_ENV, cases, reason_not_here
from ..compile.compile_probe import probe, started

# The compile-tax classes, and the name of the setup_cache they share when grouped (compile_classes).
CLASSES = ("CompileTime", "CompileTimeDynamic", "ChangingShapes")
TAX = "CompileTax"


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
            if not v.measured_at(probe_case.shape, probe_case.dtype):
                continue  # a variant of other dtypes only (torchao's fp8): no case at the probe's
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


def _dry_probe(precheck, param) -> dict:
    try:
        precheck(param)
    except NotImplementedError as exc:
        return {"skip": str(exc)}
    return {}


@dataclasses.dataclass(frozen=True)
class _Probes:
    """One compile-tax class: its probes' ids, what measures one (`measure(id)`, in a fresh process of
    its own), why one cannot run here (`precheck(id)` raises NotImplementedError), and each id's probe
    arguments (`spec(id)`: case id, dynamic, sequence), for its process to be started ahead."""
    name: str
    ids: list
    measure: Callable
    precheck: Callable = None
    spec: Callable = None

    def check(self, i) -> None:
        (self.precheck or _probe_here)(i)

    def args(self, i) -> tuple:
        return self.spec(i) if self.spec else (i, False, False)


def _key(name: str, i: str) -> str:
    # a setup_cache may measure the probes of several classes, whose ids repeat (a case's static and
    # dynamic compiles): each entry is filed under its class too
    return f"{name}:{i}"


def _tax_setup_cache(tier: str, members: list[_Probes], owner: str):
    """The setup_cache measuring the probes of `members`: one function for any grouping, so that its
    ASV key differs only in `owner` (own_cache_key), which asv_run.plain_setup_cache_keys puts back."""
    def setup_cache(self):
        return measure_probes(tier, members)

    setup_cache.timeout = 3600
    return own_cache_key(setup_cache, f"{tier}.{owner}")


def _probe_class(tier: str, probes: _Probes, tracks: dict[str, str], doc: str, setup_cache, members,
                 param_name: str = "case") -> type:
    """An ASV class reading the figures of `probes` from `setup_cache` (which measures those of
    `members`): each `track_*` benchmark reads `tracks[benchmark]` (seconds) from its probe's result."""
    name = probes.name

    def setup(self, cache, param):
        # ASV skips a case only when setup raises NotImplementedError; raised from a benchmark's body it
        # counts as a failure.
        entry(cache, _key(name, param))

    def reader(key):
        def track(self, cache, param):
            return entry(cache, _key(name, param))[key]

        track.unit = "seconds"
        return track

    body = {}
    for bench, key in tracks.items():
        body[bench] = reader(key)
        body[bench].__name__ = body[bench].__qualname__ = bench
    return type(name, (), {
        "params": [probes.ids], "param_names": [param_name], "version": VERSION, "timeout": 3600,
        "setup_cache": setup_cache, "setup": setup, **body, "__doc__": doc,
        "dry_cache": staticmethod(lambda: {_key(m.name, i): _dry_probe(m.check, i) for m in members for i in m.ids}),
    })


def measure_probes(tier: str, members: list[_Probes]) -> dict:
    """Every probe of `members`, by class, as `each` files them, under _key. The processes of the probes
    that can run here are started ahead, all at once (compile_probe.started): each imports torch and the
    suite, builds its case and warms the device beside the others, and only then is the first probe
    timed, one at a time, every other process idle."""
    from ..compile.precompile import wait_for_ahead

    label = f"{tier}.{'+'.join(m.name for m in members)}"
    # first calls made ahead of this run hold the CPU: no probe starts before they are done
    wait_for_ahead(say=lambda m: print(f"[{label}] {m}", file=sys.stderr, flush=True))
    specs = []
    for m in members:
        for i in m.ids:
            try:
                m.check(i)
            except NotImplementedError:
                continue  # `measure` raises it again, and `each` files it as a skip
            specs.append(m.args(i))
    out = {}
    with started(specs):
        for m in members:
            out |= {_key(m.name, i): v for i, v in each(m.ids, f"{tier}.{m.name}", m.measure).items()}
    return out


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

    members = [
        _Probes("CompileTime", [c.id for c in probes], _probe),
        _Probes("CompileTimeDynamic", [c.id for c in dynamic_probes], functools.partial(_probe, dynamic=True),
                spec=lambda i: (i, True, False)),
        _Probes("ChangingShapes", list(runs), sequence, precheck=lambda seq_id: _probe_here(runs[seq_id][0]),
                spec=lambda seq_id: (runs[seq_id][0].id, runs[seq_id][1], True)),
    ]
    # Grouped (`mlpbench asv`, the nightly): one setup_cache for the three classes, so their probes all
    # start at once and wait for their go together; a plain `asv run` may select one class, and keeps one
    # setup_cache per class.
    grouped = os.environ.get(GROUPED_ENV) == "1"
    shared = _tax_setup_cache(tier, members, TAX) if grouped else None
    by_name = {m.name: m for m in members}

    def cls(name, tracks, doc, **kw):
        mine = by_name[name]
        own = [mine] if not grouped else members
        return _probe_class(tier, mine, tracks, doc, shared or _tax_setup_cache(tier, own, name), own, **kw)

    return {
        "CompileTime": cls(
            "CompileTime", {"track_cold_compile": "cold_compile_s", "track_recompile_new_shape": "recompile_s"},
            "torch.compile's cold compile (empty caches, fresh process) and recompile for a new token count."),
        "CompileTimeDynamic": cls(
            "CompileTimeDynamic", {"track_recompile_new_shape_dynamic": "recompile_s"},
            "torch.compile(dynamic=True): recompile for a new token count (the MLP only)."),
        "ChangingShapes": cls(
            "ChangingShapes", {"track_total": "total_s"},
            "The MLP over ten token counts in a row, compilation included (compile_probe.TOKEN_SEQUENCE).",
            param_name="sequence"),
    }
