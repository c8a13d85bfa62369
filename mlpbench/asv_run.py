"""The plain `asv run` that `mlpbench asv` and `mlpbench nightly` start, built from their arguments."""

from __future__ import annotations

import sys

from . import registry


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
    as --bench (asv_tiers.bench), and the machine's registration (mlpbench.asv_machine)."""
    import subprocess

    from .asv_machine import register
    from .runner import default_device

    if args.tier and not tier_ok(args.tier):
        return 2
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.repo, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        print(f"mlpbench: error: {args.repo} is not a git checkout; ASV records results under a commit hash",
              file=sys.stderr)
        return 2
    from .asv_tiers import bench as tier_bench

    machine = register(args.machine)["machine"]
    bench = args.bench or tier_bench(args.tier or ("standard" if default_device() == "cuda" else "quick"))
    return [sys.executable, "-m", "asv", "run", "--environment", f"existing:{sys.executable}",
            "--set-commit-hash", head, "--machine", machine, "--bench", bench], head, machine


def ahead(args, say):
    """precompile.ahead for the cases of `precompile_cases(args)`, with the default workers: what
    `mlpbench asv` and the nightly hold around their `asv run`."""
    from . import precompile

    cases = precompile_cases(args)
    return precompile.ahead(cases, precompile.auto_workers(cases), say=say)


def precompile_cases(args) -> list:
    """The cases whose first calls are made ahead of `asv run` (mlpbench/precompile.py): the tier's that
    $MLPBENCH_CASES selects; none when --bench names benchmarks of its own."""
    if getattr(args, "bench", None):
        return []
    from .asv_tiers import selected
    from .runner import default_device

    tier = getattr(args, "tier", None) or ("standard" if default_device() == "cuda" else "quick")
    try:
        ids = set(selected([c.id for c in registry.select(tier)]))
    except registry.SelectionError:
        return []  # a bad $MLPBENCH_CASES: nothing made ahead; the benchmarks' setup_cache names it
    return [c for c in registry.select(tier) if c.id in ids]
