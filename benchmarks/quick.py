r"""ASV benchmarks, quick family: CPU-sized shapes (registry tier quick): the suite's CPU runs, and CI.

Generated from the case registry by mlpbench.asv_suite; select with `asv run --bench '^quick\.'`.
"""

from mlpbench.asv_suite import family

globals().update(family("quick"))
