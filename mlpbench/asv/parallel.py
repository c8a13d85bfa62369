"""Every GPU of a box for one `asv run`: one ASV process per GPU, their results merged into the one file.

`split` divides the benchmark classes a --bench expression selects into parts, keeping together the
classes that share a setup_cache (an op's Device, Host and Codegen classes of one tier: split, they
would measure the op twice). `record` runs one `asv run` per part at once, part k on GPU k
(CUDA_VISIBLE_DEVICES), each with a copy of asv.conf.json whose results_dir is a folder of its own,
then merges the parts' result files into results/asv/<machine>/<commit>-<env>.json, the one file
`asv publish` and the gate read, as one `asv run` would have written it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# Tests and fake devices: this many GPUs, whatever torch sees.
GPUS_ENV = "MLPBENCH_GPUS"
# ASV's benchmark kinds, by method prefix (asv_runner.benchmarks).
_KINDS = ("time_", "timeraw_", "track_", "mem_", "peakmem_")
# What a Results object keeps per benchmark (the dicts asv.results.Results.load_data carries over).
_PER_BENCHMARK = ("_results", "_samples", "_stats", "_benchmark_params", "_profiles", "_started_at", "_duration",
                  "_benchmark_version")


class MergeError(ValueError):
    """Part result files that cannot be one file: another commit, environment, machine or parameters."""


def gpu_count() -> int:
    """The GPUs `record` spreads over: $MLPBENCH_GPUS when set, else what torch sees, at least 1."""
    if os.environ.get(GPUS_ENV):
        if not os.environ[GPUS_ENV].strip().isdigit():
            raise ValueError(f"{GPUS_ENV}={os.environ[GPUS_ENV]!r}: expected a number of GPUs")
        return max(1, int(os.environ[GPUS_ENV]))
    try:
        import torch
    except ImportError:
        return 1
    return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1


def _device(k: int) -> str:
    # Part k takes the k-th GPU this process may use (the runner may have narrowed them already).
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return visible[k].strip() if k < len(visible) else str(k)


def groups(bench_regex: str) -> list[tuple[list[str], int, bool]]:
    """The classes `bench_regex` selects ('<tier>.<Class>'), grouped by the setup_cache they share, each
    group with its weight (the cases its setup_cache measures here) and whether the regex selects every
    benchmark of its classes: [(classes, weight, whole)], in registry order."""
    from asv_runner.benchmarks._base import get_setup_cache_key

    from .. import registry
    from .suite import classes

    rx = re.compile(bench_regex)
    by_key: dict[str, list] = {}
    for tier in registry.TIERS:
        for cls_name, cls in classes(tier).items():
            methods = sorted(m for m in vars(cls) if m.startswith(_KINDS))
            combos = [", ".join(repr(v) for v in values) for values in itertools.product(*cls.params)]
            names = [f"{tier}.{cls_name}.{m}" + (f"({c})" if cls.params else "") for m in methods for c in combos]
            hits = [n for n in names if rx.search(n)]
            if not hits:
                continue
            cache = vars(cls).get("setup_cache")
            key = f"{tier}:{get_setup_cache_key(cache) if cache else cls_name}"
            group = by_key.setdefault(key, [[], cls, True])
            group[0].append(f"{tier}.{cls_name}")
            group[2] = group[2] and len(hits) == len(names)
    out = []
    for members, cls, whole in by_key.values():
        measured = sum(1 for entry in cls.dry_cache().values() if "skip" not in entry)
        out.append((members, measured, whole))
    return out


def _regex(members: list[str], bench_regex: str, whole: bool) -> str:
    by_tier: dict[str, list[str]] = {}
    for m in members:
        tier, name = m.split(".", 1)
        by_tier.setdefault(tier, []).append(name)
    alt = "|".join(f"{re.escape(t)}\\.(?:{'|'.join(re.escape(n) for n in names)})" for t, names in by_tier.items())
    # Narrower than whole classes (parameters, methods): the part also has to match the original.
    narrow = "" if whole else f"(?=.*(?:{bench_regex}))"
    return f"^{narrow}(?:{alt})\\."


def split(bench_regex: str, n: int) -> list[str]:
    """`bench_regex` as at most n anchored --bench expressions that together select what it selects, each
    benchmark in exactly one; an op's classes of one tier stay in one part, parts balanced by the cases
    their setup_caches measure (largest first into the lightest part). [bench_regex] when nothing
    matches or n == 1."""
    found = groups(bench_regex)
    if n <= 1 or len(found) <= 1:
        return [bench_regex]
    parts: list[list] = [[[], 0, True, 0] for _ in range(min(n, len(found)))]  # members, weight, whole, groups
    for members, weight, whole in sorted(found, key=lambda g: -g[1]):  # stable: registry order among equals
        part = min(parts, key=lambda p: (p[1], p[3]))
        part[0] += members
        part[1] += weight
        part[2] = part[2] and whole
        part[3] += 1
    return [_regex(members, bench_regex, whole) for members, _, whole, _ in parts]


# --- merging the parts' result files ---------------------------------------------------------------


def _entry(res, name: str) -> str:
    return json.dumps([getattr(res, a).get(name) for a in _PER_BENCHMARK], sort_keys=True, default=str)


def _identity(res) -> dict:
    return {"commit": res.commit_hash, "env": res.env_name, "machine": res.params.get("machine"),
            "params": res.params}


def merge(parts: list[Path], into: Path) -> None:
    """Write into `into` (results/asv/<machine>/<commit>-<env>.json) the results of the part files,
    which were each started from a copy of `into` where it existed (as one `asv run` loads it): from
    each part, what differs from that copy. MergeError naming both files where two parts disagree on
    commit, environment, machine or parameters, or where `into` holds another commit."""
    from asv.results import Results

    if not parts:
        raise ValueError("no part result files to merge")
    seed = Results.load(str(into)) if into.is_file() else None
    merged, first, owner = None, parts[0], {}

    def fresh(res, name):  # recorded by this part, not carried over from `into`
        return seed is None or _entry(res, name) != _entry(seed, name)

    for path in parts:
        res = Results.load(str(path))
        if merged is None:
            merged = res
            if seed is not None and seed.commit_hash != res.commit_hash:
                raise MergeError(f"{path} and {into}: different commit ({res.commit_hash!r} vs {seed.commit_hash!r})")
            for name in [*seed.get_all_result_keys(), *seed.duration] if seed is not None else []:
                if name not in res.get_all_result_keys() and name not in res.duration:  # kept, as ASV keeps them
                    for attr in _PER_BENCHMARK:
                        if name in getattr(seed, attr):
                            getattr(merged, attr)[name] = getattr(seed, attr)[name]
        else:
            mine, theirs = _identity(res), _identity(merged)
            for field in ("commit", "env", "machine", "params"):
                if mine[field] != theirs[field]:
                    raise MergeError(f"{first} and {path}: different {field} ({theirs[field]!r} vs {mine[field]!r})")
        names = [*res.get_all_result_keys(), *(k for k in res.duration if k.startswith("<"))]
        for name in names:
            if not fresh(res, name):
                continue
            if name == "<build>":  # each part's own (nil for an existing environment): the longest
                merged.duration[name] = max(merged.duration.get(name) or 0.0, res.duration[name] or 0.0)
                continue
            if name in owner and owner[name] != path and _entry(merged, name) != _entry(res, name):
                raise MergeError(f"{owner[name]} and {path}: both recorded {name}")
            owner[name] = path
            if res is not merged:
                for attr in _PER_BENCHMARK:
                    value = getattr(res, attr).get(name)
                    if value is not None or name in getattr(res, attr):
                        getattr(merged, attr)[name] = value
    # Results.save writes to <results_dir>/<machine>/<file>; written beside the parts, then renamed in.
    staging = Path(tempfile.mkdtemp(prefix=".merge-", dir=parts[0].parent.parent))
    try:
        merged.save(str(staging))  # under <machine>/<commit>-<env>.json, the name of the files it came from
        into.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(staging / first.parent.name / first.name, into)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --- running the parts ----------------------------------------------------------------------------


def _arg(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def _config(repo: Path) -> dict:
    from asv import util

    return util.load_json(str(repo / "asv.conf.json"), js_comments=True)


def _pump(stream, prefix: str) -> None:
    for line in stream:
        sys.stdout.write(f"{prefix}{line}")
        sys.stdout.flush()


def record(cmd: list[str], repo: Path, n: int, say=print) -> int:
    """Run the `asv run` command `cmd` (with --bench, --machine and --set-commit-hash) in `repo`: as it
    is on one GPU; on n > 1 as one process per GPU over split(--bench, n), their results merged into
    the one file of the commit. The exit status: non-zero when a part failed (after merging what the
    others recorded) or the parts could not be merged."""
    repo = Path(repo).resolve()
    bench = _arg(cmd, "--bench")
    if n <= 1 or bench is None:
        return subprocess.run(cmd, cwd=repo).returncode
    try:
        benches = split(bench, n)
    except re.error:
        benches = [bench]  # not a regular expression: ASV itself says so
    if len(benches) == 1:
        return subprocess.run(cmd, cwd=repo).returncode
    conf = _config(repo)
    machine, commit = _arg(cmd, "--machine"), _arg(cmd, "--set-commit-hash")
    # Every part's ASV loads the machine file and refreshes a stale entry in it: refreshed once here,
    # no two parts write it at once.
    from .machine import register

    register(machine)
    results_dir = (repo / conf.get("results_dir", "results")).resolve()
    # Inside .asv/ (git ignores it), on the filesystem of results/ so that the merged file is renamed in.
    (repo / ".asv").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="parallel-", dir=repo / ".asv"))
    configs, procs, pumps = [], [], []
    try:
        for k, part_bench in enumerate(benches):
            part_results = work / str(k)
            seed_dir = part_results / machine if machine else None
            if machine and commit:  # each part starts from the commit's file, as one `asv run` would
                seed_dir.mkdir(parents=True)
                for existing in (results_dir / machine).glob(f"{commit[:8]}-*.json"):
                    shutil.copy2(existing, seed_dir / existing.name)
            # In the repository root: repo, benchmark_dir and plugins in it are relative to its folder.
            config = repo / f".asv-part-{os.getpid()}-{k}.json"
            config.write_text(json.dumps(conf | {"results_dir": str(part_results)}, indent=1))
            configs.append(config)
            at = cmd.index("run") + 1
            part_cmd = [*cmd[:at], "--config", str(config), *cmd[at:]]
            part_cmd[part_cmd.index("--bench") + 1] = part_bench
            device = _device(k)
            from .run import shown

            say(f"record part {k + 1}/{len(benches)} on GPU {device}: {shown([part_bench])}")
            proc = subprocess.Popen(part_cmd, cwd=repo, env=os.environ | {"CUDA_VISIBLE_DEVICES": device},
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                    encoding="utf-8", errors="replace")
            procs.append(proc)
            pump = threading.Thread(target=_pump, args=(proc.stdout, f"[part {k + 1}] "), daemon=True)
            pump.start()
            pumps.append(pump)
        codes = []
        for k, (proc, pump) in enumerate(zip(procs, pumps)):
            codes.append(proc.wait())
            pump.join()
            say(f"record part {k + 1}/{len(benches)}: {'done' if codes[-1] == 0 else f'FAILED (exit {codes[-1]})'}")
        status = next((c for c in codes if c != 0), 0)
        if not machine:
            say("record: no --machine in the command; nothing merged")
            return status or 1
        files: dict[str, list[Path]] = {}
        for k in range(len(benches)):
            for f in sorted((work / str(k) / machine).glob("*.json")):
                if f.name != "machine.json":
                    files.setdefault(f.name, []).append(f)
        if not files:
            say("record: no part recorded a result file")
            return status or 1
        try:
            for name, paths in files.items():
                merge(paths, results_dir / machine / name)
                say(f"record: merged {len(paths)} part(s) into {results_dir / machine / name}")
        except MergeError as exc:
            say(f"record: FAILED to merge: {exc}")
            return status or 1
        # What each `asv run` writes beside its results: the machine's entry and the benchmark set.
        for k in range(len(benches)):
            for rel in (Path(machine) / "machine.json", Path("benchmarks.json")):
                if (work / str(k) / rel).is_file():
                    (results_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(work / str(k) / rel, results_dir / rel)
        return status
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for config in configs:
            config.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
