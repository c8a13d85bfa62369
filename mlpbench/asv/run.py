"""The plain `asv run` that `mlpbench asv` and `mlpbench nightly` start, built from their arguments."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import registry


def shown(cmd: list[str], longest: int = 160) -> str:
    """`cmd` as a line to print: an argument longer than `longest` (a --bench expression of every case)
    cut short, with its length."""
    return " ".join(a if len(a) <= longest else f"{a[:longest]}… ({len(a):,} characters)" for a in cmd)


def bench_cases(tier: str) -> str:
    """asv_tiers.bench(tier) narrowed to what is measured: of each op class, the parameter combinations that are
    cases ($MLPBENCH_CASES selects), and the compile-tax classes whole.

    ASV forks a process for every parameter combination a --bench expression selects, and runs its
    `setup` there only to learn that most combinations of variant × dtype × shape are not cases; a
    combination this leaves out is never started, and ASV files it as n/a, as it files a skip.
    ASV matches an expression against `<name>(<param reprs>)` for each combination (asv.benchmarks)."""
    import re

    from .compile import compile_classes
    from .tiers import selected

    by_op: dict[str, list[str]] = {}
    for c in registry.select(tier):
        by_op.setdefault(c.op, []).append(c.id)
    alternatives = []
    for op, ids in by_op.items():
        chosen = set(selected(ids))
        combos = [", ".join(repr(v) for v in (c.variant, c.dtype, c.shape.id))
                  for c in registry.select(tier, ops=[op]) if c.id in chosen]
        if combos:
            alternatives.append(rf"{registry.class_name(op)}(?:Device|Host|Codegen)\.\w+\("
                                rf"(?:{'|'.join(re.escape(x) for x in combos)})\)$")
    alternatives += [rf"{re.escape(name)}\." for name in compile_classes(tier)]
    return rf"^{tier}\.(?:{'|'.join(alternatives)})"


def tier_ok(tier: str) -> bool:
    """False, after saying why on stderr, when `tier` is not one of the registry's tiers."""
    try:
        registry.select(tier)
    except registry.SelectionError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return False
    return True


def command(args) -> tuple[list[str], str, str] | int:
    """The plain `asv run` that `mlpbench asv` and the nightly run, the commit it records and the
    machine it records for; an exit status instead on bad input. What it adds to ASV: this Python as
    an existing environment, the commit hash (ASV records nothing in one without it), the tier's family
    as --bench (bench_cases), and the machine's registration (mlpbench.asv.machine)."""
    import subprocess

    from .machine import register
    from .tiers import GROUPED_ENV
    from ..runner import default_device

    if args.tier and not tier_ok(args.tier):
        return 2
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.repo, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        print(f"mlpbench: error: {args.repo} is not a git checkout; ASV records results under a commit hash",
              file=sys.stderr)
        return 2
    machine = register(args.machine)["machine"]
    # the tier's family, narrowed to the combinations that are cases: ASV starts no process for the rest;
    # the ops of each of mlpbench run's process groups measured in one setup_cache (asv_tiers.GROUPED_ENV),
    # inherited by the asv run started from this process
    if not args.bench:
        os.environ[GROUPED_ENV] = "1"
    try:
        bench = args.bench or bench_cases(args.tier or ("standard" if default_device() == "cuda" else "quick"))
    except registry.SelectionError as exc:  # a bad $MLPBENCH_CASES, named
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return 2
    return [sys.executable, "-m", "asv", "run", "--environment", f"existing:{sys.executable}",
            "--set-commit-hash", head, "--machine", machine, "--bench", bench], head, machine


def ahead(args, say, overlap: bool = False):
    """precompile.ahead for the cases of `precompile_cases(args)`, with the default workers: what
    `mlpbench asv` and the nightly hold around their `asv run` (`overlap`: started while they compile)."""
    from ..compile import precompile

    cases = precompile_cases(args)
    return precompile.ahead(cases, precompile.auto_workers(cases), say=say, overlap=overlap)


def precompile_cases(args) -> list:
    """The cases whose first calls are made ahead of `asv run` (mlpbench/compile/precompile.py): the tier's that
    $MLPBENCH_CASES selects; none when --bench names benchmarks of its own."""
    if getattr(args, "bench", None):
        return []
    from .tiers import selected
    from ..runner import default_device

    tier = getattr(args, "tier", None) or ("standard" if default_device() == "cuda" else "quick")
    try:
        ids = set(selected([c.id for c in registry.select(tier)]))
    except registry.SelectionError:
        return []  # a bad $MLPBENCH_CASES: nothing made ahead; the benchmarks' setup_cache names it
    return [c for c in registry.select(tier) if c.id in ids]


def family(args, bench: str) -> str:
    """What a night's benchmarks are called in the nightly's history: the `--bench` expression `bench`,
    or, where it is bench_cases' expression of the tier, the tier's family with a digest of it, so that
    two nights compare only when they ran the same cases."""
    import hashlib

    from .tiers import bench as tier_bench
    from ..runner import default_device

    tier = getattr(args, "tier", None) or ("standard" if default_device() == "cuda" else "quick")
    if getattr(args, "bench", None) or bench != bench_cases(tier):
        return bench
    return f"{tier_bench(tier)} cases {hashlib.sha256(bench.encode()).hexdigest()[:12]}"


def plain_setup_cache_keys(path: Path) -> bool:
    """Rewrite ASV's benchmarks.json at `path` (written by a run with $MLPBENCH_ASV_GROUPED) as a plain
    `asv run` writes it: each op class's setup_cache key its own op's, not its group's, and each
    compile-tax class's its own. The key is the only field grouping changes (the function is the same);
    the file is committed and compared between machines (results_store), so one family has one file
    however it was run. Whether it changed."""
    import json

    from asv import util

    if not path.is_file():
        return False
    doc = json.loads(path.read_text())
    version = doc.pop("version", None)
    from .compile import CLASSES

    own = {f"{registry.class_name(op)}{kind}": registry.class_name(op) for op in registry.OPS
           for kind in ("Device", "Host", "Codegen")} | {name: name for name in CLASSES}
    changed = False
    for name, bench in doc.items():
        parts = name.split(".")
        key = bench.get("setup_cache_key") if isinstance(bench, dict) else None
        if len(parts) < 3 or parts[1] not in own or not key or ":" not in key:
            continue
        module, line = key.rsplit(":", 1)
        plain = f"{module.rsplit('.', 1)[0]}.{own[parts[1]]}:{line}"  # the group's name made the op's
        if key != plain:
            bench["setup_cache_key"], changed = plain, True
    if changed:
        util.write_json(str(path), doc, version)
    return changed
