r"""ASV benchmarks, quick family: CPU-sized shapes (registry tier quick): the suite's CPU runs, and CI.

Generated from the case registry by mlpbench.asv_suite; select with `asv run --bench '^quick\.'`.
"""

from pathlib import Path

from mlpbench.asv_suite import family

# Compiled cases' codegen records go to results/codegen/ beside ASV's results/asv/ (asv.conf.json's
# results_dir), found from this file: ASV tells benchmark processes nothing of where that is.
globals().update(family("quick", results=Path(__file__).resolve().parent.parent / "results"))
