"""`mlpbench`: the command line.

    mlpbench run [--tier T] [--op OP] [--variant V] [--dtype D] [--shape S] [--results DIR]

runs the pytest-benchmark suite for the selected cases on this machine, saves its JSON under
results/pytest/<machine>/ and prints one table per op. Exit status: 0 when every selected case
passed or was skipped with a reason, 1 when a case failed (a wrong result, a crash), 2 on bad input.

    mlpbench asv [--tier T] [--bench REGEX] [--machine NAME] [-- ASV-RUN-ARGS]

is one plain `asv run` in this Python (a GPU box's own CUDA torch, no network needed) for the
checked-out commit, recorded under its hash in results/asv/<machine>/; it prints the command.

    mlpbench skips [--bench REGEX] [--all]

lists each ASV benchmark that skips on this machine with its reason (ASV itself records only n/a).

    mlpbench report [--results DIR] [--output DIR] [--pages DIR]

reads every result under results/ and writes the report (--output: report.html, report.md,
report.csv) and the per-machine results pages (--pages: docs/results/<machine>.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

from . import registry
from .atomic import publish, temp_path

ROOT = Path(__file__).resolve().parent.parent


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors also exit 2, without a traceback
        self.print_usage(sys.stderr)
        print(f"mlpbench: error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mlpbench", description="Benchmarks of a transformer MLP's building blocks.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a tier of the suite here and print tables")
    run.add_argument("--tier", help=f"one of {', '.join(registry.TIERS)} (default: standard on a GPU, quick on a CPU)")
    run.add_argument("--op", action="append", help=f"repeatable; one of {', '.join(registry.OPS)}")
    run.add_argument("--variant", action="append", help=f"repeatable; one of {', '.join(registry.all_variants())}")
    run.add_argument("--dtype", action="append", help=f"repeatable; one of {', '.join(registry.DTYPES)}")
    run.add_argument("--shape", action="append", help="repeatable; a shape id such as t8192-d768-h3072")
    run.add_argument("--results", type=Path, default=ROOT / "results" / "pytest",
                     help="folder for the JSON (a subfolder per machine is made)")
    run.add_argument("--shards", default="auto",
                     help="processes, one per GPU, each running every N-th case; 'auto' = the GPUs visible (1 on a CPU)")
    run.add_argument("--trace", type=Path, metavar="DIR",
                     help="also write one Chrome/Perfetto profiler trace per case into DIR (GPU only)")
    run.add_argument("pytest_args", nargs="*", help="passed to pytest after '--'")

    chk = sub.add_parser("check", help="regression gate over ASV results: exit 1 on a significant slowdown")
    chk.add_argument("--results", type=Path, default=ROOT / "results" / "asv", help="ASV results folder")
    chk.add_argument("--base-results", type=Path, metavar="DIR",
                     help="read the base from this ASV results folder instead (an A/A run of one commit, another box)")
    chk.add_argument("--base", help="base revision (a prefix of a commit hash found in the results)")
    chk.add_argument("--head", help="head revision (a prefix of a commit hash found in the results)")
    chk.add_argument("--last", type=int, metavar="N", help="history mode: check each step over the last N commits")
    chk.add_argument("--machine", help="only this ASV machine")
    chk.add_argument("--threshold", type=float, metavar="PCT",
                     help="flag slowdowns above PCT percent (default: 3× each benchmark's noise, at least 2%%, 3%% for compiled cases)")
    chk.add_argument("--json", action="store_true", help="verdicts as JSON instead of markdown")

    rep = sub.add_parser("report", help="all results as one tidy table, markdown and a self-contained HTML page with "
                                        "plots; with --pages, the per-machine results pages")
    rep.add_argument("--results", type=Path, default=ROOT / "results", help="folder holding pytest/ and asv/")
    rep.add_argument("--output", type=Path, help="folder for report.md, report.html, report.csv")
    rep.add_argument("--pages", type=Path, metavar="DIR",
                     help="also write one markdown page per machine into DIR (the repository's: docs/results)")

    asv = sub.add_parser("asv", help="one plain `asv run` in this environment for the checked-out commit")
    asv.add_argument("--tier", help=f"one of {', '.join(registry.TIERS)} (default: standard on a GPU, quick on a CPU)")
    asv.add_argument("--bench", help="ASV's own --bench regex, instead of the tier's")
    asv.add_argument("--machine", help="ASV machine name (default: the GPU model, e.g. h200)")
    asv.add_argument("--repo", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    asv.add_argument("asv_args", nargs="*", help="passed to `asv run` after '--'")

    skp = sub.add_parser("skips", help="each ASV benchmark that skips on this machine, with the reason its setup "
                                       "gives (what `asv run` shows as n/a)")
    skp.add_argument("--bench", help="ASV's own --bench regex (default: every family)")
    skp.add_argument("--all", action="store_true", help="also list the benchmarks that run here")

    nig = sub.add_parser("nightly", help="CI: record this commit with ASV, publish the report, gate against the previous "
                                         "commit")
    nig.add_argument("--repo", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    nig.add_argument("--tier", help="default: standard on a GPU, quick on a CPU")
    nig.add_argument("--bench", help="ASV's own --bench regex, instead of the tier's")
    nig.add_argument("--machine", help="ASV machine name (default: the GPU model)")
    nig.add_argument("--threshold", type=float, metavar="PCT", help="as for `mlpbench check`")
    nig.add_argument("--summary", type=Path, help="markdown summary file (default: $GITHUB_STEP_SUMMARY, else results/nightly-summary.md)")
    nig.add_argument("--no-publish", action="store_true", help="skip `asv publish`")

    sto = sub.add_parser("store", help="CI: put this machine's ASV results on the results branch and push to --remote, "
                                       "building again on the new tip when another machine pushed first")
    sto.add_argument("--machine", required=True, help="ASV machine name: results/asv/<machine>/ is stored")
    sto.add_argument("--repo", type=Path, default=ROOT, help="the checkout holding results/asv (default: this one)")
    # No default: in a clone, origin is the repository it came from, and nothing pushes unasked.
    sto.add_argument("--remote", required=True, help="the remote to push to, named explicitly (the workflow passes origin)")
    sto.add_argument("--branch", default="results", help="branch holding the results (default: results)")
    sto.add_argument("--attempts", type=int, default=5, help="pushes to try before giving up (default: 5)")
    sto.add_argument("--backoff", type=float, default=2.0, metavar="SECONDS",
                     help="wait about SECONDS × the attempt number between tries (default: 2)")
    return p


def _check(args) -> int:
    import warnings

    from . import gate

    if (args.last is None) == (args.base is None or args.head is None):
        print("mlpbench: error: give --base and --head, or --last N", file=sys.stderr)
        return 2
    if args.threshold is not None and not 0 <= args.threshold < 1000:
        print(f"mlpbench: error: --threshold {args.threshold} is not a percentage in [0, 1000)", file=sys.stderr)
        return 2
    if args.last is not None and args.base_results is not None:
        print("mlpbench: error: --base-results goes with --base and --head, not --last", file=sys.stderr)
        return 2
    if args.last is not None and args.last < 2:
        print(f"mlpbench: error: --last {args.last}: need at least 2 commits", file=sys.stderr)
        return 2
    threshold = None if args.threshold is None else args.threshold / 100
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda msg, *a, **k: print(f"mlpbench: warning: {msg}", file=sys.stderr)
        try:
            points = gate.load(args.results)
            if args.last is not None:
                steps = gate.history(points, args.last, args.machine, threshold, codegen_root=args.results.parent)
                for commit, v in steps:
                    print(f"{commit[:8]}: {v.benchmark}({v.param}) {v.ratio:.4f}× ({v.test})")
                if not steps:
                    print(f"no regression over the last {args.last} commits with readable results")
                return 1 if steps else 0
            base_points = gate.load(args.base_results) if args.base_results else None
            # results/codegen/ sits beside results/asv/ (asv_suite.measure_case writes it there)
            verdicts = gate.compare(points, args.base, args.head, args.machine, threshold, base_points,
                                    codegen_root=args.results.parent)
        except gate.GateInputError as exc:
            print(f"mlpbench: error: {exc}", file=sys.stderr)
            return 2
    print(gate.as_json(verdicts) if args.json else gate.markdown(verdicts))
    return 1 if any(v.verdict == "regression" for v in verdicts) else 0


def _report(args) -> int:
    from . import report

    if not args.results.is_dir():
        print(f"mlpbench: error: results folder {args.results} does not exist", file=sys.stderr)
        return 2
    if args.output is None and args.pages is None:
        print("mlpbench: error: give --output DIR (the report), --pages DIR (the results pages), or both",
              file=sys.stderr)
        return 2
    return report.main(args.results, args.output, args.pages)


def _tier_ok(tier: str) -> bool:
    """False, after saying why on stderr, when `tier` is not one of the registry's tiers."""
    try:
        registry.select(tier)
    except registry.SelectionError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return False
    return True


def asv_command(args) -> tuple[list[str], str, str] | int:
    """The plain `asv run` that `mlpbench asv` and the nightly run, the commit it records and the
    machine it records for; an exit status instead on bad input. What it adds to ASV: this Python as
    an existing environment, the commit hash (ASV records nothing in one without it), the tier as a
    --bench expression, and the machine's registration (mlpbench.asv_machine)."""
    import subprocess

    from .asv_machine import register
    from .runner import default_device

    if args.tier and not _tier_ok(args.tier):
        return 2
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.repo, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        print(f"mlpbench: error: {args.repo} is not a git checkout; ASV records results under a commit hash",
              file=sys.stderr)
        return 2
    from .asv_suite import tier_regex

    machine = register(args.machine)["machine"]
    bench = args.bench or tier_regex(args.tier or ("standard" if default_device() == "cuda" else "quick"))
    return [sys.executable, "-m", "asv", "run", "--environment", f"existing:{sys.executable}",
            "--set-commit-hash", head, "--machine", machine, "--bench", bench], head, machine


def _asv(args) -> int:
    import subprocess

    made = asv_command(args)
    if isinstance(made, int):
        return made
    cmd = made[0] + list(args.asv_args)
    print(f"mlpbench: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=args.repo).returncode
    print(f"mlpbench: asv run exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
    return rc


def _nightly(args) -> int:
    from . import nightly

    if args.tier and not _tier_ok(args.tier):
        return 2
    return nightly.run(args)


def _run(args) -> int:
    from .envinfo import machine_slug
    from .runner import default_device

    tier = args.tier or ("standard" if default_device() == "cuda" else "quick")
    try:
        cases = registry.select(tier, args.op, args.variant, args.dtype, args.shape)
    except registry.SelectionError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return 2
    if not cases:
        print("mlpbench: error: the selection matches no case", file=sys.stderr)
        return 2
    from .sources import liger_source

    try:
        liger_source()
    except ValueError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return 2
    out_dir = args.results / machine_slug()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".write-test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        print(f"mlpbench: error: cannot write results to {out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # The pid keeps two runs started in the same second apart.
    json_path = out_dir / f"{stamp}-{tier}-{os.getpid()}.json"
    outcomes_path = json_path.with_name(json_path.stem + ".outcomes.json")
    tmp_json = temp_path(json_path)
    print(f"mlpbench: {len(cases)} cases of tier {tier!r} on {machine_slug()} → {json_path}", flush=True)

    import pytest

    argv = [str(ROOT / "benchmarks"), "-v", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
            f"-c={ROOT / 'pytest.ini'}", f"--tier={tier}", f"--benchmark-json={tmp_json}",
            f"--outcomes={outcomes_path}",
            # Host samples for a quarter second per case (at least 5): device time has its own
            # samples, and a whole tier must stay well under 15 minutes. `-- --benchmark-max-time=1` overrides.
            "--benchmark-max-time=0.25"]
    for flag in ("op", "variant", "dtype", "shape"):
        argv += [f"--{flag}={v}" for v in getattr(args, flag) or []]
    if args.trace:
        argv.append(f"--trace-dir={args.trace}")
    n_shards = _shard_count(args.shards)
    if n_shards is None:
        return 2
    ops = list(dict.fromkeys(c.op for c in cases))
    if n_shards > 1:
        rc = _run_sharded(argv + list(args.pytest_args), n_shards, json_path, outcomes_path)
    elif len(ops) > 1:
        rc = _run_per_op(argv + list(args.pytest_args), ops, json_path, outcomes_path)
    else:
        try:
            rc = pytest.main(argv + list(args.pytest_args))
        finally:
            # pytest-benchmark writes its JSON in place; it becomes a result only once complete.
            if tmp_json.exists() and tmp_json.stat().st_size > 0:
                publish(tmp_json, json_path)
            else:
                tmp_json.unlink(missing_ok=True)
    _summarise(json_path, outcomes_path)
    return 0 if rc in (0, 5) else (2 if rc == 4 else 1)


def _shard_count(spec: str) -> int | None:
    import torch

    if spec == "auto":
        return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1
    if not spec.isdigit() or int(spec) < 1:
        print(f"mlpbench: error: --shards {spec!r}: a positive number or 'auto'", file=sys.stderr)
        return None
    return int(spec)


def _run_sharded(argv: list[str], n: int, json_path: Path, outcomes_path: Path) -> int:
    """One pytest process per shard (and GPU), at once, then one merged JSON and outcomes file."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    parts = []
    for k in range(n):
        env = {"CUDA_VISIBLE_DEVICES": str(k % gpus)} if gpus else {}
        parts.append((f"shard {k}/{n} on {'GPU ' + str(k % gpus) if gpus else 'the CPU'}",
                      ["-q", f"--shard={k}/{n}"], env))
    return _run_parts(argv, parts, json_path, outcomes_path, together=True)


def _run_per_op(argv: list[str], ops: list[str], json_path: Path, outcomes_path: Path) -> int:
    """One pytest process per op, one after the other, then one merged JSON and outcomes file.

    As ASV measures each op in a process of its own: on an H200 the whole standard tier in one
    process ran out of GPU memory after 259 cases (137.8 GiB reserved by PyTorch and not returned by
    empty_cache, 1.2 GiB allocated), where one process per op never held more than 1.22 GiB after a case
    (results/logs/h200-20261201-ops/)."""
    kept = [a for a in argv if not a.startswith("--op=")]
    return _run_parts(kept, [(f"op {op}", ["-v", f"--op={op}"], {}) for op in ops], json_path, outcomes_path,
                      together=False)


def _run_parts(argv: list[str], parts: list[tuple[str, list[str], dict]], json_path: Path, outcomes_path: Path,
               together: bool) -> int:
    """A pytest process per part (label, extra arguments, extra environment), all at once or in turn;
    their records merged into one file, each record naming the process that measured it (`shard`)."""
    import subprocess

    from . import shards
    from .atomic import write_json

    jsons = [json_path.with_name(f".{json_path.stem}.part{k}.json") for k in range(len(parts))]
    outs = [json_path.with_name(f".{json_path.stem}.part{k}.outcomes.json") for k in range(len(parts))]
    base = [a for a in argv if not a.startswith(("--benchmark-json=", "--outcomes=", "-v"))]
    procs, codes = [], []
    for k, (label, extra, env) in enumerate(parts):
        print(f"mlpbench: {label}", flush=True)
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *base, *extra, f"--benchmark-json={jsons[k]}",
                                 f"--outcomes={outs[k]}"], env=os.environ | env)
        if together:
            procs.append(proc)
        else:
            codes.append(proc.wait())
    codes += [p.wait() for p in procs]
    done = [p for p in jsons if p.exists() and p.stat().st_size > 0]
    if done:
        write_json(json_path, shards.merge(done))
    write_json(outcomes_path, shards.merge_outcomes(outs))
    for p in jsons + outs:
        p.unlink(missing_ok=True)
    failed = [c for c in codes if c not in (0, 5)]
    return failed[0] if failed else 0


def _summarise(json_path: Path, outcomes_path: Path) -> None:
    from .tables import load_pytest_json, not_timed, op_tables

    if json_path.exists():
        df = load_pytest_json([json_path])
        if not df.empty:
            print("\n" + op_tables(df) + f"\n\n(from {json_path})")
    if outcomes_path.exists():
        text = not_timed(outcomes_path)
        if text:
            print("\nNot timed:\n" + text + f"\n\n(from {outcomes_path})")


def _skips(args) -> int:
    import re

    from . import asv_suite

    try:
        rows = list(asv_suite.skip_reasons(bench=args.bench))
    except re.error as exc:
        print(f"mlpbench: error: --bench {args.bench!r} is not a regular expression: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"mlpbench: error: --bench {args.bench!r} selects no benchmark", file=sys.stderr)
        return 2
    for name, reason in rows:
        if reason or args.all:
            print(f"{name}: {'skipped: ' + reason if reason else 'runs here'}")
    skipped = sum(1 for _, r in rows if r)
    print(f"{skipped} of {len(rows)} benchmarks skip on this machine ({asv_suite.runner.default_device()})")
    return 0


def _store(args) -> int:
    from . import results_store

    return results_store.run(args)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return {"run": _run, "asv": _asv, "check": _check, "report": _report, "nightly": _nightly,
            "store": _store, "skips": _skips}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
