"""`mlpbench nightly`: what a GPU runner does every night, and what a developer can run by hand.

1. record the checked-out commit with one plain `asv run` in this environment (`mlpbench asv`:
   standard tier on a GPU, quick on a CPU, compile benchmarks included);
2. publish the HTML report (`asv publish`, assets served locally);
3. gate it against the previous commit recorded for this machine (`mlpbench check`); host time,
   compared between runs of one box only, against the previous commit this box recorded where
   another box recorded that one (gate.host_on_one_box);
4. write a markdown summary (to $GITHUB_STEP_SUMMARY when set), with the night's wall time against
   the previous night's on this machine (results/nightly/<machine>.json, which `mlpbench store` keeps);
   a night more than 20% slower than the previous one is warned of, not failed.

Exit status: 0 when nothing regressed, 1 on a regression, 3 when a step failed (ASV, publishing).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

from .asv import run as asv_run
from .judging import gate
from . import results

# A night slower than the previous night on its machine by more than this is warned of in the summary:
# the suite's own cost is a budget too, and a step up in it is cheapest to find the morning after.
WALL_GROWTH = 0.20


def _say(msg: str) -> None:
    print(f"[nightly] {msg}", flush=True)


def _step(name: str, cmd: list[str], cwd: Path) -> bool:
    _say(f"{name}: {asv_run.shown(cmd)}")
    ok = subprocess.run(cmd, cwd=cwd).returncode == 0
    _say(f"{name}: {'done' if ok else 'FAILED'}")
    return ok


def history_path(repo: Path, machine: str) -> Path:
    """Where a machine's nights are kept: a JSON list of {commit, date, wall_s, bench (asv_run.family),
    steps (seconds per step)}, oldest first."""
    return repo / "results" / "nightly" / f"{machine}.json"


def _duration(s: float) -> str:
    minutes, seconds = divmod(round(s), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{s:.1f} s"


def wall_time_lines(wall_s: float, history: list[dict], bench: str, steps: dict[str, float]) -> list[str]:
    """The summary's lines on this night's wall time (`steps`: seconds per step), against the previous
    night in `history` that ran the same benchmarks; a "**Warning:**" line when it grew by more than
    WALL_GROWTH."""
    split = ", ".join(f"{name} {_duration(t)}" for name, t in steps.items() if name != "confirm")
    lines = [f"Wall time: {_duration(wall_s)}" + (f" ({split})" if split else "")
             # the confirmation runs on regressed nights only: it stays out of the total nights compare
             + (f"; then the same-box confirmation, {_duration(steps['confirm'])}, not counted." if "confirm" in steps
                else ".")]
    previous = [n for n in history if n.get("bench") == bench]
    if not previous:
        return lines + ["No earlier night of these benchmarks on this machine to compare it with."]
    last = previous[-1]
    what = f"{_duration(last['wall_s'])} ({str(last.get('commit', ''))[:8]}, {last.get('date', 'undated')})"
    if last["wall_s"] > 0 and wall_s > last["wall_s"] * (1 + WALL_GROWTH):
        return lines + [f"**Warning:** this night took {wall_s / last['wall_s'] - 1:.0%} longer than the previous "
                        f"night on this machine, {what}: more than the {WALL_GROWTH:.0%} allowed."]
    return lines + [f"The previous night on this machine took {what}."]


def record_night(path: Path, history: list[dict], night: dict) -> None:
    from .atomic import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, [*history, night])


def run(args) -> int:
    started = time.perf_counter()
    repo = args.repo.resolve()
    made = asv_run.command(args)
    if isinstance(made, int):
        return made
    cmd, head, machine = made
    bench = asv_run.family(args, cmd[cmd.index("--bench") + 1])
    steps: dict[str, float] = {}
    summary_path = args.summary or (Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY")
                                    else repo / "results" / "nightly-summary.md")
    lines = [f"# mlpbench nightly: {head[:8]} on {machine}", ""]
    failed = []
    t0 = time.perf_counter()
    from .asv import parallel as asv_parallel  # one `asv run` per GPU where the box has several, merged into one file

    gpus = asv_parallel.gpu_count()
    from .asv.measure import progress

    # ASV starts while the workers compile; its benchmark processes wait for them before measuring.
    # Each case's line (measured or why not, and its seconds) is said as it comes, so a long night shows
    # where its time goes; --show-stderr adds what a benchmark that failed or skipped printed.
    with asv_run.ahead(args, say=_say, overlap=True) as info, progress(_say):
        record = cmd + ["--record-samples", "--show-stderr"]
        if not (_step("record", record, repo) if gpus == 1
                else asv_parallel.record(record, repo, gpus, say=_say) == 0):
            failed.append("ASV run")
    asv_run.plain_setup_cache_keys(repo / "results" / "asv" / "benchmarks.json")  # as a plain `asv run` writes it
    steps["record"] = time.perf_counter() - t0
    if info is not None:
        steps["of it, compiles made ahead"] = info["wall_s"]
    if not args.no_publish:
        t0 = time.perf_counter()
        if not _step("publish", [sys.executable, "-m", "asv", "publish"], repo):
            failed.append("asv publish")
        steps["publish"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    verdicts, confirmations = [], []
    try:
        points = [p for p in gate.load(repo / "results" / "asv") if p.machine == machine]
        earlier = sorted({(p.date, p.commit) for p in points if p.commit != head})
        if not any(p.commit == head for p in points):
            failed.append("no results recorded for this commit")
        elif not earlier:
            lines.append("First commit recorded on this machine: nothing to compare with.")
        else:
            base = earlier[-1][1]
            threshold = None if args.threshold is None else args.threshold / 100
            verdicts = gate.compare(points, base, head, machine, threshold, codegen_root=repo / "results")
            verdicts, host_base = gate.host_on_one_box(points, verdicts, base, head, machine, threshold,
                                                       codegen_root=repo / "results")
            _say(f"gate: {base[:8]} → {head[:8]}" + (f" (host time: {host_base[:8]} → {head[:8]})" if host_base else ""))
            lines.append(f"Compared with {base[:8]}, the previous commit recorded here.")
            if host_base:
                lines.append(f"Host time that another box recorded for {base[:8]} was compared with {host_base[:8]} "
                             "instead, the previous commit this box recorded.")
            lines += ["", gate.markdown(verdicts)]
            if not getattr(args, "no_confirm", False):  # regressions measured again here: box noise fails nothing
                from .judging import confirm

                t1 = time.perf_counter()
                confirmations = confirm.run(repo, verdicts, base, head, machine, threshold,
                                            tier=getattr(args, "tier", None))
                if confirmations:  # nothing flagged, nothing measured again: no step to report
                    steps["confirm"] = time.perf_counter() - t1
                    lines += ["", confirm.markdown(confirmations)]
    except gate.GateInputError as exc:
        failed.append(f"gate: {exc}")
    steps["gate"] = time.perf_counter() - t0 - steps.get("confirm", 0.0)
    regressed = [v for v in verdicts if v.verdict == "regression"]
    if confirmations:
        from .judging import confirm

        regressed = confirm.failing(verdicts, confirmations)
    # the suite's own cost: same-box confirmation (and bisection) runs only on a regressed night
    wall_s = time.perf_counter() - started - steps.get("confirm", 0.0)
    kept = history_path(repo, machine)
    history = results.nightly_history(kept)
    lines[2:2] = [*wall_time_lines(wall_s, history, bench, steps), ""]
    if not failed:  # a night with a failed step is not one to compare the next with
        record_night(kept, history, {"commit": head, "bench": bench, "wall_s": round(wall_s, 1),
                                     "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                     "steps": {k: round(v, 1) for k, v in steps.items() if k != "confirm"}})
    if failed:
        lines += ["", "## Failed steps", "", *[f"- {f}" for f in failed]]
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text("\n".join(lines) + "\n")
    if getattr(args, "json", None):
        from .judging import confirm

        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(confirm.as_json(machine, head, verdicts, confirmations) + "\n")
    _say(f"summary: {summary_path}")
    print("\n".join(lines))
    if failed:
        return 3
    return 1 if regressed else 0
