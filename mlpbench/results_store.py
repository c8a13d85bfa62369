"""`mlpbench store`: put one machine's ASV results on a shared branch, losing nothing.

    mlpbench store --machine NAME --remote REMOTE [--repo DIR] [--branch main]
                   [--attempts 5] [--backoff SECONDS]

The nightly workflow names `--branch main`: main's results/ is where the history lives, and the
store's commit touches results paths only, on top of main's tip as fetched. Every machine of the
nightly fleet pushes to the same branch, so pushes race: when two runners finish together, one
push is rejected. The store never merges working trees. It builds the new
branch commit from the branch tip as fetched plus this machine's files (results/asv/<machine>/**,
results/asv/benchmarks.json, the codegen records results/codegen.json, the nightly's wall times
results/nightly/<machine>.json and its same-box confirmations results/confirmations/<machine>/*.json),
in a private index, and pushes it without force. On a rejected push it fetches the new tip and
builds again on top of it: result files are per machine and commit, so the other machines' files
come along as additions. Files of other machines are never touched; a file of this machine's
folder that changed (a second run of a commit adds to its file) replaces the branch's copy. The
codegen records of every machine share one file: the branch's copy gets this machine's records
that it lacks, record by record (mlpbench/compile/codegen_record.py, merge), and is never replaced. If the
branch does not exist it is created without history.

results/asv/benchmarks.json describes the benchmarks of one measured commit, and ASV shows only
results whose benchmark versions it lists. Each store commit records the commit it measured
(a `Measured-commit:` line), so the store knows which commit the branch's copy was written for:
- the same commit: the two copies must be identical; a differing one is refused, naming both
  files and the benchmarks that differ, and nothing is pushed (machines disagree on what they
  measured: another tier, other code);
- an ancestor of the measured commit (or unknown): the newer definitions replace it;
- any other commit (a late run of an older commit): the branch's copy is kept.

Exit status: 0 stored (or nothing new), 2 bad input or a refused benchmarks.json, 3 the push kept
failing. The store never moves or deletes a file of results/asv: when it fails, the night's files
are still there for the workflow's artifact.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .compile import codegen_record

BENCHMARKS = "results/asv/benchmarks.json"
CODEGEN = f"results/{codegen_record.FILE}"
MEASURED = "Measured-commit"
# Who the store commits as when the checkout names nobody (a CI runner, a test's clone).
IDENTITY = ("mlpbench nightly", "mlpbench-nightly@users.noreply.github.com")


class StoreError(Exception):
    """The store did not push; `status` is the exit status, the message says why."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass
class Stored:
    commit: str | None  # the branch commit holding the files; None when the branch had them all
    attempts: int  # pushes tried, the successful one included
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def _git(repo: Path, *args: str, env: dict | None = None, stdin: str | None = None,
         check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, text=True)
    if check and proc.returncode:
        raise StoreError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}", 2)
    return proc


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def _push_error(stderr: str) -> str:
    """What the remote said and the rejected ref's line, without git's hints."""
    lines = [ln.strip() for ln in stderr.splitlines()]
    said = [ln for ln in lines if ln.startswith(("remote:", "!", "fatal:"))]
    return " / ".join(said) if said else _last_line("\n".join(ln for ln in lines if not ln.startswith("hint:")))


def _fetch(repo: Path, remote: str, branch: str) -> tuple[str | None, str | None]:
    """(tip of the remote branch or None when it does not exist, error or None)."""
    fetched = _git(repo, "fetch", "-q", "--no-tags", remote, f"refs/heads/{branch}", check=False)
    if fetched.returncode == 0:
        return _git(repo, "rev-parse", "FETCH_HEAD").stdout.strip(), None
    listed = _git(repo, "ls-remote", "--exit-code", remote, f"refs/heads/{branch}", check=False)
    if listed.returncode == 2:  # the remote answered: no such branch
        return None, None
    return None, f"fetch of {remote}/{branch} failed: {_last_line(fetched.stderr)}"


def _benchmark_names(doc: dict) -> set[str]:
    return {k for k in doc if k != "version"}


def _benchmarks_difference(ours: dict, theirs: dict) -> str:
    def some(names):
        names = sorted(names)
        return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

    parts = []
    here, there = _benchmark_names(ours), _benchmark_names(theirs)
    only_ours, only_theirs = here - there, there - here
    changed = {k for k in here & there if ours[k] != theirs[k]}
    if ours.get("version") != theirs.get("version"):
        parts.append(f"file version {ours.get('version')!r} here, {theirs.get('version')!r} on the branch")
    if only_ours:
        parts.append(f"only here: {some(only_ours)}")
    if only_theirs:
        parts.append(f"only on the branch: {some(only_theirs)}")
    if changed:
        parts.append(f"defined differently: {some(changed)}")
    return "; ".join(parts)


def _measured_for(repo: Path, tip: str) -> str | None:
    """The measured commit the branch's benchmarks.json was stored for (None: not recorded)."""
    body = _git(repo, "log", "-1", "--format=%B", tip, "--", BENCHMARKS).stdout
    found = re.search(rf"^{MEASURED}: ([0-9a-f]{{40}})$", body, re.M)
    return found.group(1) if found else None


def _take_our_benchmarks(repo: Path, tip: str | None, ours: Path, mine: dict, measured: str, remote: str,
                         branch: str) -> bool:
    """Whether our benchmarks.json (`mine`, read from `ours`) goes onto the branch; StoreError when
    it contradicts the branch's."""
    if tip is None:
        return True
    shown = _git(repo, "show", f"{tip}:{BENCHMARKS}", check=False)
    if shown.returncode:
        return True  # the branch has none yet
    try:
        theirs = json.loads(shown.stdout)
    except ValueError:
        return True  # a broken copy hides every result from `asv publish`: ours repairs it
    if theirs == mine:
        return False
    stored_for = _measured_for(repo, tip)
    if stored_for == measured:
        raise StoreError(
            f"{ours} (commit {measured[:8]}, this machine) differs from {remote}/{branch}:{BENCHMARKS} "
            f"(stored for the same commit by another machine): {_benchmarks_difference(mine, theirs)}. "
            f"Machines that measure one commit must run the same benchmarks (same tier, same code). "
            f"Nothing was pushed; this machine's files are still in {ours.parent}.", 2)
    if stored_for is None:
        return True
    newer = _git(repo, "merge-base", "--is-ancestor", stored_for, measured, check=False).returncode == 0
    if not newer:
        print(f"mlpbench: store: kept {remote}/{branch}:{BENCHMARKS}, written for {stored_for[:8]}, "
              f"which {measured[:8]} does not descend from", flush=True)
    return newer


def _codegen_blob(repo: Path, tip: str | None, ours: dict[str, dict], remote: str, branch: str) -> str | None:
    """The blob of the branch's codegen.json with our records merged in; None when the branch's copy
    holds them all. StoreError when the branch's copy cannot be read: merging into it is the only way
    to lose no other machine's record."""
    theirs, present = {}, False
    if tip is not None:
        shown = _git(repo, "show", f"{tip}:{CODEGEN}", check=False)
        if shown.returncode == 0:
            present = True
            try:
                theirs = codegen_record.parse(shown.stdout, f"{remote}/{branch}:{CODEGEN}")
            except ValueError as exc:
                raise StoreError(f"{exc}; nothing was pushed", 2) from None
    merged = codegen_record.merge(theirs, ours)
    if present and merged == theirs:
        return None
    return _git(repo, "hash-object", "-w", "--stdin", stdin=codegen_record.dumps(merged)).stdout.strip()


def _identity(repo: Path) -> list[str]:
    if _git(repo, "config", "user.email", check=False).stdout.strip():
        return []
    return ["-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}"]


def _commit(repo: Path, tip: str | None, blobs: dict[str, str],
            message: str) -> tuple[str | None, list[str], list[str]]:
    """(new commit on top of `tip` holding `blobs` by path, or None when `tip` holds them all;
    paths added; paths replaced)."""
    with tempfile.TemporaryDirectory(prefix="mlpbench-store-") as tmp:
        env = os.environ | {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "read-tree", *([tip] if tip else ["--empty"]), env=env)
        _git(repo, "update-index", "--add", "--index-info", env=env,
             stdin="".join(f"100644 {sha}\t{path}\n" for path, sha in blobs.items()))
        tree = _git(repo, "write-tree", env=env).stdout.strip()
    if tip is None:
        return _git(repo, *_identity(repo), "commit-tree", tree, "-m", message).stdout.strip(), sorted(blobs), []
    changes = _git(repo, "diff-tree", "-r", "--no-renames", "--name-status", tip, tree).stdout.splitlines()
    if not changes:
        return None, [], []
    added = sorted(ln.split("\t", 1)[1] for ln in changes if ln.startswith("A"))
    replaced = sorted(ln.split("\t", 1)[1] for ln in changes if ln.startswith("M"))
    commit = _git(repo, *_identity(repo), "commit-tree", tree, "-p", tip, "-m", message).stdout.strip()
    return commit, added, replaced


def store(repo: Path, machine: str, remote: str = "origin", branch: str = "results", attempts: int = 5,
          backoff_s: float = 2.0) -> Stored:
    """Push results/asv/<machine>/**, results/asv/benchmarks.json, the codegen records (merged),
    results/nightly/<machine>.json and results/confirmations/<machine>/*.json of `repo` onto `branch`
    of `remote`, recorded as measured at `repo`'s checked-out commit.

    Retries a failed push up to `attempts` times in all, waiting about `backoff_s` × the attempt
    number (jittered, so racing machines fall out of step) between tries. Raises StoreError."""
    if attempts < 1:
        raise StoreError(f"attempts {attempts}: need at least 1", 2)
    if backoff_s < 0:
        raise StoreError(f"backoff {backoff_s} s: must not be negative", 2)
    if not machine or machine in (".", "..") or "/" in machine or "\\" in machine:
        raise StoreError(f"machine name {machine!r} is not a folder name", 2)
    top = _git(Path(repo), "rev-parse", "--show-toplevel", check=False)
    if top.returncode:
        raise StoreError(f"{repo} is not a git checkout", 2)
    root = Path(top.stdout.strip())
    measured = _git(root, "rev-parse", "HEAD").stdout.strip()
    folder = root / "results" / "asv" / machine
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if not files:
        raise StoreError(f"no results of machine {machine!r} to store: {folder} is missing or empty", 2)
    # What Inductor generated, by fingerprint (mlpbench/compile/codegen.py): one file shared by every machine,
    # content-addressed, so a fingerprint another machine pushed first holds the same record.
    try:
        codegen = codegen_record.read_all(root / "results")
    except ValueError as exc:
        raise StoreError(f"{exc}; nothing was pushed", 2) from None
    # The nightly's wall times on this machine (mlpbench/nightly.py), read by the next night.
    nights = root / "results" / "nightly" / f"{machine}.json"
    files += [nights] if nights.is_file() else []
    # Which of its regressions the nightly measured again on this box (mlpbench/judging/confirm.py), one file a night.
    confirmed = root / "results" / "confirmations" / machine
    files += sorted(confirmed.glob("*.json")) if confirmed.is_dir() else []
    benchmarks = root / BENCHMARKS
    paths = [p.relative_to(root).as_posix() for p in files] + ([BENCHMARKS] if benchmarks.is_file() else [])
    # Hashed once: what is pushed is the files as they were when the store began.
    shas = _git(root, "hash-object", "-w", "--stdin-paths", stdin="".join(f"{p}\n" for p in paths)).stdout.split()
    ours = dict(zip(paths, shas))
    benchmarks_blob = ours.pop(BENCHMARKS, None)
    try:
        mine = json.loads(benchmarks.read_text()) if benchmarks_blob else None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{benchmarks} is not readable JSON: {exc}", 2) from exc
    message = f"results: {machine} at {measured[:8]}\n\nMachine: {machine}\n{MEASURED}: {measured}\n"

    error = None
    for attempt in range(1, attempts + 1):
        if attempt > 1:
            time.sleep(backoff_s * (attempt - 1) * random.uniform(0.5, 1.5))
        tip, error = _fetch(root, remote, branch)
        if error:
            print(f"mlpbench: store: attempt {attempt}/{attempts}: {error}", flush=True)
            continue
        blobs = dict(ours)
        if benchmarks_blob and _take_our_benchmarks(root, tip, benchmarks, mine, measured, remote, branch):
            blobs[BENCHMARKS] = benchmarks_blob
        codegen_blob = _codegen_blob(root, tip, codegen, remote, branch) if codegen else None
        if codegen_blob:
            blobs[CODEGEN] = codegen_blob
        commit, added, replaced = _commit(root, tip, blobs, message)
        if commit is None:
            return Stored(None, attempt)
        pushed = _git(root, "push", "-q", remote, f"{commit}:refs/heads/{branch}", check=False)
        if pushed.returncode == 0:
            return Stored(commit, attempt, added, replaced)
        error = f"push rejected: {_push_error(pushed.stderr)}"
        print(f"mlpbench: store: attempt {attempt}/{attempts}: {error}", flush=True)
    raise StoreError(
        f"could not store {len(ours)} files of {machine} on {remote}/{branch} after {attempts} attempts; "
        f"last error: {error}. The files are still in {folder}.", 3)


def run(args) -> int:
    """The `mlpbench store` command."""
    try:
        done = store(args.repo, args.machine, args.remote, args.branch, args.attempts, args.backoff)
    except StoreError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return exc.status
    if done.commit is None:
        print(f"mlpbench: store: {args.remote}/{args.branch} already holds every result of {args.machine}")
    else:
        print(f"mlpbench: store: {args.remote}/{args.branch} at {done.commit[:8]}: {len(done.added)} files added, "
              f"{len(done.replaced)} replaced ({done.attempts} attempt{'s' if done.attempts > 1 else ''})")
        for path in done.replaced:
            print(f"  replaced {path}")
    return 0
