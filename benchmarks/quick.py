r"""ASV benchmarks of the quick tier (CPU-sized shapes: CPU runs and CI), generated from the case
registry by mlpbench.asv.suite; select with `asv run --bench '^quick\.'`."""

from mlpbench.asv.suite import classes, results_beside

globals().update(classes("quick", results=results_beside(__file__)))
