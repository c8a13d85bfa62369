r"""ASV benchmarks of the standard tier (the nightly GPU set), generated from the case registry by
mlpbench.asv.suite; select with `asv run --bench '^standard\.'`."""

from mlpbench.asv.suite import classes, results_beside

globals().update(classes("standard", results=results_beside(__file__)))
