"""Verdicts that hold on this box: the nightly's regressions measured again here, and bisected.

A gate regression compares tonight's run with an earlier night's: two processes, perhaps two boxes
of one machine name, days apart. Before it fails the job, the flagged cases are measured again on
this box right away, base against head in alternating fresh processes (`mlpbench ab`'s machinery,
judged by the gate's rule). A regression that the same-box comparison reproduces is "confirmed";
one that it does not, with its interval's upper bound below 1 + the gate's threshold, is "box noise"
and does not fail the job; one that it does not reproduce but cannot rule out either is "inconclusive"
and still fails. A case that cannot be measured again (a metric that `ab` does not time, a commit
missing here, a run that fails) stays a regression: the confirmation can clear a verdict, never
hide one.

A confirmed regression over several commits (base and head not adjacent) is bisected on this box to
its first bad commit: a binary search over `git rev-list --first-parent --ancestry-path --reverse
base..head`, each step an `ab` comparison of base against the midpoint for the cases still open, so
O(log n) comparisons. Cases that part ways at a midpoint are searched apart; a midpoint that cannot
be measured stops the search (not bisected). Not `asv find`: it searches one benchmark name, by
one measurement per commit with no base/head interleaving and no noise test (it follows the larger
raw difference, so it names a commit even where nothing regressed), and it installs the project into
an ASV environment per commit (with `existing` it would measure the installed code at every commit)
and saves into results/ unless told not to.

The measurer is injectable: measure(base_sha, head_sha, targets) -> {target.key: ab row} (a dict with
its verdict, "regression" when reproduced, and its ratio and interval); ab_measurer is the real one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from argparse import Namespace
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

CONFIRMED = "regression (confirmed on this box)"
NOISE = "box noise (not reproduced on this box)"
UNMEASURED = "regression (not measured again on this box)"
INCONCLUSIVE = "regression (inconclusive on this box)"  # not reproduced, but not ruled out either
# The gate's ASV method → ab's metric column. Peak memory and kernels per call are counted, not
# sampled, yet identical code moves them between the night's process and another (allocator state,
# the picks a process makes): ab counts them again per round, and its row's interval is the range of
# head's rounds over base's (ab.COUNTED).
METRIC = {"track_device_time": "device time", "track_host_time_back_to_back": "back-to-back host time",
          "track_host_time": "host time", "track_peak_memory": "peak memory",
          "track_kernels_per_call": "kernels per call"}


@dataclass(frozen=True)
class Target:
    """One flagged case and metric, and the tier whose `mlpbench run` measures it."""

    case: str
    method: str
    tier: str
    op: str
    variant: str
    dtype: str
    shape: str

    @property
    def key(self) -> tuple[str, str]:
        return self.case, self.method


@dataclass
class Confirmation:
    benchmark: str
    param: str
    base: str
    head: str
    status: str  # CONFIRMED, NOISE, INCONCLUSIVE or UNMEASURED
    reason: str | None = None  # why not measured again, or what the same-box comparison said
    first_bad: str | None = None  # the first bad commit (bisected, or head when it is base's child)
    first_bad_subject: str | None = None
    bisect_steps: int = 0  # same-box comparisons the bisection made

    @property
    def failing(self) -> bool:
        return self.status != NOISE


Measure = Callable[[str, str, list[Target]], dict]


class BisectError(RuntimeError):
    """A midpoint could not be measured: the search stops rather than call it good."""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit)


def target(v, tier: str | None = None) -> Target | str:
    """The Target of a regression verdict, or why it cannot be measured again."""
    from .. import registry

    method = v.benchmark.rsplit(".", 1)[-1]
    if method not in METRIC:
        return f"`mlpbench ab` does not measure {method}"
    try:
        case = registry.case_by_id(v.param)
    except registry.SelectionError:
        return f"{v.param!r} is not a case of the registry"
    family = v.benchmark.split(".", 1)[0]
    tier = family if family in case.shape.tiers else tier if tier in case.shape.tiers else case.shape.tiers[0]
    return Target(case.id, method, tier, case.op, case.variant, case.dtype, case.shape.id)


def _reproduced(measure: Measure, base: str, head: str, targets: list[Target]) -> tuple[dict, str | None]:
    """({key: ab row}, None) or ({}, why the measurement failed)."""
    try:
        return measure(base, head, targets), None
    except Exception as exc:  # noqa: BLE001 - a failed re-measurement keeps the verdict, with the reason
        return {}, f"{type(exc).__name__}: {exc}".splitlines()[0]


def bisect(repo: Path, base: str, head: str, targets: list[Target], measure: Measure) -> tuple[dict, int]:
    """({target key: first bad commit}, comparisons made) for targets that regress from base to head.
    Head is known bad, base good; each step measures base against the midpoint for the open targets."""
    # the first-parent line from base to head: a merged branch's commits are not built on base alone
    commits = _git(repo, "rev-list", "--first-parent", "--ancestry-path", "--reverse", f"{base}..{head}").split()
    found: dict = {}
    steps = 0

    def search(open_: list[Target], good: int, bad: int) -> None:
        nonlocal steps
        if not open_:
            return
        if bad - good <= 1:
            found.update({t.key: commits[bad] for t in open_})
            return
        mid = (good + bad) // 2
        steps += 1
        said, error = _reproduced(measure, base, commits[mid], open_)
        if error:
            raise BisectError(error)
        bad_here = {t.key for t in open_ if (said.get(t.key) or {}).get("verdict") == "regression"}
        search([t for t in open_ if t.key in bad_here], good, mid)
        search([t for t in open_ if t.key not in bad_here], mid, bad)

    if commits:
        search(targets, -1, len(commits) - 1)
    return found, steps


def confirm(verdicts, base: str, head: str, measure: Measure, repo: Path | None = None, tier: str | None = None,
            bisect_range: bool = True) -> list[Confirmation]:
    """One Confirmation per regression verdict (host-time verdicts against their host_base), measured
    again on this box; confirmed ones over several commits bisected when `repo` is given."""
    out: list[Confirmation] = []
    by_base: dict[str, list] = {}
    for v in verdicts:
        if v.verdict == "regression":
            by_base.setdefault(v.host_base or base, []).append(v)
    for b, flagged in by_base.items():
        made = {id(v): target(v, tier) for v in flagged}
        targets = list(dict.fromkeys(t for t in made.values() if isinstance(t, Target)))
        said, error = _reproduced(measure, b, head, targets) if targets else ({}, None)
        rows = []
        for v in flagged:
            t = made[id(v)]
            if isinstance(t, str) or error:
                why = t if isinstance(t, str) else error
                rows.append((None, Confirmation(v.benchmark, v.param, b, head, UNMEASURED, why)))
                continue
            row = said.get(t.key) or {"verdict": "not measured"}
            got, high = row["verdict"], row.get("ci_high")
            status = CONFIRMED if got == "regression" else UNMEASURED
            if got in ("unchanged", "improvement") or got.endswith("(autotuner's pick)"):
                # box noise only where ab's interval rules out a slowdown the gate's threshold would flag
                status = NOISE if high is not None and high < 1 + v.threshold else INCONCLUSIVE
                got += f", 99% interval up to {high:.4f}" if high is not None else ", no interval"
            rows.append((t, Confirmation(v.benchmark, v.param, b, head, status, f"same-box comparison: {got}")))
        out += [c for _, c in rows]
        confirmed = list(dict.fromkeys(t for t, c in rows if c.status == CONFIRMED))
        if repo is None or not confirmed:
            continue
        try:
            if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", b, head]).returncode:
                continue  # base is not in head's history: no range to search
            first, steps = bisect(repo, b, head, confirmed, measure) if bisect_range else ({}, 0)
            for t, c in rows:
                if t is not None and t.key in first:
                    c.first_bad, c.bisect_steps = first[t.key], steps
                    c.first_bad_subject = subject(repo, c.first_bad)
        except (subprocess.CalledProcessError, OSError, BisectError) as exc:
            for _, c in rows:
                if c.status == CONFIRMED:
                    c.reason = f"{c.reason}; not bisected: {exc}"
    return out


def failing(verdicts, confirmations: list[Confirmation]) -> list:
    """The regression verdicts that fail the job: all but those the same-box comparison cleared."""
    cleared = {(c.benchmark, c.param) for c in confirmations if not c.failing}
    return [v for v in verdicts if v.verdict == "regression" and (v.benchmark, v.param) not in cleared]


def ab_measurer(repo: Path, threshold: float | None = None, rounds: int | None = None) -> Measure:
    """The real measurer: `mlpbench ab` of base against head for the targets, one selection per
    op and dtype: its flagged variants and shapes together. Each round is a fresh process whose start
    (imports, kernel loads) costs more than measuring a case, so variants of one op share their rounds;
    a case the cross product adds beyond the flagged ones is measured and not reported."""
    from . import ab

    labels = {label: method for method, label in METRIC.items()}

    def measure(base: str, head: str, targets: list[Target]) -> dict:
        shas = {"base": ab.resolve(repo, base), "head": ab.resolve(repo, head)}
        groups: dict[tuple, tuple[list[str], list[str]]] = {}
        for t in targets:
            variants, shapes = groups.setdefault((t.tier, t.op, t.dtype), ([], []))
            variants.append(t.variant)
            shapes.append(t.shape)
        work = Path(tempfile.mkdtemp(prefix="mlpbench-confirm-"))
        found = {}
        try:
            for k, ((tier, op, dtype), (variants, shapes)) in enumerate(groups.items()):
                args = Namespace(op=[op], variant=sorted(set(variants)), dtype=[dtype], shape=sorted(set(shapes)),
                                 rounds=rounds or ab.ROUNDS, results=None)
                (work / str(k)).mkdir()
                sides = ab.measure(args, repo, shas, work / str(k), tier)
                for r in ab.judge(sides["base"], sides["head"], threshold, results_root=repo / "results",
                                  codegen_root=work / "codegen"):
                    # only a case-level row (failed, skipped, missing) answers for every metric of its case
                    found[(r["case"], None if r["metric"] == "—" else labels.get(r["metric"], r["metric"]))] = r
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return {t.key: found.get(t.key) or found.get((t.case, None)) or {"case": t.case, "verdict": "not measured"}
                for t in targets}

    return measure


# --- what the nightly writes ----------------------------------------------------------------------

def path(root: Path, machine: str, head: str) -> Path:
    """results/confirmations/<machine>/<head>.json: one file per night, so stores only add files."""
    return Path(root) / "confirmations" / machine / f"{head}.json"


def save(root: Path, machine: str, head: str, confirmations: list[Confirmation]) -> Path:
    from ..atomic import write_json

    p = path(root, machine, head)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_json(p, [asdict(c) for c in confirmations])
    return p


def load(root: Path, machine: str) -> dict[tuple[str, str, str], str]:
    """{(head commit, benchmark, param): status} of every night's confirmations on `machine`."""
    from ..results import confirmations

    return confirmations(Path(root) / "confirmations" / machine)


def markdown(confirmations: list[Confirmation]) -> str:
    n = {s: sum(c.status == s for c in confirmations) for s in (CONFIRMED, NOISE, INCONCLUSIVE, UNMEASURED)}
    lines = ["### Same-box confirmation", "",
             "Each regression measured again on this box, base against head in alternating fresh processes "
             "(`mlpbench ab`), judged by the gate's rule: all but box noise fail the night. "
             f"{n[CONFIRMED]} confirmed, {n[NOISE]} box noise, {n[INCONCLUSIVE]} inconclusive, "
             f"{n[UNMEASURED]} not measured again.", "",
             "| benchmark | parameters | base | status | first bad commit |", "| --- | --- | --- | --- | --- |"]
    for c in confirmations:
        if c.first_bad and c.bisect_steps:
            first = f"{c.first_bad[:8]} \"{c.first_bad_subject}\" (bisected, {c.bisect_steps} comparisons)"
        elif c.first_bad:
            first = f"{c.first_bad[:8]} \"{c.first_bad_subject}\" (the only commit after base)"
        else:
            first = "—"
        status = c.status + (f" ({c.reason})" if c.status in (UNMEASURED, INCONCLUSIVE) and c.reason else "")
        lines.append(f"| {c.benchmark} | {c.param} | {c.base[:8]} | {status} | {first} |")
    return "\n".join(lines)


def as_json(machine: str, head: str, verdicts, confirmations: list[Confirmation]) -> str:
    """The night's verdicts, each with its confirmation (None: not a regression, or not confirmed)."""
    by = {(c.benchmark, c.param): asdict(c) for c in confirmations}
    return json.dumps({"machine": machine, "head": head,
                       "verdicts": [asdict(v) | {"confirmation": by.get((v.benchmark, v.param))} for v in verdicts]},
                      indent=1)


def run(repo: Path, verdicts, base: str, head: str, machine: str, threshold: float | None = None,
        tier: str | None = None, measure: Measure | None = None) -> list[Confirmation]:
    """The nightly's step: confirm (and bisect) the regressions, keep them under results/confirmations/."""
    if not any(v.verdict == "regression" for v in verdicts):
        return []
    found = confirm(verdicts, base, head, measure or ab_measurer(repo, threshold), repo=repo, tier=tier)
    save(repo / "results", machine, head, found)
    return found
