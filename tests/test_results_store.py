"""`mlpbench store` against a local bare repository: racing machines, a remote that refuses every
push, and machines that disagree on benchmarks.json."""

import hashlib
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mlpbench import results_store
from mlpbench.results_store import BENCHMARKS, StoreError

ROOT = Path(__file__).resolve().parent.parent
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
BENCHMARK_DEFS = {"version": 2,
                  "asv_cases.GeluMulHost.time_host": {"version": "v1", "params": [["'a'"]]},
                  "asv_cases.MlpHost.time_host": {"version": "v1", "params": [["'b'"]]}}


def _git(repo, *args):
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _origin(tmp_path: Path) -> Path:
    """A bare repository whose main has one commit; no results branch yet."""
    seed = tmp_path / "seed"
    seed.mkdir()
    _git(seed, "init", "-q", "-b", "main")
    (seed / "README").write_text("project\n")
    _git(seed, "add", "README")
    _git(seed, "commit", "-qm", "one")
    _git(tmp_path, "clone", "-q", "--bare", str(seed), "origin.git")
    return tmp_path / "origin.git"


def _clone(origin: Path, where: Path) -> Path:
    _git(origin.parent, "clone", "-q", str(origin), str(where))
    return where


def _write_result(clone: Path, machine: str, tag: str, benchmarks: dict = BENCHMARK_DEFS) -> Path:
    folder = clone / "results" / "asv" / machine
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    (clone / BENCHMARKS).write_text(json.dumps(benchmarks, indent=4))
    path = folder / f"{tag}-existing-py.json"
    path.write_text(json.dumps({"commit_hash": tag, "params": {"machine": machine}, "results": {}}))
    return path


def _blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _on_branch(origin: Path, branch: str = "results") -> dict[str, str]:
    """path → blob hash of every file on `branch` of the bare repository."""
    listing = _git(origin, "ls-tree", "-r", branch)
    return {line.split("\t")[1]: line.split()[2] for line in listing.splitlines()}


def _local(clone: Path, machine: str) -> dict[str, str]:
    files = [p for p in (clone / "results" / "asv" / machine).rglob("*") if p.is_file()]
    return {p.relative_to(clone).as_posix(): _blob_sha(p.read_bytes()) for p in files}


def test_machines_pushing_at_the_same_moment_lose_nothing(tmp_path):
    origin = _origin(tmp_path)
    # A machine that no longer runs: its files are on the branch and in none of the clones.
    retired = _clone(origin, tmp_path / "retired")
    _write_result(retired, "v100", "0ldc0mm1")
    results_store.store(retired, "v100", attempts=1)
    before = _on_branch(origin)

    machines = ["h200", "h100", "l40s"]
    clones = {m: _clone(origin, tmp_path / m) for m in machines}
    attempts = []
    for night in range(10):
        for m, clone in clones.items():
            _write_result(clone, m, f"{night:08x}")
        start = threading.Barrier(len(machines))

        def push(machine):
            start.wait()
            return results_store.store(clones[machine], machine, attempts=10, backoff_s=0.05)

        with ThreadPoolExecutor(len(machines)) as pool:
            attempts += [done.attempts for done in pool.map(push, machines)]
        now = _on_branch(origin)
        assert before.items() <= now.items(), f"night {night}: files left the branch or changed"
        for m, clone in clones.items():
            mine = _local(clone, m)
            assert mine.items() <= now.items(), f"night {night}: {m}'s files are not all on the branch"
        before = now

    assert len([p for p in before if p.endswith("-existing-py.json")]) == 1 + 10 * len(machines)
    assert before[BENCHMARKS] == _blob_sha(json.dumps(BENCHMARK_DEFS, indent=4).encode())
    # Pushes were rejected and retried: the race this test is about did happen.
    assert max(attempts) > 1, attempts
    # Nothing new: no empty commit.
    tip = _git(origin, "rev-parse", "results")
    assert results_store.store(clones["h200"], "h200", attempts=1).commit is None
    assert _git(origin, "rev-parse", "results") == tip


def test_a_push_that_keeps_failing_exits_3_and_keeps_the_files(tmp_path):
    origin = _origin(tmp_path)
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'the results branch is frozen' >&2\nexit 1\n")
    hook.chmod(0o755)
    clone = _clone(origin, tmp_path / "h200")
    result = _write_result(clone, "h200", "abcdef01")

    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "store", "--machine", "h200", "--remote", "origin", "--repo", str(clone),
                           "--attempts", "3", "--backoff", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "after 3 attempts" in proc.stderr and "the results branch is frozen" in proc.stderr, proc.stderr
    assert "pre-receive hook declined" in proc.stderr and str(clone / "results" / "asv" / "h200") in proc.stderr
    assert proc.stdout.count("push rejected") == 3, proc.stdout
    assert result.is_file() and (clone / BENCHMARKS).is_file()
    assert _git(origin, "branch", "--list", "results") == ""


def test_benchmarks_json_that_differs_for_the_same_commit_is_refused(tmp_path):
    origin = _origin(tmp_path)
    first, second = _clone(origin, tmp_path / "h200"), _clone(origin, tmp_path / "h100")
    _write_result(first, "h200", "c0ffee00")
    results_store.store(first, "h200", attempts=1)
    tip = _git(origin, "rev-parse", "results")
    other = dict(BENCHMARK_DEFS, **{"asv_cases.MlpHost.time_host": {"version": "v2", "params": [["'b'"]]},
                                    "asv_cases.LinearHost.time_host": {"version": "v1", "params": [["'c'"]]}})
    result = _write_result(second, "h100", "c0ffee00", other)

    with pytest.raises(StoreError) as refused:
        results_store.store(second, "h100", attempts=3, backoff_s=0)

    message = str(refused.value)
    assert refused.value.status == 2
    assert str(second / BENCHMARKS) in message and f"origin/results:{BENCHMARKS}" in message, message
    assert "only here: asv_cases.LinearHost.time_host" in message, message
    assert "defined differently: asv_cases.MlpHost.time_host" in message, message
    assert "GeluMul" not in message, message
    assert _git(origin, "rev-parse", "results") == tip
    assert result.is_file()

    # A later commit may change the benchmarks: its definitions replace the branch's.
    _git(second, "commit", "-q", "--allow-empty", "-m", "two")
    done = results_store.store(second, "h100", attempts=1)
    assert BENCHMARKS in done.replaced
    assert _on_branch(origin)[BENCHMARKS] == _blob_sha((second / BENCHMARKS).read_bytes())
    # A late run of the earlier commit lands its results but leaves the newer definitions in place.
    _write_result(first, "h200", "0dd00dd0")
    done = results_store.store(first, "h200", attempts=1)
    assert "results/asv/h200/0dd00dd0-existing-py.json" in done.added and BENCHMARKS not in done.replaced
    assert _on_branch(origin)[BENCHMARKS] == _blob_sha((second / BENCHMARKS).read_bytes())


def test_bad_input_is_named(tmp_path):
    origin = _origin(tmp_path)
    clone = _clone(origin, tmp_path / "h200")
    with pytest.raises(StoreError, match=r"no results of machine 'a100'.*a100 is missing or empty"):
        results_store.store(clone, "a100")
    with pytest.raises(StoreError, match=r"machine name '\.\./x' is not a folder name"):
        results_store.store(clone, "../x")
    with pytest.raises(StoreError, match="attempts 0: need at least 1"):
        results_store.store(clone, "h200", attempts=0)
    with pytest.raises(StoreError, match="is not a git checkout"):
        results_store.store(tmp_path, "h200")


def test_store_pushes_nowhere_without_a_named_remote(tmp_path):
    origin = _origin(tmp_path)
    clone = _clone(origin, tmp_path / "h200")
    _write_result(clone, "h200", "abcdef01")
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "store", "--machine", "h200", "--repo", str(clone)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--remote" in proc.stderr, proc.stderr
    assert _git(origin, "branch", "--list", "results") == ""


def _write_codegen(clone: Path, *fingerprints: int) -> None:
    from mlpbench.compile import codegen_record

    for fp in fingerprints:
        codegen_record.store({"fingerprint": fp, "kernels": [], "settings": {}, "mode": "default"}, clone / "results")


def test_every_machines_codegen_records_end_up_in_the_one_file_on_the_branch(tmp_path):
    from mlpbench.compile import codegen_record

    origin = _origin(tmp_path)
    first, second = _clone(origin, tmp_path / "h200"), _clone(origin, tmp_path / "h100")
    _write_result(first, "h200", "c0ffee00")
    _write_codegen(first, 1, 2)
    results_store.store(first, "h200", attempts=1)
    # the second machine's file holds one record in common and one of its own, never the first's other
    _write_result(second, "h100", "c0ffee00")
    _write_codegen(second, 2, 3)
    done = results_store.store(second, "h100", attempts=1)
    assert results_store.CODEGEN in done.replaced
    on_branch = _git(origin, "show", f"results:{results_store.CODEGEN}")
    assert sorted(codegen_record.parse(on_branch, "branch")) == ["1", "2", "3"]
    # nothing new: the branch's copy already holds every record, so no commit
    assert results_store.store(first, "h200", attempts=1).commit is None


def test_a_branch_codegen_file_that_cannot_be_read_is_not_replaced(tmp_path):
    origin = _origin(tmp_path)
    first, second = _clone(origin, tmp_path / "h200"), _clone(origin, tmp_path / "h100")
    _write_result(first, "h200", "c0ffee00")
    codegen = first / results_store.CODEGEN
    codegen.parent.mkdir(parents=True, exist_ok=True)
    codegen.write_text(json.dumps({"version": 99, "records": {}}))
    _git(first, "add", "-f", results_store.CODEGEN)
    _git(first, "commit", "-qm", "a newer layout")
    _git(first, "push", "-q", "origin", "HEAD:refs/heads/results")
    tip = _git(origin, "rev-parse", "results")
    _write_result(second, "h100", "c0ffee00")
    _write_codegen(second, 7)
    with pytest.raises(StoreError, match=r"origin/results:results/codegen.json: codegen file version 99") as refused:
        results_store.store(second, "h100", attempts=1)
    assert refused.value.status == 2 and _git(origin, "rev-parse", "results") == tip


def test_a_store_onto_main_adds_results_paths_only_on_top_of_mains_tip(tmp_path):
    origin = _origin(tmp_path)
    clone = _clone(origin, tmp_path / "h200")
    # main moves on after the checkout (a merge during the night): the store builds on the new tip
    other = _clone(origin, tmp_path / "dev")
    (other / "CHANGES").write_text("a merge\n")
    _git(other, "add", "CHANGES")
    _git(other, "commit", "-qm", "merged")
    _git(other, "push", "-q", "origin", "HEAD:main")
    merged = _git(origin, "rev-parse", "main")
    _write_result(clone, "h200", "c0ffee00")
    _write_codegen(clone, 1)
    done = results_store.store(clone, "h200", branch="main", attempts=2, backoff_s=0)
    assert _git(origin, "rev-parse", "main") == done.commit
    assert _git(origin, "rev-parse", "main^") == merged
    changed = _git(origin, "diff", "--name-only", merged, "main").splitlines()
    assert changed and all(path.startswith("results/") for path in changed), changed
    assert {"README", "CHANGES"} <= set(_on_branch(origin, "main"))
