r"""ASV benchmarks of the full tier (standard plus the largest shapes), generated from the case
registry by mlpbench.asv.suite; select with `asv run --bench '^full\.'`."""

from mlpbench.asv.suite import classes, results_beside

globals().update(classes("full", results=results_beside(__file__)))
