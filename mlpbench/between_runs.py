"""How far a case moves between fresh processes when nothing about it changed: the part of the
gate's threshold that the samples of one process cannot show.

Within one process a case's device-time samples are tight, so the gate's within-run rule (three
robust coefficients of variation of them, at least the floor) is sharp. Between fresh processes,
the same generated code with the same launch configurations moves further (a GEMM's clocks under
its power cap, which box and which process it ran in; studies/compiled-aa/ has the study). A gate
that flags those moves blames a commit for the process it ran in.

So each case's between-run noise is measured, not guessed: the standard deviation of the log of
its median device time over A/A runs (fresh processes, fresh compiler caches) in which its
generated code was the same (one codegen fingerprint: same kernels, sources, picks and settings),
at least MIN_RUNS of them. The gate's threshold for the case is then at least MULTIPLE of those
(the same three noise units as the within-run rule). The measurement lives in
results/between-runs/<machine>.json, written by `scripts/compiled_aa.py --between` from the runs
it names; a machine or case without one keeps the within-run rule alone.

Host time queued back to back (`host_time_back_to_back_s`, what an eager loop pays per call) gets
the same measurement from the same runs, under the case's `host_time_back_to_back` entry, for the
gate's host-time threshold. Host time depends on the box as well as on the code, so only runs of
one box count (its `box_id`: the runs of the most common box among those that recorded one). Runs
that recorded no box are used together, with `box_id` null: they may span boxes, and their spread
then holds the boxes' differences too, so the allowance errs wide.

File format (`version`): 1 holds device time only; 2 adds `host_method` and, per case,
`host_time_back_to_back` = {runs, box_id, medians_s, log_sd, allowance} (log_sd and allowance only
from at least MIN_RUNS runs).

Importing this module imports no torch.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path

FOLDER = "between-runs"  # under the results root, beside asv/ and codegen/
MULTIPLE = 3.0
MIN_RUNS = 3  # fewer same-code runs give no allowance: a standard deviation of two points is not one
VERSION = 2
VERSIONS = (1, 2)  # the formats load() reads
DEVICE = "device_time_s"  # the figures measured, by record field
HOST = "host_time_back_to_back_s"
HOST_ENTRY = "host_time_back_to_back"  # a case's entry for HOST


def path_for(results_root: Path, machine: str) -> Path:
    return Path(results_root) / FOLDER / f"{machine}.json"


def _spread(medians: list[float]) -> dict:
    if len(medians) < MIN_RUNS:
        return {}
    sd = statistics.stdev(math.log(m) for m in medians)
    return {"log_sd": sd, "allowance": MULTIPLE * sd}


def _one_box(infos: list[dict]) -> tuple[int | None, list[dict]]:
    """(box, its runs): the most common box among the runs that recorded one (box_id 0 is
    envinfo.BOX_UNKNOWN), else (None, every run)."""
    known = Counter(i["box_id"] for i in infos if i.get("box_id"))
    if not known:
        return None, infos
    box, _ = known.most_common(1)[0]
    return box, [i for i in infos if i.get("box_id") == box]


def measure(runs: list[dict[str, dict]]) -> dict[str, dict]:
    """Per case measured in every run: the spread of its median over the runs that share its most
    common codegen fingerprint (cases without one, not compiled, use every run), for device time and,
    from those of them with one box (_one_box), for back-to-back host time. `runs`: one
    {case id: record extra_info} per fresh process."""
    common = set.intersection(*(set(r) for r in runs)) if runs else set()
    out = {}
    for case in sorted(common):
        infos = [r[case] for r in runs]
        fingerprint, _ = Counter(i.get("codegen_fingerprint") for i in infos).most_common(1)[0]
        same = [i for i in infos if i.get("codegen_fingerprint") == fingerprint]
        entry = {"same_code_runs": len(same), "runs": len(infos),
                 "medians_s": [i[DEVICE] for i in same]}
        entry |= _spread(entry["medians_s"])
        hosted = [i for i in same if i.get(HOST)]
        if hosted:
            box, used = _one_box(hosted)
            host = {"runs": len(used), "box_id": box, "medians_s": [i[HOST] for i in used]}
            entry[HOST_ENTRY] = host | _spread(host["medians_s"])
        out[case] = entry
    return out


def write(path: Path, machine: str, sources: list[str], cases: dict[str, dict]) -> None:
    from .atomic import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {
        "version": VERSION, "machine": machine, "multiple": MULTIPLE, "min_runs": MIN_RUNS,
        "method": ("per case: standard deviation of log(median device time) over the A/A runs with its most "
                   "common codegen fingerprint; allowance = multiple × that"),
        "host_method": (f"per case, under {HOST_ENTRY!r}: the same for the median back-to-back host time "
                        f"({HOST}) over those of the runs that one box measured (box_id; null: the runs "
                        "recorded no box and may span boxes)"),
        "runs": sources, "cases": cases})


def load(results_root: Path | None, machine: str, figure: str = DEVICE) -> dict[str, float]:
    """{case id: allowance} of `figure` (DEVICE or HOST) for `machine` ({} when nothing was measured
    there). A file that cannot be read is an error naming it: a gate that silently fell back to
    tighter thresholds would flag the noise this file exists to explain."""
    if figure not in (DEVICE, HOST):
        raise ValueError(f"between-run noise of {figure!r}: only {DEVICE} and {HOST} are measured")
    if results_root is None:
        return {}
    path = path_for(results_root, machine)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        version = doc.get("version", 1)
        if version not in VERSIONS:
            raise ValueError(f"format version {version!r}, this reader knows {', '.join(map(str, VERSIONS))}")
        entries = {case: e if figure == DEVICE else e.get(HOST_ENTRY) or {} for case, e in doc["cases"].items()}
        return {case: float(e["allowance"]) for case, e in entries.items() if "allowance" in e}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a readable between-runs file ({type(exc).__name__}: {exc})") from None
