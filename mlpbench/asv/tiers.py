"""Which cases an ASV benchmark family holds, and which of them a machine measures.

An ASV family is a tier: benchmarks/<tier>.py holds the shapes that list that tier (registry.TIERS),
so `asv run --bench '^<tier>\\.'` records exactly the cases `mlpbench run --tier <tier>` runs. A shape
in several tiers is a parameter of each of their families, measured once per family that a run
selects: `mlpbench asv` and the nightly select one.
"""

from __future__ import annotations

import os
import re

from .. import registry, runner

# The tier of CPU-sized shapes: on a CPU only its shapes are measured, its compile probes in fp32.
CPU_TIER = "quick"

# ASV never tells a benchmark process what `--bench` selected, so a setup_cache measures every case of
# its op unless this variable, a regular expression searched in case ids, narrows what it measures.
CASES_ENV = "MLPBENCH_CASES"
# Set to 1 (by `mlpbench asv` and the nightly, which run a whole family): the ops of each group of
# run_suite.op_groups share one setup_cache, one process measuring them all, as `mlpbench run` measures
# them in one pytest process. ASV starts a fresh interpreter per setup_cache, with torch's and the suite's
# imports; a plain `asv run`, which may select one class, keeps a setup_cache per op.
GROUPED_ENV = "MLPBENCH_ASV_GROUPED"


def bench(tier: str) -> str:
    """The `asv run --bench` expression that selects the family of `tier` (SelectionError naming a bad one)."""
    registry.select(tier)
    return rf"^{tier}\."


def shapes(tier: str, op: str) -> list[registry.Shape]:
    return [s for s in registry.OPS[op].shapes if tier in s.tiers]


def cases(tier: str, op: str) -> list[registry.Case]:
    return registry.select(tier, ops=[op])


def reason_not_here(case: registry.Case, device: str) -> str | None:
    """Why `case` is not measured on `device` at all, or None."""
    if device == "cpu" and CPU_TIER not in case.shape.tiers:
        return (f"shape {case.shape.id} is GPU-sized (not in the {CPU_TIER} tier): measured on a GPU only; "
                "on a CPU it would take minutes and say nothing about GPUs")
    return runner.skip_reason(case, device)


def selected(ids: list[str]) -> list[str]:
    """The ids that $MLPBENCH_CASES selects (all of them when it is unset or empty)."""
    pattern = os.environ.get(CASES_ENV, "")
    if not pattern:
        return ids
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise registry.SelectionError(f"{CASES_ENV}={pattern!r} is not a regular expression: {exc}") from None
    return [i for i in ids if rx.search(i)]
