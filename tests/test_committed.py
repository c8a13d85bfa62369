"""Tests read the committed results, never a user's own runs in results/."""

import re
from pathlib import Path

from committed import tracked

TESTS = Path(__file__).resolve().parent


def test_the_copy_holds_exactly_the_tracked_results(committed_results):
    copied = {p.relative_to(committed_results.parent).as_posix() for p in committed_results.rglob("*") if p.is_file()}
    assert copied == {p for p in tracked("results") if (TESTS.parent / p).is_file()}
    assert any(p.startswith("results/pytest/") for p in copied) and any(p.startswith("results/asv/") for p in copied)


def test_no_test_reads_the_working_trees_results_folder():
    # a path built from the checkout's root and "results" reads whatever the user's runs left there
    pattern = re.compile("ROOT" + r"""\s*/\s*["']results["']""")
    offenders = [f"{path.name}:{n}" for path in sorted(TESTS.glob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == [], offenders
