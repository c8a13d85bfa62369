"""The nightly script end to end on a CPU: a temporary repository, two commits, one slowed on purpose."""

import os
import subprocess
import sys

import pytest
from project_copy import git, project_repo

CASE = "gelu_mul_train/eager/fp32/t333-h3000"
# One benchmark of the quick family, through ASV's own --bench: its setup_cache measures the quick
# GeLU·mul training cases (one compile), which keeps the test to seconds per run.
BENCH = r"^quick\.GeluMulTrainHost\.track_host_time\('eager', 'fp32'"
# Appended to the repository's ASV benchmarks in the second commit: the eager case built in the
# measuring process does its work five times (the others, measured in the same setup_cache, stay as
# they were: slowing them too only made the test slower). ASV imports benchmarks/ from the measured
# checkout, so the change is measured.
SLOWDOWN = '''
from mlpbench import workloads as _w
_build = _w.build
def _slow(case, device, **options):
    wl = _build(case, device, **options)
    if case.variant != "eager":
        return wl
    fn = wl.fn
    def five_times(*inputs):
        for _ in range(4):
            fn(*inputs)
        return fn(*inputs)
    wl.fn = five_times
    return wl
_w.build = _slow
'''


def _nightly(repo, home, *extra):
    env = os.environ | {"HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "nightly", "--repo", str(repo), "--bench", BENCH, "--machine", "cibox", "--threshold", "50", "--no-publish",
         "--summary", str(repo / "summary.md"), *extra],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900,
    )


@pytest.mark.slow
@pytest.mark.parametrize("slow_second", [True, False], ids=["slowed", "unchanged"])
def test_nightly_flags_the_slowed_commit_and_only_it(tmp_path, slow_second):
    repo, home = project_repo(tmp_path), tmp_path / "home"
    home.mkdir()

    first = _nightly(repo, home)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "First commit recorded" in (repo / "summary.md").read_text()

    if slow_second:
        with open(repo / "benchmarks" / "quick.py", "a") as fh:
            fh.write(SLOWDOWN)
    else:
        (repo / "NOTES").write_text("a commit that changes nothing measured\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")

    second = _nightly(repo, home)
    summary = (repo / "summary.md").read_text()
    if slow_second:
        assert second.returncode == 1, second.stdout[-3000:]
        assert "### Regressions" in summary and CASE in summary.split("### Regressions")[1]
    else:
        assert second.returncode == 0, second.stdout[-3000:]
        assert "0 regressed" in summary
    assert "[nightly] record: done" in second.stdout
