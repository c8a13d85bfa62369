"""ASV's view of the suite: one benchmark family per tier, the same classes on every machine.

benchmarks/<tier>.py holds `classes(tier)`: per op with shapes in the tier its op classes
(asv_classes), and the tier's compile-tax classes (asv_compile). Which cases a family holds and which
a machine measures: asv_tiers; how a setup_cache measures them: asv_measure; why a benchmark skips
here without measuring: asv_skips.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import machine as asv_machine
from .. import registry, runner
from .classes import op_classes, shared_setup_cache
from .compile import compile_classes
from .tiers import GROUPED_ENV, shapes


def results_beside(benchmark_module: str) -> Path:
    """The results root (results/, holding asv/ and codegen.json) of the checkout a benchmark module of
    benchmarks/ lies in: ASV passes ASV_CONF_DIR to build commands only, never to benchmark processes."""
    return Path(benchmark_module).resolve().parent.parent / "results"


def preload(ops) -> None:
    """In a setup_cache process, before its first case: runner.preload of `ops`, then what exists frozen.

    Only a setup_cache measures; the processes ASV forks for each benchmark (launch_method forkserver,
    asv.conf.json) read their figures from its cache. So neither ASV's discovery nor its fork server
    imports Dynamo, Inductor or the variants' packages: each fork copies the page tables of the process
    it comes from, and ASV forks one per parameter combination of every benchmark.
    """
    import gc

    runner.preload(ops)
    # Objects that exist now are never collected later: freezing them keeps the collector from walking
    # them after every case.
    gc.freeze()


def setup_cache_ops(tier: str, argv: list[str] | None = None) -> list[str] | None:
    """In a process that ASV started for one setup_cache (asv_runner's `setup_cache` command, argv
    [script, "setup_cache", benchmark_dir, benchmark_id, params]): the ops whose cases it measures
    ([] for the compile tax, whose probes run in processes of their own). None in any other process.

    ASV spawns a fresh interpreter for each setup_cache, not a fork of its server: there, importing
    what every op needs would cost each class the imports of all the others."""
    import sys

    argv = sys.argv if argv is None else argv
    if len(argv) < 4 or argv[1] != "setup_cache":
        return None
    parts = argv[3].split(".")
    if len(parts) < 2:
        return None
    if parts[0] != tier:
        return []  # another family's setup_cache: this module's classes are not measured here
    name = parts[1]
    for ops in setup_groups(tier):
        for op in ops:
            if name in {f"{registry.class_name(op)}{kind}" for kind in ("Device", "Host", "Codegen")}:
                return ops
    return []


def classes(tier: str, results: Path | None = None) -> dict[str, type]:
    """Every ASV benchmark class of the family of `tier`, by class name: the same on every machine.
    `results`: the results root that compiled cases' codegen records go under (results_beside);
    None (a test building the classes): nowhere."""
    results = Path(results) if results is not None else None
    if tier not in registry.TIERS:
        raise registry.SelectionError(f"unknown tier {tier!r}; valid: {', '.join(registry.TIERS)}")
    import torch

    # In a benchmark process of an environment ASV made: its results must not be filed under a torch
    # other than the one measuring (asv_machine).
    asv_machine.check_environment_name(os.environ.get("ASV_ENV_NAME"), torch.__version__)
    if runner.default_device() == "cuda":
        own = setup_cache_ops(tier)
        if own:
            preload(own)
    out = {}
    for ops in setup_groups(tier):
        shared = shared_setup_cache(tier, ops, results)
        for op in ops:
            out |= op_classes(tier, op, results, group=ops, setup_cache=shared)
    return out | compile_classes(tier)


def setup_groups(tier: str) -> list[list[str]]:
    """The ops of the family of `tier` (those with shapes in it) by the setup_cache that measures them:
    each alone, or with $MLPBENCH_ASV_GROUPED=1 the groups `mlpbench run` measures in one pytest process
    each (run_suite.op_groups)."""
    ops = [op for op in registry.OPS if shapes(tier, op)]
    if os.environ.get(GROUPED_ENV) != "1":
        return [[op] for op in ops]
    from .tiers import cases
    from ..run_suite import op_groups

    return op_groups([c for op in ops for c in cases(tier, op)])
