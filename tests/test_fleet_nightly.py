"""The fleet's night end to end on a CPU: two machines each run the nightly and commit their results
to one bare repository's main, as the workflow's store step does, then one `asv publish` over a
fresh clone of main shows both."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from project_copy import git, project_repo

from mlpbench.asv import offline as asv_offline

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "nightly.yml"
# One benchmark of the quick family, through ASV's own --bench (its setup_cache compiles once).
BENCH = r"^quick\.GeluMulTrainHost\.track_host_time\('eager', 'fp32'"
MACHINES = ("box-a", "box-b")


def _nightly(clone: Path, home: Path, machine: str) -> subprocess.CompletedProcess:
    """One machine's night, narrowed to one quick case."""
    return subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "nightly", "--repo", str(clone), "--bench", BENCH,
         "--machine", machine, "--no-publish", "--summary", str(clone / "summary.md")],
        cwd=clone, env=os.environ | {"HOME": str(home)}, capture_output=True, text=True, timeout=900,
    )


def _store_args() -> list[str]:
    """The workflow's store step, as arguments after `mlpbench`."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["nightly"]["steps"]
    run = next(s["run"] for s in steps if "mlpbench store" in s.get("run", ""))
    return run.split("mlpbench ", 1)[1].replace('"$MACHINE"', "{machine}").split()


def _run(cmd, cwd, env=None):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_two_machines_commit_to_main_and_publish_one_report(tmp_path):
    assets = asv_offline.default_cache_dir()
    try:
        asv_offline.fetch_assets(assets)
    except asv_offline.AssetError as exc:
        pytest.skip(f"asv report assets are not cached in {assets} and cannot be fetched: {exc}")
    repo, home = project_repo(tmp_path), tmp_path / "home"
    home.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(repo), "origin.git")
    origin = tmp_path / "origin.git"
    head = _run(["git", "rev-parse", "HEAD"], repo).stdout.strip()

    # every machine checks out the commit the night started from (earlier nights' results come with
    # it); the second one's store then lands on top of the first one's results commit
    for machine in MACHINES:
        git(tmp_path, "clone", "-q", str(origin), str(tmp_path / machine))
    for machine in MACHINES:
        clone = tmp_path / machine
        night = _nightly(clone, home, machine)
        assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-3000:]
        args = [a.format(machine=machine) for a in _store_args()]
        stored = _run([sys.executable, "-m", "mlpbench.cli", *args, "--repo", str(clone), "--backoff", "0.1"], clone)
        assert "files added" in stored.stdout, stored.stdout

    on_branch = _run(["git", "ls-tree", "-r", "--name-only", "main"], origin).stdout.split()
    for machine in MACHINES:
        assert f"results/asv/{machine}/machine.json" in on_branch, on_branch
        assert any(p.startswith(f"results/asv/{machine}/{head[:8]}-") for p in on_branch), on_branch
    assert "results/asv/benchmarks.json" in on_branch

    site = tmp_path / "site"
    git(tmp_path, "clone", "-q", str(origin), str(site))  # the publish job checks out main's tip
    _run([sys.executable, "-m", "asv", "publish"], site,
         os.environ | {"HOME": str(home), "MLPBENCH_ASV_ASSETS": str(assets)})
    index = json.loads((site / "results" / "html" / "index.json").read_text())
    assert sorted(index["params"]["machine"]) == sorted(MACHINES), index["params"]
    graphs = list((site / "results" / "html" / "graphs").rglob("*.json"))
    assert {m for m in MACHINES if any(f"machine-{m}" in str(g) for g in graphs)} == set(MACHINES)
