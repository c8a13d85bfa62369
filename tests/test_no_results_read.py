"""Tests read fixtures they build, never the checkout's results/ (a user's own runs land there)."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


# Paths into the checkout's results/ or into its committed history: either reads measurements
# that a user's runs change (ASV's benchmarks.json, the benchmark list, is not one).
READS_RESULTS = [re.compile("ROOT" + r"""\s*/\s*["']results["']"""),
                 re.compile("HEAD" + r":results/(?!asv/benchmarks\.json)")]


def test_no_test_reads_the_working_trees_results_folder():
    offenders = [f"{path.name}:{n}" for path in sorted(TESTS.glob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if any(p.search(line) for p in READS_RESULTS)]
    assert offenders == [], offenders
