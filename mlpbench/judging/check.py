"""`mlpbench check`: the regression gate from the command line."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from . import gate


def _readable(folder: Path, what: str) -> list:
    """The points of the ASV results folder `folder`; GateInputError, naming it and what it should hold,
    when none has a value (an empty or wrong folder, or only unreadable or failed files)."""
    points = gate.load(folder)
    if not any(p.value is not None for p in points):
        found = ("its ASV result files hold no measured value (every benchmark failed)" if points
                 else "no readable ASV result file")
        raise gate.GateInputError(f"{what} {folder}: {found}; expected <machine>/<commit>-<env>.json files, "
                                  f"as `asv run` writes under results/asv/")
    return points


def run(args) -> int:
    """`mlpbench check`: the gate's verdicts between two commits (--base, --head) or over the last N
    (--last), printed as markdown or JSON; exit 1 on a regression, 2 on bad input."""
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
            points = _readable(args.results, "--results")
            if args.last is not None:
                steps = gate.history(points, args.last, args.machine, threshold, codegen_root=args.results.parent)
                for commit, v in steps:
                    print(f"{commit[:8]}: {v.benchmark}({v.param}) {v.ratio:.4f}× ({v.test})")
                if not steps:
                    print(f"no regression over the last {args.last} commits with readable results")
                return 1 if steps else 0
            base_points = _readable(args.base_results, "--base-results") if args.base_results else None
            # results/codegen.json sits beside results/asv/ (asv_measure.measure_case writes it there)
            # --base/--head: a hash prefix, or any revision git resolves in the repository of the results
            verdicts = gate.compare(points, args.base, args.head, args.machine, threshold, base_points,
                                    codegen_root=args.results.parent, repo=gate.repository(args.results))
        except gate.GateInputError as exc:
            print(f"mlpbench: error: {exc}", file=sys.stderr)
            return 2
    print(gate.as_json(verdicts) if args.json else gate.markdown(verdicts))
    return 1 if any(v.verdict == "regression" for v in verdicts) else 0
