r"""ASV benchmarks, standard family: the nightly set (registry tier standard): GPU-sized shapes and the small shapes every tier shares.

Generated from the case registry by mlpbench.asv_suite; select with `asv run --bench '^standard\.'`.
"""

from pathlib import Path

from mlpbench.asv_suite import family

# Compiled cases' codegen records go to results/codegen/ beside ASV's results/asv/ (asv.conf.json's
# results_dir), found from this file: ASV tells benchmark processes nothing of where that is.
globals().update(family("standard", results=Path(__file__).resolve().parent.parent / "results"))
