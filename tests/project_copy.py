"""A temporary git repository holding this project, for tests that run ASV or the nightly on it."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT_FILES = ("asv.conf.json", "benchmarks", "mlpbench", "conftest.py", "pyproject.toml", "pytest.ini", "kernels_local")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def project_repo(tmp_path: Path) -> Path:
    """This project's files in `tmp_path/repo`, committed once on main."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in PROJECT_FILES:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / name)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    return repo
