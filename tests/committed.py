"""The results committed to this repository, copied away from the user's own.

`mlpbench run` writes into results/ by default, so the working tree's results/ may hold a user's own
runs next to the committed ones. Tests that check the committed measurements read a copy of only
the files git tracks there, so no run of the user's can fail the test command.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tracked(prefix: str) -> list[str]:
    """Paths under `prefix` that git tracks in this checkout; skips the test outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", prefix], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the committed results cannot be told apart from a user's own")
    return [p for p in out.decode().split("\0") if p]


def copy_committed_results(dest: Path) -> Path:
    """`dest/results` holding the tracked files of results/ and nothing else."""
    for rel in tracked("results"):
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the working tree is simply absent
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest / "results"
