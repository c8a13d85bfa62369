"""`mlpbench ab --base REV --head REV`: a kernel author's before/after on this box.

Both revisions are checked out into temporary git worktrees (removed afterwards, whatever happens;
the user's checkout and results/ are never written). Each worktree's own `mlpbench run` measures the
selected cases in fresh processes, alternating base, head, head, base, ... (ABBA) for `--rounds`
rounds, so drift on the box (clocks, heat, other load) falls on both sides alike. It runs with
PYTHONPATH and the working folder set to the worktree, so that revision's mlpbench, ops and
kernels_local are the ones imported (kernel builds are cached by a digest of their sources: two revisions, two builds).

Each side's samples are pooled over its rounds and judged by the gate's own rule (gate.judge):
device time on a GPU, and back-to-back host time beside it (both sides ran on this box); where no
device time exists (a CPU), host time. The threshold also covers the spread of the rounds' medians:
pooled samples alone would not show how far a fresh process moves a case. That spread is for one
process against one: the machine's A/A figure and this run's own spread are pooled as two estimates
of one spread, read with Student's t at their degrees of freedom, and shrunk as the median of k
offsets does (`between`, about 1/√k), so more rounds find smaller slowdowns at the false-alarm rate
one process against one would have with that spread known.
The gate's within-run term (three robust CVs of the samples) is left out wherever that spread is
known (an A/A figure, or rounds enough to see one): it stands in for the noise between processes
only where neither exists, read then from each round's samples, not the rounds pooled. `--paired` adds
each case's back-to-back ratio to its op's eager case, their rounds interleaved in one process
(free of the host's drift between processes), listed beside the rest and not gated. Exit 1 on a regression or
a case that fails at head (or that base reported and head did not), 0 otherwise, 2 on bad input (an
unknown revision, a selection a revision rejects, a used --results folder) or a round that crashed.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .. import registry

# (column name, ASV method the gate knows it by, record field holding its samples). The gate, numpy
# and pandas are imported where used: the command line imports this module to parse.
DEVICE = ("device time", "track_device_time", "device_time_samples_s")
BACK_TO_BACK = ("back-to-back host time", "track_host_time_back_to_back", "host_time_back_to_back_samples_s")
HOST = ("host time", "track_host_time", "host_time_samples_s")
# --paired: each round's ratios of back-to-back rounds to the op's eager case's, interleaved in one
# process (mlpbench run --paired). Listed, not gated: how far they move between processes is not
# part of results/between-runs/ yet, and a change to the eager case moves them too.
PAIRED = ("back-to-back host time, paired", "track_host_time_back_to_back_paired",
          "host_time_back_to_back_vs_eager_samples")
# Counted, not sampled: one value per round (record field), judged as the gate judges them, by the
# threshold alone on the rounds' medians. A process's allocator state and the kernels it picks can
# differ from another's (the nightly measures many cases in one process, a round only the selected
# ones), so a confirmation measures them again rather than trusting the night's value; the row's
# interval is the range of head's rounds over base's, so one round out of line cannot clear a move.
PEAK = ("peak memory", "track_peak_memory", "peak_memory_bytes")
KERNELS = ("kernels per call", "track_kernels_per_call", "kernels_per_call")
COUNTED = (PEAK, KERNELS)
MARKER = "<!-- mlpbench-ab -->"  # the workflow finds its own PR comment by this line
ROUNDS = 3
MISSING = "missing at head"  # base reported the case, head never did (a crash, a removed case): fails


class ABInputError(ValueError):
    """Bad input: exit status 2."""


def add_arguments(p) -> None:
    p.add_argument("--base", required=True, help="base revision (anything git rev-parse takes)")
    p.add_argument("--head", required=True, help="head revision (anything git rev-parse takes)")
    p.add_argument("--tier", help=f"one of {', '.join(registry.TIERS)} (default: standard on a GPU, quick on a CPU)")
    p.add_argument("--op", action="append", help=f"repeatable; one of {', '.join(registry.OPS)}")
    p.add_argument("--variant", action="append", help=f"repeatable; one of {', '.join(registry.all_variants())}")
    p.add_argument("--dtype", action="append", help=f"repeatable; one of {', '.join(registry.DTYPES)}")
    p.add_argument("--shape", action="append", help="repeatable; a shape id such as t8192-d768-h3072")
    p.add_argument("--rounds", type=int, default=ROUNDS, metavar="K",
                   help=f"processes per side, alternating base and head, ABBA (default: {ROUNDS})")
    p.add_argument("--threshold", type=float, metavar="PCT", help="as for `mlpbench check`")
    p.add_argument("--paired", action="store_true",
                   help="also time each case's back-to-back rounds interleaved with its op's eager case (GPU; "
                        "`mlpbench run --paired`): a row per case of that ratio, listed, not gated")
    p.add_argument("--results", type=Path, metavar="DIR",
                   help="keep each process's results here (default: a temporary folder, removed)")
    p.add_argument("--repo", type=Path, help="the git repository holding both revisions (default: this checkout)")
    p.add_argument("--json", action="store_true", help="verdicts as JSON instead of markdown")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the markdown table to FILE")


# --- pooling and verdicts (no git, no processes) --------------------------------------------------

@dataclass
class Side:
    """One revision's measurements of one case, pooled over its rounds."""

    samples: dict[str, list[float]] = field(default_factory=dict)  # by ASV method
    medians: dict[str, list[float]] = field(default_factory=dict)  # each round's median, by ASV method
    noise: dict[str, list[float]] = field(default_factory=dict)  # each round's robust CV, by ASV method
    rounds: int = 0
    machine: str = "unknown"
    boxes: set = field(default_factory=set)
    counts: dict = field(default_factory=dict)  # method -> each round's value of a COUNTED metric
    codegen: list = field(default_factory=list)  # each round's codegen record (compiled cases)
    info: dict = field(default_factory=dict)  # the first round's record (op, variant, ...)
    failed: str | None = None  # why the case failed in some round (correctness, a crash)
    skipped: str | None = None  # why it was not timed (a variant that cannot run or be timed here)


def pool(rounds: list[list[dict]], outcomes: list[list[dict]] | None = None,
         machines: list[str] | None = None) -> dict[str, Side]:
    """{case id: Side} from each round's records (pytest-benchmark extra_info dicts) and outcomes."""
    sides: dict[str, Side] = {}
    for k, records in enumerate(rounds):
        for info in records:
            s = sides.setdefault(info["case"], Side(info=info))
            s.rounds += 1
            s.machine = machines[k] if machines else s.machine
            s.boxes.add(info.get("box_id") or 0)
            if info.get("codegen"):
                s.codegen.append(info["codegen"])
            for _, method, name in (DEVICE, BACK_TO_BACK, HOST, PAIRED):
                if info.get(name):
                    s.samples.setdefault(method, []).extend(info[name])
                    s.medians.setdefault(method, []).append(statistics.median(info[name]))
                    s.noise.setdefault(method, []).append(_robust_cv(info[name]))
            for _, method, name in COUNTED:
                if isinstance(info.get(name), (int, float)) and info[name] > 0:
                    s.counts.setdefault(method, []).append(float(info[name]))
    for found in outcomes or []:
        for o in found:
            if o.get("outcome") == "failed":
                sides.setdefault(o["case"], Side()).failed = o.get("reason") or "failed"
            elif o.get("outcome") == "skipped":
                sides.setdefault(o["case"], Side()).skipped = o.get("reason") or "skipped"
    return sides


def _robust_cv(samples: list[float]) -> float | None:
    """One round's robust CV, read as the gate reads a run's own noise (gate._noise); None below 4
    samples, where the gate falls back to the samples pooled."""
    if len(samples) < 4:
        return None
    from . import gate

    return gate._noise(samples)


def _point(case: str, method: str, side: Side, commit: str):
    from ..results import Point

    info, samples = side.info, side.samples[method]
    return Point(side.machine, commit, 0, f"ab.{method}", case, "ab", float(sorted(samples)[len(samples) // 2]),
                 tuple(samples), info.get("op"), info.get("variant"), info.get("dtype"), info.get("shape_id"),
                 compiles="codegen" in info)


def _counted(case: str, method: str, side: Side, commit: str):
    """A COUNTED metric's point: the median of the rounds' values, no samples (the gate's threshold alone)."""
    from ..results import Point

    info = side.info
    return Point(side.machine, commit, 0, f"ab.{method}", case, "ab", float(statistics.median(side.counts[method])),
                 None, info.get("op"), info.get("variant"), info.get("dtype"), info.get("shape_id"),
                 compiles="codegen" in info)


def _overlap(v, base: list[float], head: list[float]):
    """A counted move stands only where the rounds do not overlap: identical code can count differently
    in two processes (Inductor's fusion choices, the allocator's state), so a head that matches a value
    some base round had is no change, whatever the medians say."""
    if v.verdict == "regression" and v.ci_low <= 1 or v.verdict == "improvement" and v.ci_high >= 1:
        fmt = lambda xs: ", ".join(f"{x:g}" for x in xs)  # noqa: E731
        return replace(v, verdict="unchanged", cause=f"the rounds overlap: base {fmt(base)}, head {fmt(head)}")
    return v


def spread(base: Side, head: Side, method: str) -> tuple[float, int, int] | None:
    """(s, ν, k) of this run's own rounds: the pooled standard deviation of log round medians about
    each side's own mean (as between_runs measures A/A runs), its degrees of freedom ν = 2(k - 1),
    and the rounds a side k (the fewer); None below MIN_RUNS - 1 degrees of freedom."""
    from . import between_runs

    logs = [[math.log(m) for m in s.medians.get(method, []) if m > 0] for s in (base, head)]
    dof = sum(len(x) - 1 for x in logs if x)
    if dof < between_runs.MIN_RUNS - 1 or not all(logs):
        return None
    ss = sum((v - statistics.fmean(x)) ** 2 for x in logs for v in x)
    return math.sqrt(ss / dof), dof, min(len(x) for x in logs)


def between(base: Side, head: Side, method: str, known: float | None = None,
            known_dof: int | None = None) -> float | None:
    """The between-process allowance for this run's sides, pooled over their rounds. Pooled samples
    alone would not show a process's offset.

    The machine's A/A figure `known` (MULTIPLE·s for one process against one, s estimated from
    `known_dof` degrees of freedom) and this run's own spread (`spread`) are two estimates of one
    standard deviation: they are pooled, weighted by their degrees of freedom, and read with
    Student's t at their sum (`own_multiple`), then scaled to k rounds a side as `pooled` scales.
    So a box noisier than its A/A runs widens the threshold, and more rounds narrow it. A figure
    without its degrees of freedom (an older file, or a figure inherited from another case) is taken
    as exact: the larger of it, pooled, and the run's own."""
    from . import between_runs

    own = spread(base, head, method)
    k = own[2] if own else max(min(base.rounds, head.rounds), 1)
    scale = median_spread(k) / math.sqrt(k)
    if known is not None and not known_dof:
        alone = own_multiple(own[1]) * own[0] * scale if own else None
        return max(a for a in (pooled(known, k), alone) if a is not None)
    parts = ([(known / between_runs.MULTIPLE, known_dof)] if known is not None else []) + ([own[:2]] if own else [])
    if not parts:
        return None
    nu = sum(d for _, d in parts)
    return own_multiple(nu) * math.sqrt(sum(d * x * x for x, d in parts) / nu) * scale


@functools.lru_cache(maxsize=None)
def own_multiple(dof: int) -> float:
    """The multiple of an estimated standard deviation (`dof` degrees of freedom) with the false-alarm
    rate of MULTIPLE known ones: the machine's A/A threshold MULTIPLE·s, on a difference of two
    processes whose spread is s·√2, is passed by chance with probability p = Φ(−MULTIPLE/√2); with s
    estimated, the difference over s·√2 follows Student's t, so the multiple is √2·t(1 − p, dof).
    Monte Carlo with a fixed seed; MULTIPLE as dof grows."""
    import numpy as np

    from . import between_runs

    p = 0.5 * math.erfc(between_runs.MULTIPLE / 2)  # Φ(−MULTIPLE/√2)
    rng = np.random.default_rng(0)
    t = rng.standard_normal(1_000_000) / np.sqrt(rng.chisquare(dof, 1_000_000) / dof)
    return float(math.sqrt(2) * np.quantile(t, 1 - p))


@functools.lru_cache(maxsize=None)
def median_spread(k: int) -> float:
    """The standard deviation of the median of k normal offsets over that of their mean: 1 up to two
    (the median is the mean), rising toward √(π/2). Monte Carlo with a fixed seed, so the same k
    always gives the same figure."""
    if k <= 2:
        return 1.0
    import numpy as np

    draws = np.random.default_rng(0).standard_normal((200_000, k))
    return float(np.std(np.median(draws, axis=1)) * math.sqrt(k))


def pooled(allowance: float | None, rounds: int) -> float | None:
    """An A/A allowance for one process against one other, taken as exact (no degrees of freedom
    known: see `between`), made one for `rounds` processes a side pooled.

    A process's offset (the between-process noise, standard deviation s) averages out over the
    rounds: the difference of two sides' pooled medians moves by c·s·√(2/k), not s·√2, where c is
    `median_spread(k)` (the pooled median follows the median of the rounds' offsets, not their
    mean). Scaling by c/√k keeps the gate's false-alarm rate per case (the same multiple of the
    difference's spread) while more rounds find smaller slowdowns; the floor still bounds it from
    below."""
    if allowance is None:
        return None
    k = max(rounds, 1)
    return allowance * median_spread(k) / math.sqrt(k)


def _box(side: Side) -> int | None:
    return next(iter(side.boxes)) if len(side.boxes) == 1 else None


def judge(base: dict[str, Side], head: dict[str, Side], threshold: float | None = None,
          results_root: Path | None = None, codegen_root: Path | None = None) -> list[dict]:
    """One row per case and metric: the case id, the metric's name and gate.judge's verdict on the
    pooled samples, as a dict (gate.Verdict's fields). `results_root`: where between-runs/ is read."""
    from . import between_runs, gate
    from ..compile import codegen_record
    from ..results import Point

    rows = []
    verdicts, bpts, hpts = [], [], []
    for case in sorted(base.keys() | head.keys()):
        b, h = base.get(case), head.get(case)
        failed = [f"failed at {name}: {s.failed}" for name, s in (("base", b), ("head", h)) if s and s.failed]
        failed += [MISSING] if b is not None and h is None else []
        if failed or b is None or h is None or not b.samples or not h.samples:
            skipped = next((s.skipped for s in (h, b) if s and s.skipped), None)
            why = "; ".join(failed) or (f"not timed: {skipped}" if skipped else "not timed" if b and h
                                        else "only at head")
            rows.append({"case": case, "metric": "—", "verdict": why})
            continue
        # device time where it exists, with back-to-back host time beside it; else host time
        metrics = [m for m in (DEVICE, BACK_TO_BACK, PAIRED) if m[1] in b.samples and m[1] in h.samples] \
            if DEVICE[1] in b.samples else [HOST] if HOST[1] in b.samples and HOST[1] in h.samples else []
        for label, method, _ in metrics:
            pb, ph = _point(case, method, b, "base"), _point(case, method, h, "head")
            try:
                # base and head are measured on this box: device time's spread within boxes
                allow = {pb.machine: between_runs.load(results_root, pb.machine, one_box=True)}
                host = {pb.machine: between_runs.load(results_root, pb.machine, between_runs.HOST)}
                dofs = between_runs.load_dof(results_root, pb.machine, between_runs.HOST) \
                    if method == gate.BACK_TO_BACK else between_runs.load_dof(results_root, pb.machine, one_box=True)
            except ValueError as exc:
                raise ABInputError(str(exc)) from None
            boxes = (_box(b), _box(h)) if method == gate.BACK_TO_BACK else None
            # the machine's A/A allowance (results/between-runs/) with this run's own spread, for the
            # rounds pooled; a run's own noise from its rounds' samples, not the pooled ones
            known = gate.allowance(pb, allow, host)
            noise = [n for n in b.noise.get(method, []) if n is not None]
            spread_k = between(b, h, method, known, dofs.get(gate.case_id(pb)) if known else None)
            # The gate's within-run term (three robust CVs of one run's samples) stands in for the noise
            # between processes where a side is one run. Where that noise is known for the rounds
            # pooled (spread_k), the term only double-counts it: a round whose samples straddle two
            # clock states has a wide CV but moves the pooled median little, and the bootstrap interval
            # already holds the samples' spread.
            within = 0.0 if spread_k is not None else statistics.median(noise) if noise else None
            v = gate.judge(pb, ph, threshold, gated=method != PAIRED[1], boxes=boxes, between=spread_k,
                           within=within)
            verdicts.append(v)
            rows.append({"case": case, "metric": label, "samples": [len(b.samples[method]), len(h.samples[method])],
                         "rounds": [b.rounds, h.rounds], "_v": v})
        for label, method, _ in COUNTED if DEVICE[1] in b.samples else ():
            if not (b.counts.get(method) and h.counts.get(method)):
                continue
            v = replace(gate.judge(_counted(case, method, b, "base"), _counted(case, method, h, "head"), threshold),
                        ci_low=min(h.counts[method]) / max(b.counts[method]),
                        ci_high=max(h.counts[method]) / min(b.counts[method]),
                        test="threshold only (counted per round); interval: head's rounds over base's, extremes")
            v = _overlap(v, b.counts[method], h.counts[method])
            verdicts.append(v)
            rows.append({"case": case, "metric": label, "samples": [len(b.counts[method]), len(h.counts[method])],
                         "rounds": [b.rounds, h.rounds], "_v": v})
        # codegen per side (its most common record), so gate.attribute can name what changed
        for side, pts, commit in ((b, bpts, "base"), (h, hpts, "head")):
            if side.codegen and codegen_root is not None:
                rec = Counter(json.dumps(c, sort_keys=True) for c in side.codegen).most_common(1)[0][0]
                rec = json.loads(rec)
                if rec.get("fingerprint") is not None:
                    codegen_record.store(rec, codegen_root)
                    pts.append(Point(side.machine, commit, 0, f"ab.{gate.CODEGEN}", case, "ab",
                                     float(rec["fingerprint"]), None))
    gate.attribute(verdicts, bpts, hpts, codegen_root)
    for r in rows:
        if "_v" in r:
            r |= asdict(r.pop("_v"))
    return rows


def failing(rows: list[dict]) -> bool:
    return any(r["verdict"] == "regression" or r["verdict"].startswith("failed at head") or MISSING in r["verdict"]
               for r in rows)


def _fmt(x, metric: str = "") -> str:
    if x is None:
        return "—"
    if metric == PAIRED[0]:
        return f"{x:.3f}× eager"
    if metric == PEAK[0]:
        return f"{x / 1e6:,.2f} MB"
    if metric == KERNELS[0]:
        return f"{x:g}"
    return f"{x * 1e6:,.2f} µs" if x < 1e-2 else f"{x:,.3f} s"


def note_noise(rows: list[dict], results_root: Path) -> None:
    """Each row's `noise`, as the gate's verdicts carry it (gate.note_noise): the noise file its machine
    read, else the warning that its thresholds are the floors and its rounds' own spread alone."""
    from . import between_runs, gate

    found: dict = {}
    for r in rows:
        if (m := r.get("machine")) is None:
            continue
        if m not in found:
            found[m] = between_runs.locate(results_root, m)
        r["noise"] = str(found[m]) if found[m] else gate.MISSING_NOISE + between_runs.missing_line(m, results_root)


def markdown(rows: list[dict], base: str, head: str, rounds: int) -> str:
    from . import gate

    reg = sum(r["verdict"] == "regression" for r in rows)
    imp = sum(r["verdict"] == "improvement" for r in rows)
    warnings = list(dict.fromkeys(r["noise"].removeprefix(gate.MISSING_NOISE) for r in rows
                                  if r.get("noise", "").startswith(gate.MISSING_NOISE)))
    lines = [MARKER, *[f"**Warning:** {w}." for w in warnings],
             f"**mlpbench ab** {base[:10]} → {head[:10]}: {len(rows)} rows, {reg} regressed, {imp} improved "
             f"({rounds} alternating processes per side; samples pooled; the gate's test)", "",
             "| case | metric | base median | head median | ratio | 99% interval | threshold (from) | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "ratio" not in r:
            lines.append(f"| {r['case']} | — | — | — | — | — | — | {r['verdict']} |")
            continue
        ci = f"{r['ci_low']:.4f}–{r['ci_high']:.4f}" if r["ci_low"] is not None else "—"
        verdict = r["verdict"] + (f" ({r['cause']})" if r.get("cause") else "")
        lines.append(f"| {r['case']} | {r['metric']} | {_fmt(r['base'], r['metric'])} | {_fmt(r['head'], r['metric'])} "
                     f"| {r['ratio']:.4f} "
                     f"| {ci} | {r['threshold']:.1%} ({r['threshold_from']}) | {verdict} |")
    return "\n".join(lines) + "\n"


# --- git worktrees and processes ------------------------------------------------------------------

def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def resolve(repo: Path, rev: str) -> str:
    from . import gate  # the gate resolves revisions the same way (`check --base HEAD~1`)

    found = gate.git_commit(repo, rev)
    if found is None:
        raise ABInputError(f"revision {rev!r} is not a commit in {repo}")
    return found


def _selection(args) -> list[str]:
    return [f"--{flag}={v}" for flag in ("op", "variant", "dtype", "shape") for v in getattr(args, flag) or []]


def _env(tree: Path) -> dict:
    path = os.environ.get("PYTHONPATH")
    return os.environ | {"PYTHONPATH": str(tree) + (os.pathsep + path if path else "")}


def _preflight(tree: Path, tier: str, args, name: str) -> None:
    """The worktree's own registry validates the selection, and its mlpbench must be what imports."""
    code = ("import json, sys, mlpbench; from mlpbench import registry as r\n"
            "sel = json.loads(sys.argv[1])\n"
            "try: n = len(r.select(*sel))\n"
            "except r.SelectionError as e: sys.exit(f'{e}')\n"
            "why = r.why_no_case(*sel) if not n and hasattr(r, 'why_no_case') else None\n"
            "print(json.dumps([mlpbench.__file__, n, why]))")
    sel = [tier] + [getattr(args, f) for f in ("op", "variant", "dtype", "shape")]
    out = subprocess.run([sys.executable, "-c", code, json.dumps(sel)], cwd=tree, env=_env(tree),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise ABInputError(f"at {name}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'failed'}")
    where, n, *why = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise ABInputError(f"at {name}: mlpbench imports from {where}, not from the worktree {tree}")
    if not n:
        raise ABInputError(f"at {name}: {why[0] if why and why[0] else f'the selection matches no case of tier {tier!r}'}")


def _measure(tree: Path, out: Path, tier: str, args) -> tuple[int, str]:
    """One `mlpbench run` of the worktree in a fresh process; its results under `out`. The worktree's
    run builds pytest's argv (run_suite), one GPU (--shards 1) so both sides see the same one."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "mlpbench.cli", "run", f"--tier={tier}", *_selection(args),
           f"--results={out}", "--shards=1", *(["--paired"] if getattr(args, "paired", False) else [])]
    with open(out / "log.txt", "w") as log:
        rc = subprocess.run(cmd, cwd=tree, env=_env(tree), stdout=log, stderr=subprocess.STDOUT).returncode
    return rc, (out / "log.txt").read_text()


def _read(out: Path) -> tuple[list[dict], list[dict], str]:
    """A round's records, outcomes and machine from the files `mlpbench run` wrote under `out`."""
    from ..results import own_outcomes, pytest_runs

    files = sorted(p for p in out.rglob("*.json") if not p.name.startswith("."))
    records, machine = [], "unknown"
    outcomes = own_outcomes(files)
    for run in pytest_runs([p for p in files if not p.name.endswith(".outcomes.json")]):
        machine = run.machine
        records += [b.get("extra_info", {}) for b in run.benchmarks if "case" in b.get("extra_info", {})]
    return records, outcomes, machine


def _default_tier() -> str:
    from ..runner import default_device

    return "standard" if default_device() == "cuda" else "quick"


def measure(args, repo: Path, shas: dict[str, str], work: Path, tier: str) -> dict[str, dict[str, Side]]:
    trees = {}
    # absolute: each round's `mlpbench run` works in its worktree, where a relative path means another folder
    results = args.results.resolve() if args.results else work / "results"
    for name in shas:
        for k in range(1, args.rounds + 1):
            used = results / f"{name}-{k}"
            if used.is_dir() and any(used.iterdir()):  # its old files would be read as this run's
                raise ABInputError(f"--results {results}: {used} already holds results; give an empty folder")
    try:
        for name, sha in shas.items():
            trees[name] = work / f"tree-{name}"
            made = _git(repo, "worktree", "add", "--detach", str(trees[name]), sha)
            if made.returncode != 0:
                raise ABInputError(f"git worktree add {sha[:10]} failed: {made.stderr.strip()}")
        for name, tree in trees.items():
            _preflight(tree, tier, args, name)
        rounds = {name: ([], [], []) for name in trees}
        for k in range(1, args.rounds + 1):
            # ABBA: base first in odd rounds, head first in even ones, so drift falls on both sides
            for name, tree in list(trees.items())[::1 if k % 2 else -1]:
                t0 = time.perf_counter()
                rc, log = _measure(tree, results / f"{name}-{k}", tier, args)
                print(f"mlpbench ab: {name} {shas[name][:10]} round {k}/{args.rounds}: exit {rc} "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
                tail = "\n".join(log.strip().splitlines()[-15:])
                if rc not in (0, 1):  # 1: a case failed, said in its outcomes; anything else stops
                    raise ABInputError(f"`mlpbench run` at {name} ({shas[name][:10]}) exited {rc}:\n{tail}")
                records, outcomes, machine = _read(results / f"{name}-{k}")
                if rc == 1 and not any(o.get("outcome") == "failed" for o in outcomes):  # a crash, not a case
                    raise ABInputError(f"`mlpbench run` at {name} ({shas[name][:10]}) round {k}/{args.rounds} "
                                       f"exited 1 with no failed case; log {results / f'{name}-{k}' / 'log.txt'}:"
                                       f"\n{tail}")
                for store, value in zip(rounds[name], (records, outcomes, machine)):
                    store.append(value)
        return {name: pool(r, o, m) for name, (r, o, m) in rounds.items()}
    finally:
        for tree in trees.values():
            _git(repo, "worktree", "remove", "--force", str(tree))
        _git(repo, "worktree", "prune")


def run(args, root: Path) -> int:
    repo = (args.repo or root).resolve()
    if args.rounds < 1:
        print(f"mlpbench: error: --rounds {args.rounds}: at least 1", file=sys.stderr)
        return 2
    if args.threshold is not None and not 0 <= args.threshold < 1000:
        print(f"mlpbench: error: --threshold {args.threshold} is not a percentage in [0, 1000)", file=sys.stderr)
        return 2
    if args.tier is not None and args.tier not in registry.TIERS:
        print(f"mlpbench: error: --tier {args.tier!r}; valid: {', '.join(registry.TIERS)}", file=sys.stderr)
        return 2
    if args.rounds == 1:
        print("mlpbench ab: warning: --rounds 1: no spread between rounds to see, so no between-round allowance",
              file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="mlpbench-ab-"))
    try:
        shas = {"base": resolve(repo, args.base), "head": resolve(repo, args.head)}
        tier = args.tier or _default_tier()
        sides = measure(args, repo, shas, work, tier)
        rows = judge(sides["base"], sides["head"], None if args.threshold is None else args.threshold / 100,
                     results_root=repo / "results", codegen_root=work)
        note_noise(rows, repo / "results")
    except ABInputError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if getattr(args, "paired", False) and not any(r["metric"] == PAIRED[0] for r in rows):
        print("mlpbench ab: --paired: no case recorded a paired ratio (back-to-back host time is taken on a GPU "
              "only, against the op's eager case)", file=sys.stderr)
    text = markdown(rows, shas["base"], shas["head"], args.rounds)
    if args.markdown:
        args.markdown.write_text(text)
    print(json.dumps(rows, indent=1) if args.json else text)
    return 1 if failing(rows) else 0
