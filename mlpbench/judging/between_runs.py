"""How far a case moves between fresh processes when nothing about it changed: the part of the
gate's threshold that the samples of one process cannot show.

Within one process a case's device-time samples are tight, so the gate's within-run rule (three
robust coefficients of variation of them, at least the floor) is sharp. Between fresh processes,
the same code moves further: a GEMM's clocks under its power cap, which box and which process it
ran in, and for compiled cases the autotuner's picks. A gate that flags those moves blames a
commit for the process it ran in.

So each case's between-run noise is measured, not guessed, from A/A runs: one commit measured in
fresh processes with fresh compiler caches, on several boxes of the machine. For device time it is
the standard deviation of the log of the case's median over the runs in which its generated code
was the same (one codegen fingerprint: same kernels, sources, picks and settings), at least
MIN_RUNS of them, whichever box ran them: the gate compares device time across the boxes of one
machine name, so their differences are part of its noise. The gate's threshold for the case is then
at least MULTIPLE of those (the same three noise units as the within-run rule). The same medians'
spread within boxes (below) is kept too, under `one_box`: what `mlpbench ab` and the nightly's
confirmation read, since they measure base and head on one box.

Host time queued back to back (`host_time_back_to_back_s`, what an eager loop pays per call) is
compared only between runs of one box (gate.py), so its noise is the spread within a box: the
pooled standard deviation of the log medians about each box's own mean (each run's `box_id`; runs
that recorded none count as one box), from at least MIN_RUNS - 1 degrees of freedom.

A case of the reference run (a run of the whole tier) without an allowance of its own, because
the A/A runs did not measure it or measured it too few times, inherits the figures of a case that
has one (`inherits`): of its op, variant and dtype if there is one, else of its op and variant, else
of its variant and dtype, else of its variant; among those, the one nearest in device time in the
reference run (log distance). Each figure (device, one box, host) is inherited from the nearest
case that has that figure. A case that no reference run measured keeps the within-run rule alone.

The measurement lives in results/between-runs/<machine>.json, written by `scripts/aa.py
--between` from the runs it names, and is found beside the results read, else in the repository's
own results/ (`locate`); a machine without one keeps the within-run rule alone, and every verdict
of it says so (`missing_line`).

File format (`version`): 1 holds device time only; 2 adds `host_method` and, per case,
`host_time_back_to_back` = {runs, box_id, medians_s, log_sd, allowance}, from the runs of one box;
3 measures host time within boxes ({runs, box_ids, medians_s, dof, log_sd, allowance}), adds
`boxes` (distinct known boxes among a case's device runs), `one_box` (device time's spread within
boxes: {dof, log_sd, allowance}), the `reference` run and inherited figures (`inherits` naming the case
each was copied from). `load` reads all three.

Importing this module imports no torch.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from .. import results

FOLDER = "between-runs"  # under the results root, beside asv/ and codegen/
MULTIPLE = 3.0
MIN_RUNS = 3  # fewer same-code runs give no allowance: a standard deviation of two points is not one
VERSION = 3
VERSIONS = (1, 2, 3)  # the formats load() reads
DEVICE = "device_time_s"  # the figures measured, by record field
HOST = "host_time_back_to_back_s"
HOST_ENTRY = "host_time_back_to_back"  # a case's entry for HOST
INHERITS = "inherits"  # a figure copied from the measured case it names
ONE_BOX = "one_box"  # a case's entry for device time's spread within boxes


# The repository's own results folder: where a machine's noise is found when the results being read
# are a copy elsewhere (a CI artifact, another checkout's results/asv) with no between-runs/ beside them.
# MLPBENCH_OWN_RESULTS names another (the tests name an empty one: they never read the checkout's).
OWN_RESULTS = Path(__file__).resolve().parents[2] / "results"


def _own_results() -> Path:
    return Path(os.environ.get("MLPBENCH_OWN_RESULTS") or OWN_RESULTS)


def path_for(results_root: Path, machine: str) -> Path:
    return Path(results_root) / FOLDER / f"{machine}.json"


def locate(results_root: Path | None, machine: str) -> Path | None:
    """The noise file of `machine`: beside the results read (`results_root`/between-runs/), else the
    repository's own (OWN_RESULTS); None where neither exists. One lookup for check, ab and the nightly,
    so the same results give the same verdicts wherever they lie."""
    if results_root is None:
        return None
    for root in (Path(results_root), _own_results()):
        if (found := path_for(root, machine)).is_file():
            return found
    return None


def missing_line(machine: str, results_root: Path | None) -> str:
    """What a verdict of `machine` says when it has no noise file: where it looked and what it uses."""
    places = [path_for(r, machine) for r in (Path(results_root), _own_results())] if results_root is not None else []
    shown = " or ".join(dict.fromkeys(str(p) for p in places))
    return (f"no between-run noise for {machine} ({shown or 'none given'} not found): its thresholds are the floors and "
            "within-run noise alone; scripts/aa.py --between writes one")


def _spread(medians: list[float]) -> dict:
    if len(medians) < MIN_RUNS:
        return {}
    sd = statistics.stdev(math.log(m) for m in medians)
    return {"log_sd": sd, "allowance": MULTIPLE * sd}


def within_boxes(medians: list[float], boxes: list) -> dict:
    """The spread of `medians` within boxes (`boxes[k]` measured `medians[k]`; None or 0: unknown,
    one group): pooled standard deviation of the logs about each box's mean, with its degrees of
    freedom; no log_sd or allowance below MIN_RUNS - 1 of them."""
    groups = defaultdict(list)
    for m, box in zip(medians, boxes):
        groups[box or None].append(math.log(m))
    dof = sum(len(g) - 1 for g in groups.values())
    out = {"dof": dof}
    if dof >= MIN_RUNS - 1:
        ss = sum(sum((v - statistics.fmean(g)) ** 2 for v in g) for g in groups.values())
        sd = math.sqrt(ss / dof)
        out |= {"log_sd": sd, "allowance": MULTIPLE * sd}
    return out


def measure(runs: list[dict[str, dict]]) -> dict[str, dict]:
    """Per case measured in at least two of `runs`: the spread of its median device time over the
    runs that share its most common codegen fingerprint (cases without one, not compiled, use every
    run), and of back-to-back host time over those of them with one, within boxes. `runs`: one
    {case id: record extra_info} per fresh process (records())."""
    counts = Counter(case for r in runs for case in r)
    out = {}
    for case in sorted(c for c, n in counts.items() if n >= 2):
        infos = [r[case] for r in runs if case in r]
        fingerprint, _ = Counter(i.get("codegen_fingerprint") for i in infos).most_common(1)[0]
        same = [i for i in infos if i.get("codegen_fingerprint") == fingerprint]
        entry = {"same_code_runs": len(same), "runs": len(infos),
                 "boxes": len({i.get("box_id") for i in same if i.get("box_id")}),
                 "medians_s": [i[DEVICE] for i in same]}
        entry |= _spread(entry["medians_s"])
        entry[ONE_BOX] = within_boxes(entry["medians_s"], [i.get("box_id") for i in same])
        hosted = [i for i in same if i.get(HOST)]
        if hosted:
            host = {"runs": len(hosted), "box_ids": [i.get("box_id") for i in hosted],
                    "medians_s": [i[HOST] for i in hosted]}
            entry[HOST_ENTRY] = host | within_boxes(host["medians_s"], host["box_ids"])
        out[case] = entry
    return out


def _kin(case: str) -> tuple[str, ...]:
    op, variant, dtype, _ = case.split("/", 3)
    return op, variant, dtype


def inherit(measured: dict[str, dict], reference: dict[str, float]) -> dict[str, dict]:
    """Entries for the cases of `reference` ({case id: device time}, a run of the whole tier) without
    a device allowance in `measured` (not measured, or too few runs), each figure copied from the
    nearest measured case with that figure: among those of its op, variant and dtype, else its op and
    variant, else its variant and dtype, else its variant, the nearest in reference device time."""
    figures = {  # figure: how to read its allowance from an entry, and where to put it in the new one
        "device": (lambda e: e.get("allowance"), ()),
        ONE_BOX: (lambda e: (e.get(ONE_BOX) or {}).get("allowance"), (ONE_BOX,)),
        HOST_ENTRY: (lambda e: (e.get(HOST_ENTRY) or {}).get("allowance"), (HOST_ENTRY,)),
    }
    keys = (lambda k: k, lambda k: k[:2], lambda k: (k[1], k[2]), lambda k: (k[1],))
    out = {}
    for case, time in sorted(reference.items()):
        own = measured.get(case, {})
        if not time or "allowance" in own:
            continue
        kin, entry = _kin(case), {}
        for read, where in figures.values():
            if read(own) is not None:  # a figure the case has of its own stays its own
                continue
            donors = {c: reference[c] for c, e in measured.items() if read(e) is not None and reference.get(c)}
            for key in keys:
                near = [d for d in donors if key(_kin(d)) == key(kin)]
                if near:
                    src = min(near, key=lambda d: (abs(math.log(donors[d] / time)), d))
                    figure = {INHERITS: src, "allowance": read(measured[src])}
                    if where:
                        entry[where[0]] = figure
                    else:
                        entry |= figure
                    break
        if entry:
            out[case] = own | entry
    return out


def write(path: Path, machine: str, sources: list[str], cases: dict[str, dict], reference: str | None = None) -> None:
    from ..atomic import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {
        "version": VERSION, "machine": machine, "multiple": MULTIPLE, "min_runs": MIN_RUNS,
        "method": ("per case: standard deviation of log(median device time) over the A/A runs with its most "
                   "common codegen fingerprint, on every box; allowance = multiple × that"),
        "host_method": (f"per case, under {HOST_ENTRY!r}: pooled standard deviation of log(median {HOST}) "
                        "about each box's mean over the same runs (box_id; null: unknown, one group), "
                        f"from at least {MIN_RUNS - 1} degrees of freedom; allowance = multiple × that"),
        "one_box_method": (f"per case, under {ONE_BOX!r}: the spread of the same device-time medians within "
                           "boxes, as host time's; for comparisons made on one box (mlpbench ab)"),
        "inherit_method": (f"a case of the reference run without a device allowance of its own copies each "
                           f"figure it lacks from the case named by that figure's {INHERITS!r}: of its op, variant "
                           "and dtype, else op and variant, else variant and dtype, else variant; the nearest in "
                           "device time in the reference run among those with that figure"),
        "runs": sources, "reference": reference, "cases": cases})


def load(results_root: Path | None, machine: str, figure: str = DEVICE, one_box: bool = False) -> dict[str, float]:
    """{case id: allowance} of `figure` (DEVICE or HOST) for `machine` ({} when nothing was measured
    there), inherited entries included. `one_box`: device time's spread within boxes, for comparisons
    of one box (mlpbench ab); formats before 3 hold none, and give their device allowance. A file that
    cannot be read is an error naming it: a gate that silently fell back to tighter thresholds would
    flag the noise this file exists to explain."""
    return {case: float(e["allowance"]) for case, e in _entries(results_root, machine, figure, one_box).items()
            if "allowance" in e}


def load_dof(results_root: Path | None, machine: str, figure: str = DEVICE, one_box: bool = False) -> dict[str, int]:
    """{case id: degrees of freedom} of the standard deviation behind each allowance `load` gives, where
    the file says: a spread within boxes records them; one over every box has its medians' count less
    one. An inherited figure has none: its degrees of freedom describe another case, so a reader must
    not weigh it as this case's measurement."""
    out = {}
    for case, e in _entries(results_root, machine, figure, one_box).items():
        if "allowance" not in e or "inherits" in e:
            continue
        if isinstance(e.get("dof"), int):
            out[case] = e["dof"]
        elif isinstance(e.get("medians_s"), list) and len(e["medians_s"]) > 1:
            out[case] = len(e["medians_s"]) - 1
        elif isinstance(e.get("same_code_runs"), int) and e["same_code_runs"] > 1:
            out[case] = e["same_code_runs"] - 1
    return out


def _entries(results_root: Path | None, machine: str, figure: str, one_box: bool) -> dict[str, dict]:
    if figure not in (DEVICE, HOST):
        raise ValueError(f"between-run noise of {figure!r}: only {DEVICE} and {HOST} are measured")
    if results_root is None:  # explicitly none: the within-run rule alone
        return {}
    path = locate(results_root, machine)
    if path is None:
        return {}
    try:
        doc = results.between_runs_doc(path, VERSIONS)
        version = doc.get("version", 1)
        def pick(e):
            if figure == HOST:
                return e.get(HOST_ENTRY) or {}
            if one_box and version >= 3:
                return e.get(ONE_BOX) or {}
            return e

        entries = {case: pick(e) for case, e in doc["cases"].items()}
        for e in entries.values():  # a malformed allowance is the file's fault: say so here
            if "allowance" in e:
                float(e["allowance"])
        return entries
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a readable between-runs file ({type(exc).__name__}: {exc})") from None
