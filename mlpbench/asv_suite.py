"""ASV's view of the suite: one benchmark family per tier, the same classes on every machine.

benchmarks/<tier>.py holds `classes(tier)`: per op with shapes in the tier its op classes
(asv_classes), and the tier's compile-tax classes (asv_compile). Which cases a family holds and which
a machine measures: asv_tiers; how a setup_cache measures them: asv_measure; why a benchmark skips
here without measuring: asv_skips.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import asv_machine, registry, runner
from .asv_classes import op_classes
from .asv_compile import compile_classes
from .asv_tiers import shapes


def results_beside(benchmark_module: str) -> Path:
    """The results root (results/, holding asv/ and codegen/) of the checkout a benchmark module of
    benchmarks/ lies in: ASV passes ASV_CONF_DIR to build commands only, never to benchmark processes."""
    return Path(benchmark_module).resolve().parent.parent / "results"


def preload() -> None:
    """runner.preload, then what exists frozen.

    ASV (launch_method forkserver, asv.conf.json) forks each benchmark's process from one server
    that imported the benchmark modules, so modules imported here are already there in every child:
    torch.compile's Dynamo and Inductor alone take seconds to import, and ASV starts a process per
    parameter combination. CUDA is initialised in the children only, which keeps the fork safe.
    """
    import gc

    runner.preload()
    # Objects that exist now are never collected in the forked children: freezing them keeps the
    # collector from touching (and so copying) their pages in every child.
    gc.freeze()


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
        preload()
    out = {}
    for op in registry.OPS:
        if shapes(tier, op):
            out |= op_classes(tier, op, results)
    return out | compile_classes(tier)
