r"""ASV benchmarks, large family: the shapes only the full tier adds (the full tier is standard + large).

Generated from the case registry by mlpbench.asv_suite; select with `asv run --bench '^large\.'`.
"""

from mlpbench.asv_suite import family

globals().update(family("large"))
