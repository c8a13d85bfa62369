r"""ASV benchmarks, large family: the shapes only the full tier adds (the full tier is standard + large).

Generated from the case registry by mlpbench.asv_suite; select with `asv run --bench '^large\.'`.
"""

from pathlib import Path

from mlpbench.asv_suite import family

# Compiled cases' codegen records go to results/codegen/ beside ASV's results/asv/ (asv.conf.json's
# results_dir), found from this file: ASV tells benchmark processes nothing of where that is.
globals().update(family("large", results=Path(__file__).resolve().parent.parent / "results"))
