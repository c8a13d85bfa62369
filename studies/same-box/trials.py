"""How often `mlpbench ab` detects a planted slowdown, and how often it flags identical code, read
from the rounds one long `mlpbench ab --rounds K --results DIR` kept; with --rule, the rule alone.

    python studies/same-box/trials.py DIR --size 3 --expect CASE ... --into studies/same-box/README.md
    python studies/same-box/trials.py --rule   # the rule alone: prints its table (a few minutes on 2 cores)

A trial is what `mlpbench ab --rounds SIZE` would have judged: SIZE rounds a side, pooled by
`ab.pool` and judged by `ab.judge` (the gate's rule, the machine's between-runs file, the
allowance divided by √SIZE) exactly as the command does.
- Detection: SIZE rounds of base against SIZE rounds of head, drawn at random. A row (case and
  metric) is flagged when it reads `regression`, or `slower (not gated)` for the paired ratio that
  `mlpbench ab --paired` lists. --expect CASE:METRIC names a row a plant should move (CASE alone:
  every metric of the case); a planted row is detected when it is flagged.
- A/A: two disjoint groups of SIZE rounds of one side (base, then head) against each other. Every
  row flagged there is a false alarm.
Draws share rounds, so they are not independent trials: they estimate the rates of the rounds at
hand, and the rounds' own spread bounds what they can show. The disjoint trials (no round used
twice) are independent; they are counted beside them with a one-sided 95% Clopper-Pearson bound:
the least detection rate, the most false-alarm rate that their counts allow.

--rule: how often the rule flags identical code, and finds a slowdown, when fresh processes are
offset from each other, on fabricated rounds (no GPU, no measurement). Each trial builds K rounds a
side of one device-time case. A round's samples sit at a log offset drawn from N(0, s²) (a fresh
process's own speed) with 0.2% noise about it, so the spread between processes, not within them,
decides. Base and head differ by the slowdown given (0 for A/A). Each trial is judged by `ab.judge`
as the command judges it, once with a machine's A/A figure and once with the run's own rounds alone.
The A/A figure is 3·ŝ with ŝ drawn per trial as an estimate of s from 3 degrees of freedom
(s·√(χ²₃/3)), as the H200's figures within boxes are estimated, and written to a between-runs file
with its degrees of freedom: the rates average over calibrations.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mlpbench import atomic  # noqa: E402
from mlpbench.judging import ab, between_runs  # noqa: E402

SLOWER = ("regression", "slower (not gated)")  # the gated verdict, and the listed one of the paired ratio

# --rule: the rule alone, on fabricated rounds
RULE_CASE = "mlp/eager/bf16/t8192-d768-h3072"
RULE_MACHINE = "rule"
RULE_SPREAD = 0.01  # s: the standard deviation of a process's log offset
RULE_ROUNDS = (1, 2, 3, 5, 8)
RULE_SLOWDOWNS = (0.0, 0.03)
RULE_TRIALS = 2000
RULE_A_A_DOF = 3  # six A/A runs, two on each of three boxes


def load(folder: Path) -> dict[str, list[tuple]]:
    """{side: [(records, outcomes, machine) per round, in round order]} from an `ab --results` folder."""
    sides: dict[str, list[tuple]] = {}
    for name in ("base", "head"):
        rounds = sorted((p for p in folder.glob(f"{name}-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1]))
        sides[name] = [ab._read(p) for p in rounds]
    if not sides["base"] or not sides["head"]:
        raise SystemExit(f"trials.py: {folder} holds no base-K and head-K round folders of `mlpbench ab --results`")
    return sides


def flags(base: list[tuple], head: list[tuple], results_root: Path | None) -> set[tuple[str, str]]:
    """(case, metric) pairs that `ab.judge` flags as slower, base rounds against head rounds."""
    def side(rounds):
        return ab.pool([r[0] for r in rounds], [r[1] for r in rounds], [r[2] for r in rounds])

    rows = ab.judge(side(base), side(head), results_root=results_root)
    return {(r["case"], r["metric"]) for r in rows if r["verdict"] in SLOWER}


def cases(sides: dict[str, list[tuple]]) -> list[tuple[str, str]]:
    """Every (case, metric) the full run judges, all rounds a side."""
    full = ab.judge(ab.pool([r[0] for r in sides["base"]]), ab.pool([r[0] for r in sides["head"]]))
    return sorted({(r["case"], r["metric"]) for r in full if "ratio" in r})


def trials(sides: dict[str, list[tuple]], size: int, draws: int, seed: int,
           results_root: Path | None) -> dict:
    """Counts of flags per (case, metric) in random and disjoint detection and A/A trials."""
    rng = random.Random(seed)
    base, head = sides["base"], sides["head"]
    if min(len(base), len(head)) < size:
        raise SystemExit(f"trials.py: --size {size} needs {size} rounds a side; "
                         f"there are {len(base)} base and {len(head)} head")
    out = {"detect": Counter(), "detect_n": draws, "aa": Counter(), "aa_n": 0,
           "detect_disjoint": Counter(), "detect_disjoint_n": 0, "aa_disjoint": Counter(), "aa_disjoint_n": 0}
    for _ in range(draws):
        out["detect"].update(flags(rng.sample(base, size), rng.sample(head, size), results_root))
    for rounds in (base, head):
        if len(rounds) < 2 * size:
            continue
        for _ in range(draws):
            pick = rng.sample(rounds, 2 * size)
            out["aa"].update(flags(pick[:size], pick[size:], results_root))
            out["aa_n"] += 1
        for k in range(len(rounds) // (2 * size)):
            group = rounds[2 * size * k:2 * size * (k + 1)]
            out["aa_disjoint"].update(flags(group[:size], group[size:], results_root))
            out["aa_disjoint_n"] += 1
    for k in range(min(len(base), len(head)) // size):
        out["detect_disjoint"].update(flags(base[size * k:size * (k + 1)], head[size * k:size * (k + 1)],
                                            results_root))
        out["detect_disjoint_n"] += 1
    return out


def _rate(count: int, n: int) -> str:
    return f"{count}/{n} ({count / n:.0%})" if n else "—"


def _at_least(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k, n + 1))


def bound(k: int, n: int, lower: bool, alpha: float = 0.05) -> float:
    """One-sided Clopper-Pearson bound on a rate seen k times in n independent trials: the least rate
    (lower) or the most (upper) under which k or more (fewer) would come with probability alpha."""
    if (lower and k == 0) or (not lower and k == n):
        return 0.0 if lower else 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):  # bisection: P(X ≥ k) rises with p, P(X ≤ k) falls
        mid = (lo + hi) / 2
        if lower:
            lo, hi = (mid, hi) if _at_least(k, n, mid) < alpha else (lo, mid)
        else:
            lo, hi = (mid, hi) if 1 - _at_least(k + 1, n, mid) > alpha else (lo, mid)
    return (lo + hi) / 2


def _bounded(count: int, n: int, lower: bool) -> str:
    if not n:
        return "—"
    return f"{count}/{n} ({count / n:.0%}; {'≥' if lower else '≤'} {bound(count, n, lower):.0%})"


def planted(case: str, metric: str, expect: list[str]) -> bool:
    """Whether --expect names this row: CASE:METRIC, or CASE for every metric of the case."""
    return any(e == case or e == f"{case}:{metric}" for e in expect)


def markdown(folder: Path, sides: dict, size: int, draws: int, seed: int, expect: list[str], counts: dict) -> str:
    base, head = sides["base"], sides["head"]
    lines = [f"# `mlpbench ab` trials, {size} rounds a side",
             "",
             f"Generated by `python studies/same-box/trials.py {folder} --size {size} --draws {draws} --seed {seed}"
             + "".join(f" --expect {c}" for c in expect) + "`; regenerate it, never edit it.",
             f"The run kept {len(base)} base and {len(head)} head rounds (machine {base[0][2]}). Random draws share "
             "rounds, so they are not independent trials; disjoint trials use each round once.",
             "",
             "| case | metric | planted | base vs head, random | base vs head, disjoint (least rate) "
             "| A/A, random | A/A, disjoint (most rate) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for case, metric in cases(sides):
        key = (case, metric)
        lines.append(f"| {case} | {metric} | {'yes' if planted(case, metric, expect) else 'no'} "
                     f"| {_rate(counts['detect'][key], counts['detect_n'])} "
                     f"| {_bounded(counts['detect_disjoint'][key], counts['detect_disjoint_n'], lower=True)} "
                     f"| {_rate(counts['aa'][key], counts['aa_n'])} "
                     f"| {_bounded(counts['aa_disjoint'][key], counts['aa_disjoint_n'], lower=False)} |")
    lines += ["", "Each cell: trials that flag that case and metric as slower (`regression`, or `slower (not gated)` "
              "for the paired ratio), of all trials of that kind. Disjoint cells add the one-sided 95% bound "
              "their counts allow: at least that detection rate, at most that false-alarm rate."]
    return "\n".join(lines) + "\n"


def _rule_round(rng: np.random.Generator, log_offset: float) -> list[dict]:
    median = 2.2e-4 * math.exp(log_offset)
    return [{"case": RULE_CASE, "op": "mlp", "variant": "eager", "dtype": "bf16", "shape_id": "t8192-d768-h3072",
             "box_id": 1, "device_time_samples_s": list(median * (1 + 0.002 * rng.standard_normal(20)))}]


def rule_flagged(rng: np.random.Generator, k: int, slowdown: float, root: Path | None) -> bool:
    """One fabricated trial of the rule: k rounds a side, head slower by `slowdown`; with `root`, a
    between-runs file of this trial's A/A figure is written there and read."""
    if root is not None:  # this trial's calibration: an estimate of s from RULE_A_A_DOF degrees of freedom
        allowance = between_runs.MULTIPLE * RULE_SPREAD * math.sqrt(rng.chisquare(RULE_A_A_DOF) / RULE_A_A_DOF)
        between_runs.write(between_runs.path_for(root, RULE_MACHINE), RULE_MACHINE, [], {RULE_CASE: {
            "allowance": allowance, between_runs.ONE_BOX: {"allowance": allowance, "dof": RULE_A_A_DOF}}})

    def side(shift):
        return ab.pool([_rule_round(rng, shift + RULE_SPREAD * rng.standard_normal()) for _ in range(k)],
                       machines=[RULE_MACHINE] * k)

    rows = ab.judge(side(0.0), side(math.log1p(slowdown)), results_root=root)
    return next(r for r in rows if r["metric"] == "device time")["verdict"] == "regression"


def rule(trials_per_cell: int = RULE_TRIALS, rounds: tuple[int, ...] = RULE_ROUNDS) -> None:
    """Print the rule's table: per rounds a side and slowdown, the share of trials flagged."""
    root = Path(tempfile.mkdtemp(prefix="rule-"))
    rng = np.random.default_rng(0)
    designed = 0.5 * math.erfc(between_runs.MULTIPLE / 2)
    print("# `mlpbench ab`'s rule on fabricated rounds\n")
    print("Generated by `python studies/same-box/trials.py --rule`; regenerate it, never edit it. "
          f"{trials_per_cell} trials per cell (a rate's standard error is at most "
          f"{0.5 / math.sqrt(trials_per_cell):.1%}); process "
          f"offsets s = {RULE_SPREAD:.0%}; the A/A figure is {between_runs.MULTIPLE:g}·ŝ, ŝ drawn per trial from "
          f"{RULE_A_A_DOF} degrees of freedom. The rule is built to flag identical code in about "
          f"Φ(−{between_runs.MULTIPLE:g}/√2) = {designed:.1%} of trials, as one process against one would with s "
          "known.\n")
    print("| rounds a side | slowdown | flagged, with the A/A figure | flagged, the run's own spread alone |")
    print("| --- | --- | --- | --- |")
    for k in rounds:
        for slowdown in RULE_SLOWDOWNS:
            known = sum(rule_flagged(rng, k, slowdown, root) for _ in range(trials_per_cell)) / trials_per_cell
            own = sum(rule_flagged(rng, k, slowdown, None) for _ in range(trials_per_cell)) / trials_per_cell
            print(f"| {k} | {slowdown:.0%} | {known:.1%} | {own:.1%} |")
    print("\nWith one round a side the run has no spread of its own to read. Alone, only the floor and the "
          "within-run rule stand, and identical code is flagged whenever two processes' offsets differ by more "
          f"than the floor; with the A/A figure, its {RULE_A_A_DOF} degrees of freedom widen it by Student's t.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, nargs="?", help="the --results folder of `mlpbench ab` (base-K, head-K)")
    p.add_argument("--rule", action="store_true",
                   help="no folder: print the table of the rule alone on fabricated rounds (no GPU)")
    p.add_argument("--size", type=int, default=ab.ROUNDS, help=f"rounds a side per trial (default {ab.ROUNDS})")
    p.add_argument("--draws", type=int, default=200, help="random trials of each kind (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--expect", action="append", default=[], metavar="CASE[:METRIC]",
                   help="a row a plant should move: a case id, with one of its metrics after ':' (repeatable)")
    p.add_argument("--results-root", type=Path, default=ROOT / "results",
                   help="where between-runs/ is read (default: this checkout's results/)")
    p.add_argument("--into", type=Path, metavar="FILE",
                   help="write the table into FILE between its trials.py markers, not to standard output")
    args = p.parse_args(argv)
    if args.rule:
        if args.folder is not None or args.into is not None:
            p.error("--rule reads no folder and writes no file: it judges fabricated rounds and prints its table")
        rule()
        return 0
    if args.folder is None:
        p.error("the --results folder of `mlpbench ab` is required (or --rule)")
    if args.size < 1 or args.draws < 1:
        p.error(f"--size {args.size} and --draws {args.draws} must both be at least 1")
    try:
        if args.into:  # before the draws: a file without its markers fails at once
            atomic.read_section(args.into, "trials.py")
    except ValueError as e:
        print(f"trials.py: {e}", file=sys.stderr)
        return 2
    sides = load(args.folder)
    counts = trials(sides, args.size, args.draws, args.seed, args.results_root)
    text = markdown(args.folder, sides, args.size, args.draws, args.seed, args.expect, counts)
    if args.into:
        atomic.write_section(args.into, "trials.py", text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
