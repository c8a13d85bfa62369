r"""ASV benchmarks, standard family: the nightly set (registry tier standard): GPU-sized shapes and the small shapes every tier shares.

Generated from the case registry by mlpbench.asv_suite; select with `asv run --bench '^standard\.'`.
"""

from mlpbench.asv_suite import family

globals().update(family("standard"))
