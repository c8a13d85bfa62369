"""The regression gate: ASV results of two commits in, verdicts and an exit code out.

`asv compare` always exits 0, so a nightly job cannot fail on it. Here a benchmark regressed when
its head is slower than its base by more than a threshold AND the slowdown is statistically
significant on the samples: a bootstrap 99% interval of the ratio of medians (head / base) lies
wholly above 1. The threshold defaults to the benchmark's own noise (three robust coefficients of
variation of the base samples, IQR / 1.349 / median) with a floor (2%; 3% for compiled cases), and
to at least three of the case's between-run noise where A/A runs measured it on that machine
(mlpbench/judging/between_runs.py: moves between fresh processes that one process's samples cannot show);
each verdict says which of the three set its threshold. Benchmarks stored without samples (peak
memory, kernels per call, compile time) are judged by the threshold alone.

Host time beside device time (a GPU case) measures the host's launch path, whose speed differs
between boxes of one GPU model far more than the GPU's does. So it is compared between runs of one
box only: each case's `track_box_id` (mlpbench/envinfo.py's box_id, read beside its figures) says
which box measured base and head, and where they differ, or either is unknown, the verdict is "not
compared (different boxes)" or "not compared (box unknown)": listed, never failing. On one box, host
time queued back to back (`track_host_time_back_to_back`, what an eager loop pays per call) is gated,
with a floor of its own (HOST_FLOOR) and its own between-run noise where A/A runs measured it;
the synchronised single call (`track_host_time`) is listed, not gated. On a CPU, host time is the
only time: gated as device time is, whichever box of the machine measured it.

A revision is a prefix of a commit hash found in the result files, so a results folder copied away
from any git repository works, or any revision git resolves (HEAD~1, a branch, a tag) in the
repository holding the results folder, else the current directory's (`repository`), matched to the
commits found in the results.
"""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import between_runs
from ..compile import codegen_record
from .. import registry, results
from ..record import METRICS
from ..results import Point

__all__ = ["GateInputError", "Point", "Verdict", "load", "resolve", "judge", "compare", "box_base", "host_on_one_box",
           "history", "markdown", "as_json"]

FLOOR = 0.02  # never flag less than a 2% slowdown, however quiet the benchmark
# Host time on a box moves with everything else its CPU does (clock changes, other processes, the
# scheduler), which a GPU's time does not, and the samples of one process see little of it: its
# floor is five times device time's.
HOST_FLOOR = 5 * FLOOR
# Reported, not gated (record.METRICS says which, and why): compile time, and single-call host time
# wherever the case also has device time (on a CPU host time is the only time, and is gated). They
# get verdicts "slower (not gated)" and "faster (not gated)"; device time, kernels per call, peak
# memory and back-to-back host time (on one box) are gated.
NOT_GATED = tuple(name for name, m in METRICS.items() if m.gated == "no")
HOST_TIME = tuple(name for name, m in METRICS.items() if m.gated == "without device time")
DEVICE_TIME = "track_device_time"  # the method whose presence makes single-call host time ungated
# Host time compared between runs of one box only (record.Metric.one_box): always, or where the
# case has device time (HOST_TIME: on a CPU it is the only time, judged as device time is).
ONE_BOX = tuple(name for name, m in METRICS.items() if m.one_box)
BACK_TO_BACK = "track_host_time_back_to_back"
# Not a measurement: which box measured a case (envinfo.box_id; 0 where nothing identified it), read
# to decide whether its host time is compared, never judged itself.
BOX = "track_box_id"
# Not a measurement: the fingerprint of what Inductor generated (mlpbench/compile/codegen.py), read to
# attribute a compiled case's move to code generation, never judged itself.
CODEGEN = "track_codegen"
# A compiled case that moved past its threshold while Inductor only picked other launch
# configurations (same kernel sources, same settings): the autotuner moved, not the commit, so it
# is listed apart and does not fail the gate. When the kernels' source or Inductor's settings
# changed too, the commit changed what Inductor compiles: it stays a regression, its cause said.
AUTOTUNER = {"regression": "slower (autotuner's pick)", "improvement": "faster (autotuner's pick)"}
# Inductor's picks and kernels move between runs of one commit more than hand-written or library
# kernels do, a spread that the samples of one run cannot show: torch.compile'd cases get a higher
# floor.
COMPILED_FLOOR = 0.03
NOISE_MULTIPLE = 3.0
BOOTSTRAP = 2000
CONFIDENCE = 0.99


class GateInputError(ValueError):
    """Bad input to the gate: exit status 2."""


def load(results_dir: Path) -> list[Point]:
    """Every result point under `results_dir`; unreadable or foreign files are skipped by name."""
    if not results_dir.is_dir():
        raise GateInputError(f"results folder {results_dir} does not exist")
    return [p for _, p in results.asv_points(results_dir)]


def repository(folder: Path | None) -> Path | None:
    """The top of the git work tree holding `folder`, else of the current directory's; None outside any."""
    for where in ([Path(folder)] if folder is not None else []) + [Path.cwd()]:
        where = where if where.is_dir() else where.parent
        try:
            top = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel"], capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None  # no git here: prefixes of the results' hashes still work
        if top.returncode == 0 and top.stdout.strip():
            return Path(top.stdout.strip())
    return None


def git_commit(repo: Path | None, rev: str) -> str | None:
    """The commit hash git resolves `rev` to in `repo`; None where there is no repository or no such commit."""
    if repo is None or not rev or rev.startswith("-"):
        return None
    try:
        found = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return (found.stdout.strip() or None) if found.returncode == 0 else None


SHOWN_COMMITS = 8  # commits a revision error lists, newest first


def commits_found(points: list[Point]) -> str:
    """The commits `points` hold, newest first, briefly: the first SHOWN_COMMITS and how many in all."""
    commits = list(dict.fromkeys(c for _, c in sorted({(p.date, p.commit) for p in points}, reverse=True)))
    shown = ", ".join(c[:8] for c in commits[:SHOWN_COMMITS]) or "none"
    return shown + (f", … ({len(commits)} in all)" if len(commits) > SHOWN_COMMITS else "")


def resolve(points: list[Point], rev: str, repo: Path | None = None) -> str:
    """The commit of `points` that `rev` names: a prefix of one commit hash found in them, else what git
    resolves `rev` to in `repo` (HEAD~1, a branch, a tag), when the results hold that commit.
    GateInputError, naming `rev` and the commits found, otherwise."""
    commits = sorted({p.commit for p in points})
    hits = [c for c in commits if c.startswith(rev)]
    if len(hits) == 1:
        return hits[0]
    full = git_commit(repo, rev)
    if full is not None and full in commits:
        return full
    what = "matches no commit" if not hits else f"is ambiguous ({len(hits)} commits)"
    if full is not None:  # a commit git knows, never measured here
        said = f"revision {rev!r} (commit {full[:8]} in {repo}) {what} in these results"
    else:
        said = f"revision {rev!r} {what} in these results" + (
            f" and is not a revision git knows in {repo}" if repo is not None else "")
    raise GateInputError(f"{said}; commits found, newest first: {commits_found(points)}")


@dataclass
class Verdict:
    machine: str
    benchmark: str
    param: str
    base: float
    head: float
    ratio: float
    ci_low: float | None
    ci_high: float | None
    threshold: float
    # "regression", "improvement", "unchanged", "slower/faster (not gated)" (NOT_GATED),
    # "slower/faster (autotuner's pick)" (AUTOTUNER), or, for host time not measured on one box,
    # "not compared (different boxes)" / "not compared (box unknown)" (ONE_BOX)
    verdict: str
    test: str
    compiles: bool = False  # a torch.compile'd case: its generated code is compared too
    cause: str | None = None  # what changed in the generated code, when it did (codegen_record.differences)
    # what set the threshold: "floor", "host floor" (HOST_FLOOR), "within-run noise", "between-run
    # noise" (the figure's own: device or back-to-back host time) or "given"
    threshold_from: str = "floor"
    # Host time beside device time (ONE_BOX) only, else None: "same box", "different boxes" or "box
    # unknown", and the boxes that measured base and head (envinfo.box_id in hex; None: unknown).
    boxes: str | None = None
    base_box: str | None = None
    head_box: str | None = None
    # the commit host time was compared with where it is not the base's (host_on_one_box)
    host_base: str | None = None
    # the between-run noise file read for this machine (between_runs.locate), or, where there is none,
    # the warning that says the thresholds are the floors and within-run noise alone
    noise: str = ""


def _noise(samples) -> float:
    q25, q50, q75 = np.percentile(samples, [25, 50, 75])
    return float((q75 - q25) / 1.349 / q50) if q50 else 0.0


def _bootstrap_ratio(base, head, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    b = np.asarray(base)[rng.integers(0, len(base), (BOOTSTRAP, len(base)))]
    h = np.asarray(head)[rng.integers(0, len(head), (BOOTSTRAP, len(head)))]
    ratios = np.median(h, axis=1) / np.median(b, axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(lo), float(hi)


def floor(point: Point, host: bool = False) -> float:
    """The smallest slowdown flagged for this benchmark: HOST_FLOOR for host time beside device time
    (`host`), else COMPILED_FLOOR where its variant compiles (Variant.compiles, looked up when the
    point was read)."""
    return HOST_FLOOR if host else COMPILED_FLOOR if point.compiles else FLOOR


def _threshold(base: Point, given: float | None, between: float | None, samples: bool,
               host: bool = False, within: float | None = None) -> tuple[float, str]:
    if given is not None:
        return given, "given"
    options = [(floor(base, host), "host floor" if host else "floor")]
    if samples:
        options.append((NOISE_MULTIPLE * (_noise(base.samples) if within is None else within), "within-run noise"))
    if between:
        options.append((between, "between-run noise"))
    return max(options, key=lambda o: o[0])


def _box(box) -> str | None:
    return f"{int(box):013x}" if box else None


def _same_box(boxes: tuple) -> str:
    base, head = boxes
    return "box unknown" if not base or not head else "same box" if base == head else "different boxes"


def judge(base: Point, head: Point, threshold: float | None = None, gated: bool | None = None,
          between: float | None = None, boxes: tuple[int | None, int | None] | None = None,
          within: float | None = None) -> Verdict:
    """`gated` None: by the benchmark's name (NOT_GATED). `between`: the case's between-run
    allowance (between_runs.load), a lower bound on the default threshold; ignored when `threshold`
    is given. `within`: the robust CV of one run's samples, where base's samples pool several runs
    (whose offsets are between-run noise, said by `between`); by default that of base's samples. `boxes`: (base's, head's) box ids (0 or None: unknown) of host time beside device time,
    which is compared only when one box measured both; None for every other benchmark (back-to-back
    host time, which exists beside device time only, then counts as measured on unknown boxes)."""
    if boxes is None and base.method in ONE_BOX and base.method not in HOST_TIME:
        boxes = (None, None)
    host = boxes is not None
    if base.samples and head.samples and len(base.samples) >= 5 and len(head.samples) >= 5:
        b, h = float(np.median(base.samples)), float(np.median(head.samples))
        thr, why = _threshold(base, threshold, between, samples=True, host=host, within=within)
        lo, hi = _bootstrap_ratio(base.samples, head.samples)
        ratio = h / b
        slower, faster = ratio > 1 + thr and lo > 1, ratio < 1 / (1 + thr) and hi < 1
        test = f"bootstrap {CONFIDENCE:.0%} interval of the median ratio ({BOOTSTRAP} resamples)"
    else:
        b, h = base.value, head.value
        thr, why = _threshold(base, threshold, between, samples=False, host=host)
        lo = hi = None
        ratio = h / b if b else (math.inf if h else 1.0)
        slower, faster = ratio > 1 + thr, ratio < 1 / (1 + thr)
        test = "threshold only (no samples stored)"
    verdict = "regression" if slower else "improvement" if faster else "unchanged"
    if gated is None:
        gated = base.method not in NOT_GATED
    if not gated and verdict != "unchanged":
        verdict = "slower (not gated)" if slower else "faster (not gated)"
    same = _same_box(boxes) if host else None
    if host and same != "same box":
        verdict = f"not compared ({same})"
    return Verdict(base.machine, base.benchmark, base.param, b, h, ratio, lo, hi, thr, verdict, test, base.compiles,
                   threshold_from=why, boxes=same, base_box=_box(boxes[0]) if host else None,
                   head_box=_box(boxes[1]) if host else None)


def case_id(point: Point) -> str | None:
    """The registry's case id of what `point` measures (None for benchmarks of no op case)."""
    if None in (point.op, point.variant, point.dtype, point.shape_id):
        return None
    return registry.case_id(point.op, point.variant, point.dtype, point.shape_id)


def allowance(point: Point, allowances: dict[str, dict[str, float]],
              host: dict[str, dict[str, float]] | None = None) -> float | None:
    """The between-run allowance of `point`'s case on its machine: of device time from `allowances`,
    of back-to-back host time from `host` (between_runs.load of each figure, by machine). The A/A runs
    measure those two; single-call host time, memory and counts have no between-run figure."""
    found = {DEVICE_TIME: allowances, BACK_TO_BACK: host or {}}.get(point.method)
    if found is None:
        return None
    return found.get(point.machine, {}).get(case_id(point))


def _case_key(p) -> tuple:
    # The op classes of one family share their parameters: standard.MlpDevice's case id is also
    # standard.MlpCodegen's and standard.MlpHost's.
    return p.machine, p.benchmark.split(".", 1)[0], p.param


def boxes_of(points) -> dict[tuple, int]:
    """{_case_key: box id} from the points' BOX benchmarks; 0 (unknown) where one case names two boxes."""
    found: dict[tuple, set] = {}
    for p in points:
        if p.method == BOX and p.value is not None:
            found.setdefault(_case_key(p), set()).add(int(p.value))
    return {k: v.pop() if len(v) == 1 else 0 for k, v in found.items()}


def compare(points: list[Point], base_rev: str, head_rev: str, machine: str | None = None,
            threshold: float | None = None, base_points: list[Point] | None = None,
            codegen_root: Path | None = None, repo: Path | None = None) -> list[Verdict]:
    """Verdicts for head against base, each revision a commit hash's prefix or one git resolves in `repo`
    (resolve). `base_points`, when given, hold the base (another results
    folder: a second run of the same commit, for an A/A check, or another box's results).
    `codegen_root`: the results root (results/), holding codegen.json (codegen_record.py), for saying
    what changed in a compiled case's generated code, and between-runs/<machine>.json, the cases'
    between-run noise (between_runs.py). Host time beside device time is compared only where the
    case's BOX points of base and head name one box (judge's `boxes`)."""
    head_points = points
    base_points = points if base_points is None else base_points
    base, head = resolve(base_points, base_rev, repo), resolve(head_points, head_rev, repo)
    points = base_points + head_points
    if machine is not None and machine not in {p.machine for p in points}:
        known = ", ".join(sorted({p.machine for p in points}))
        raise GateInputError(f"machine {machine!r} has no results here; machines found: {known}")

    def index(pts, commit):
        return {(p.machine, p.benchmark, p.param, p.version): p for p in pts
                if p.commit == commit and p.value is not None and (machine is None or p.machine == machine)}

    b, h = index(base_points, base), index(head_points, head)
    if not b:
        raise GateInputError(f"no readable results for base {base[:8]}")
    if not h:
        raise GateInputError(f"no readable results for head {head[:8]}")
    with_device_time = {(m, param) for (m, name, param, _), p in h.items() if p.method == DEVICE_TIME}

    def gated(key):
        m, name, param, _ = key
        if h[key].method in HOST_TIME:
            return (m, param) not in with_device_time
        return None

    base_boxes, head_boxes = boxes_of(b.values()), boxes_of(h.values())

    def boxes(key):
        m, name, param, _ = key
        if h[key].method not in ONE_BOX or (h[key].method in HOST_TIME and (m, param) not in with_device_time):
            return None
        return base_boxes.get(_case_key(b[key])), head_boxes.get(_case_key(h[key]))

    try:
        machines = {k[0] for k in b}
        allowances = {m: between_runs.load(codegen_root, m) for m in machines}
        host = {m: between_runs.load(codegen_root, m, between_runs.HOST) for m in machines}
    except ValueError as exc:
        raise GateInputError(str(exc)) from None
    verdicts = [judge(b[k], h[k], threshold, gated(k), allowance(b[k], allowances, host), boxes(k))
                for k in sorted(b.keys() & h.keys()) if k[1].rsplit(".", 1)[-1] not in (CODEGEN, BOX)]
    attribute(verdicts, b.values(), h.values(), codegen_root)
    note_noise(verdicts, codegen_root)
    return verdicts


def note_noise(verdicts: list[Verdict], results_root: Path | None) -> None:
    """Set each verdict's `noise`: the noise file its machine's thresholds read, else the warning that
    there is none (between_runs.missing_line), never a silent change of thresholds."""
    found = {m: between_runs.locate(results_root, m) for m in {v.machine for v in verdicts}}
    for v in verdicts:
        where = found[v.machine]
        v.noise = str(where) if where else MISSING_NOISE + between_runs.missing_line(v.machine, results_root)


MISSING_NOISE = "warning: "  # how a verdict's `noise` begins where its machine has no noise file


def noise_warnings(verdicts: list[Verdict]) -> list[str]:
    """One line per machine whose verdicts read no noise file."""
    return list(dict.fromkeys(v.noise.removeprefix(MISSING_NOISE) for v in verdicts
                              if v.noise.startswith(MISSING_NOISE)))


def attribute(verdicts: list[Verdict], base: list[Point], head: list[Point], codegen_root: Path | None) -> None:
    """Say, for each compiled case that moved past its threshold, whether its generated code changed
    and how; a move with nothing but other launch configurations becomes an AUTOTUNER verdict."""
    def fingerprints(points):
        return {_case_key(p): p.value for p in points if p.method == CODEGEN}

    fb, fh = fingerprints(base), fingerprints(head)
    for v in verdicts:
        key = _case_key(v)
        if not v.compiles or v.verdict not in AUTOTUNER or key not in fb or key not in fh or fb[key] == fh[key]:
            continue
        records = [codegen_record.load(fp, codegen_root) if codegen_root else None for fp in (fb[key], fh[key])]
        changes = codegen_record.differences(*records)
        v.cause = "; ".join(changes)
        if all(": Inductor chose " in c for c in changes):
            v.verdict = AUTOTUNER[v.verdict]


def box_base(points: list[Point], head: str, machine: str | None = None) -> str | None:
    """The latest commit but `head` (by date, as the nightly picks its base) that the box which
    measured `head` measured too (BOX points); None when head's cases name no box or more than one,
    or no other commit of that box is here."""
    def boxes(commit):
        return {int(p.value) for p in points if p.method == BOX and p.commit == commit and p.value
                and (machine is None or p.machine == machine)}

    mine = boxes(head)
    if len(mine) != 1:
        return None
    others = sorted({(p.date, p.commit) for p in points if p.commit != head and p.value is not None
                     and (machine is None or p.machine == machine)})
    return next((c for _, c in reversed(others) if mine & boxes(c)), None)


def host_on_one_box(points: list[Point], verdicts: list[Verdict], base: str, head: str, machine: str | None = None,
                    threshold: float | None = None, codegen_root: Path | None = None
                    ) -> tuple[list[Verdict], str | None]:
    """`verdicts` (head against `base`, from compare) where host time was not compared because
    another box measured `base`: compared instead against the latest commit that head's box measured
    (box_base), as a same-box reference. Returns the verdicts and that commit (None where there is
    none, or no verdict came from it); each verdict taken from it names it (host_base)."""
    if not any(v.boxes == "different boxes" for v in verdicts):
        return verdicts, None
    other = box_base(points, head, machine)
    if other is None or other == base:
        return verdicts, None
    again = {(v.machine, v.benchmark, v.param): v for v in compare(points, other, head, machine, threshold,
                                                                   codegen_root=codegen_root)
             if v.boxes == "same box"}
    out = []
    for v in verdicts:
        w = again.get((v.machine, v.benchmark, v.param)) if v.boxes == "different boxes" else None
        if w is not None:
            w.host_base = other
        out.append(w or v)
    return out, other if any(v.host_base for v in out) else None


def history(points: list[Point], last: int, machine: str | None = None,
            threshold: float | None = None, codegen_root: Path | None = None) -> list[tuple[str, Verdict]]:
    """Regressions between consecutive commits among the `last` ones, each named by the commit that
    stepped up, judged as `compare` judges them (`codegen_root`: the same results root).

    Only commits with a readable value count: a commit whose file was truncated, or whose benchmarks
    all failed, has nothing to compare. Fewer than two such commits is bad input, never "no regression"."""
    commits = sorted({(p.date, p.commit) for p in points
                      if p.value is not None and (machine is None or p.machine == machine)})[-last:]
    if len(commits) < 2:
        where = f" for machine {machine!r}" if machine else ""
        raise GateInputError(f"history needs readable results of at least 2 commits{where}; found {len(commits)}")
    found = []
    for (_, prev), (_, cur) in zip(commits, commits[1:]):
        for v in compare(points, prev, cur, machine, threshold, codegen_root=codegen_root):
            if v.verdict == "regression":
                found.append((cur, v))
    return found


def _fmt(x: float, benchmark: str) -> str:
    metric = METRICS.get(benchmark.rsplit(".", 1)[-1])
    if metric is not None and metric.unit == "seconds":
        return f"{x * 1e6:,.2f} µs" if x < 1e-2 else f"{x:,.3f} s"
    return f"{x:,.4g}"


def _boxes_cell(v: Verdict) -> str:
    if v.boxes is None:
        return "—"
    if v.boxes == "same box":
        return f"{v.base_box} (same box" + (f", against {v.host_base[:8]})" if v.host_base else ")")
    return f"{v.base_box or 'unknown'} → {v.head_box or 'unknown'}"


def markdown(verdicts: list[Verdict]) -> str:
    def table(rows):
        causes = any(v.cause for v in rows)
        boxes = any(v.boxes for v in rows)
        lines = ["| benchmark | parameters | base | head | ratio | 99% interval | threshold (from) | verdict |"
                 + (" boxes (base → head) |" if boxes else "") + (" generated code |" if causes else ""),
                 "| --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if boxes else "")
                 + (" --- |" if causes else "")]
        for v in rows:
            ci = f"{v.ci_low:.4f}–{v.ci_high:.4f}" if v.ci_low is not None else "—"
            lines.append(f"| {v.benchmark} | {v.param} | {_fmt(v.base, v.benchmark)} | {_fmt(v.head, v.benchmark)} "
                         f"| {v.ratio:.4f} | {ci} | {v.threshold:.1%} ({v.threshold_from}) | {v.verdict} |"
                         + (f" {_boxes_cell(v)} |" if boxes else "")
                         + (f" {v.cause or 'unchanged'} |" if causes else ""))
        return "\n".join(lines)

    reg = [v for v in verdicts if v.verdict == "regression"]
    imp = [v for v in verdicts if v.verdict == "improvement"]
    info = [v for v in verdicts if v.verdict.endswith("(not gated)")]
    tuned = [v for v in verdicts if v.verdict in AUTOTUNER.values()]
    apart = [v for v in verdicts if v.verdict.startswith("not compared")]
    host = [v for v in verdicts if v.boxes == "same box" and v.verdict == "unchanged"]
    parts = [f"**Warning:** {line}." for line in noise_warnings(verdicts)]
    parts += [f"{len(verdicts)} benchmarks compared: {len(reg)} regressed, {len(imp)} improved, "
             f"{len(tuned)} moved with the autotuner's pick (not failing), "
             f"{len(info)} moved but not gated (host and compile time), "
             f"{len(apart)} host-time figures not compared (base and head not measured on one box), "
             f"{len(verdicts) - len(reg) - len(imp) - len(info) - len(tuned) - len(apart)} unchanged."]
    if reg:
        parts.append("### Regressions\n\n" + table(reg))
    if imp:
        parts.append("### Improvements\n\n" + table(imp))
    if tuned:
        parts.append("### Compiled cases that moved because Inductor's autotuner picked other launch "
                     "configurations (same kernel sources and settings; not failing)\n\n" + table(tuned))
    if info:
        parts.append("### Host and compile time that moved (not gated)\n\n" + table(info))
    if apart:
        parts.append("### Host time not compared: base and head were not measured on one box, and host speed "
                     "differs between boxes (not failing)\n\n" + table(apart))
    if host:
        parts.append("### Host time compared on one box, unchanged\n\n" + table(host))
    return "\n\n".join(parts)


def as_json(verdicts: list[Verdict]) -> str:
    return json.dumps([asdict(v) for v in verdicts], indent=1)
