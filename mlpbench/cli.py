"""`mlpbench`: the command line. It parses and dispatches; each command's work lives in its own module
(run_suite, check, report and pages, asv_run, nightly, asv_skips, results_store).
`mlpbench COMMAND --help` says what each takes. Exit status: 0 done, 1 a case failed or a regression,
2 bad input (naming the valid values), 3 a nightly step failed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .judging import ab
from .asv import run as asv_run
from . import environment, registry

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
    run.add_argument("--paired", action="store_true",
                     help="also time each case's back-to-back host rounds interleaved with its op's eager case of the "
                          "same dtype and shape (GPU only): a ratio free of the host's drift, at about twice the host "
                          "timing's cost")
    run.add_argument("--precompile", default="auto", metavar="WORKERS",
                     help="worker processes that make the cases' first calls (compiles, Triton kernels) before "
                          "timing starts; 0 = none; 'auto' = one per two cores, at most 8, on a GPU (none on a CPU)")
    run.add_argument("pytest_args", nargs="*", help="passed to pytest after '--'")

    chk = sub.add_parser("check", help="regression gate over ASV results: exit 1 on a significant slowdown")
    chk.add_argument("--results", type=Path, default=ROOT / "results" / "asv", help="ASV results folder")
    chk.add_argument("--base-results", type=Path, metavar="DIR",
                     help="read the base from this ASV results folder instead (an A/A run of one commit, another box)")
    chk.add_argument("--base", metavar="REV",
                     help="base revision: any git revision (HEAD~1, a branch, a tag, a hash) that the results hold, "
                          "resolved in the repository of --results (else the current one), or a prefix of a commit "
                          "hash found in the results")
    chk.add_argument("--head", metavar="REV", help="head revision, as --base")
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
    skp.add_argument("--bench", help="ASV's own --bench regex (default: every tier's benchmarks)")
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
    nig.add_argument("--no-confirm", action="store_true", help="fail on the gate's regressions without measuring them again here")
    nig.add_argument("--json", type=Path, metavar="FILE", help="also write the verdicts, with their confirmation, to FILE")

    ab.add_arguments(sub.add_parser("ab", help="before/after: two revisions measured here, alternating fresh processes"))

    sto = sub.add_parser("store", help="CI: put this machine's ASV results on --branch (main, where the history lives) and push to --remote, "
                                       "building again on the new tip when another machine pushed first")
    sto.add_argument("--machine", required=True, help="ASV machine name: results/asv/<machine>/ is stored")
    sto.add_argument("--repo", type=Path, default=ROOT, help="the checkout holding results/asv (default: this one)")
    # No default: in a clone, origin is the repository it came from, and nothing pushes unasked.
    sto.add_argument("--remote", required=True, help="the remote to push to, named explicitly (the workflow passes origin)")
    sto.add_argument("--branch", default="main", help="branch holding the results (default: main)")
    sto.add_argument("--attempts", type=int, default=5, help="pushes to try before giving up (default: 5)")
    sto.add_argument("--backoff", type=float, default=2.0, metavar="SECONDS",
                     help="wait about SECONDS × the attempt number between tries (default: 2)")
    return p


def _check(args) -> int:
    from .judging import check

    return check.run(args)


def nothing_readable(results: Path) -> str:
    """The error of `mlpbench report` over a folder in which it read nothing: the folder, what it expected
    there, and the folder above it where that one holds pytest/ or asv/ (`--results results/asv`)."""
    said = (f"no readable results in {results}: expected pytest-benchmark files under {results / 'pytest'}/ "
            f"(`mlpbench run`) or ASV result files under {results / 'asv'}/ (`asv run`)")
    for above in (results.parent, results.parent.parent):  # results/asv, results/pytest/<machine>
        if above != results and any((above / sub).is_dir() for sub in ("pytest", "asv")) and \
                results.resolve().is_relative_to(above.resolve()):
            return said + f"; --results takes the folder holding pytest/ and asv/: did you mean {above}?"
    return said


def _report(args) -> int:
    from . import report

    if not args.results.is_dir():
        print(f"mlpbench: error: results folder {args.results} does not exist", file=sys.stderr)
        return 2
    if args.output is None and args.pages is None:
        print("mlpbench: error: give --output DIR (the report), --pages DIR (the results pages), or both",
              file=sys.stderr)
        return 2
    import warnings

    from . import pages

    # the pages are the report's sections for one machine: one load serves both
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        # one line per warning (an unreadable file, named), as `mlpbench check` prints them
        warnings.showwarning = lambda msg, *a, **k: print(f"mlpbench: warning: {msg}", file=sys.stderr)
        data = report.load(args.results)
        if not data.runs and data.outcomes.empty and not any(p.value is not None for _, p in data.points):
            print(f"mlpbench: error: {nothing_readable(args.results)}", file=sys.stderr)
            return 2
        paths = report.write(data, args.output) if args.output else []
        if args.pages:
            paths += pages.write(data, args.pages)
    for path in paths:
        print(path)
    return 0


def _asv(args) -> int:
    import subprocess

    made = asv_run.command(args)
    if isinstance(made, int):
        return made
    cmd = made[0] + list(args.asv_args)
    from .asv.measure import progress

    say = lambda m: print(f"mlpbench: {m}", flush=True)  # noqa: E731
    with asv_run.ahead(args, say=say, overlap=True), progress(say):
        print(f"mlpbench: {asv_run.shown(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, cwd=args.repo).returncode
    asv_run.plain_setup_cache_keys(args.repo / "results" / "asv" / "benchmarks.json")
    print(f"mlpbench: asv run exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
    return rc


def _nightly(args) -> int:
    from . import nightly

    if args.tier and not asv_run.tier_ok(args.tier):
        return 2
    return nightly.run(args)


def _run(args) -> int:
    from . import run_suite

    return run_suite.run(args, ROOT)


def _skips(args) -> int:
    import re

    environment.interpret_triton_without_gpu()  # the skips of Triton cases on a CPU depend on it
    from .asv import skips as asv_skips
    from . import runner

    try:
        rows = list(asv_skips.skip_reasons(bench=args.bench))
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
    print(f"{skipped} of {len(rows)} benchmarks skip on this machine ({runner.default_device()})")
    return 0


def _store(args) -> int:
    from . import results_store

    return results_store.run(args)


def main(argv=None) -> int:
    environment.prepare()  # before any command imports torch or huggingface_hub
    args = _parser().parse_args(argv)
    return {"run": _run, "asv": _asv, "check": _check, "report": _report, "nightly": _nightly,
            "store": _store, "skips": _skips, "ab": lambda a: ab.run(a, ROOT)}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
