"""`mlpbench nightly`: what a GPU runner does every night, and what a developer can run by hand.

1. record the checked-out commit with one plain `asv run` in this environment (`mlpbench asv`:
   standard tier on a GPU, quick on a CPU, compile benchmarks included);
2. publish the HTML report (`asv publish`, assets served locally);
3. gate it against the previous commit recorded for this machine (`mlpbench check`); host time,
   compared between runs of one box only, against the previous commit this box recorded where
   another box recorded that one (gate.host_on_one_box);
4. write a markdown summary (to $GITHUB_STEP_SUMMARY when set).

Exit status: 0 when nothing regressed, 1 on a regression, 3 when a step failed (ASV, publishing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from . import asv_run, gate


def _say(msg: str) -> None:
    print(f"[nightly] {msg}", flush=True)


def _step(name: str, cmd: list[str], cwd: Path) -> bool:
    _say(f"{name}: {' '.join(cmd)}")
    ok = subprocess.run(cmd, cwd=cwd).returncode == 0
    _say(f"{name}: {'done' if ok else 'FAILED'}")
    return ok


def run(args) -> int:
    repo = args.repo.resolve()
    made = asv_run.command(args)
    if isinstance(made, int):
        return made
    cmd, head, machine = made
    summary_path = args.summary or (Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY")
                                    else repo / "results" / "nightly-summary.md")
    lines = [f"# mlpbench nightly: {head[:8]} on {machine}", ""]
    failed = []
    if not _step("record", cmd + ["--record-samples"], repo):
        failed.append("ASV run")
    if not args.no_publish and not _step("publish", [sys.executable, "-m", "asv", "publish"], repo):
        failed.append("asv publish")

    verdicts = []
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
    except gate.GateInputError as exc:
        failed.append(f"gate: {exc}")
    regressed = [v for v in verdicts if v.verdict == "regression"]
    if failed:
        lines += ["", "## Failed steps", "", *[f"- {f}" for f in failed]]
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text("\n".join(lines) + "\n")
    _say(f"summary: {summary_path}")
    print("\n".join(lines))
    if failed:
        return 3
    return 1 if regressed else 0
