"""The tree outside the code stays small: results are one schema's data, a study is a README, its data
in one file and a script, and generated pages are built rather than committed. The count is of
tracked files outside the five code folders, so it grows only when something is committed there."""

import subprocess
from collections import Counter
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ("mlpbench", "tests", "kernels_local", "benchmarks", "scripts")
# The count today: lower it whenever the tree shrinks, never raise it. A file that needs a home
# outside the code folders takes the place of one that goes.
ALLOWED = 85
# Where the tree was to get to, and now is: the report is built (by `mlpbench report`, and on Pages
# by the nightly), not committed, and the studies' generated pages are sections of their READMEs.
TARGET = 86


def _outside_code() -> list[str]:
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("git is not installed: the count is of the files git tracks")
    if top.returncode or Path(top.stdout.strip()).resolve() != ROOT:
        pytest.skip(f"{ROOT} is not the top of a git checkout (an unpacked sdist or a copy): "
                    "the count is of the files git tracks")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [p for p in listed.decode().split("\0") if p]
    return [p for p in paths if PurePosixPath(p).parts[0] not in CODE]


def _folder(path: str) -> str:
    """Where a file counts: a top-level file as ".", results/ and studies/ by their subfolder."""
    parts = PurePosixPath(path).parts
    if len(parts) == 1:
        return "."
    if parts[0] in ("results", "studies") and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def _largest(paths: list[str], n: int = 6) -> str:
    return ", ".join(f"{folder} {count}" for folder, count in Counter(map(_folder, paths)).most_common(n))


def test_the_tree_outside_the_code_does_not_grow():
    paths = _outside_code()
    assert len(paths) <= ALLOWED, (
        f"{len(paths)} tracked files outside {', '.join(CODE)}, at most {ALLOWED} allowed; "
        f"the largest folders: {_largest(paths)}")


def test_the_tree_outside_the_code_is_down_to_the_target():
    paths = _outside_code()
    assert len(paths) <= TARGET, f"{len(paths)} tracked files; the largest folders: {_largest(paths)}"


def test_folders_are_named_where_files_count():
    assert _folder("README.md") == "."
    assert _folder("results/codegen.json") == "results"
    assert _folder("results/pytest/h200/run.json") == "results/pytest"
    assert _folder("studies/same-box/trials.py") == "studies/same-box"
    assert _folder("studies/README.md") == "studies"
    assert _folder("docs/results/h200.md") == "docs"
    assert "studies/a 2, docs 1" == _largest(["studies/a/x", "studies/a/y", "docs/z"])
