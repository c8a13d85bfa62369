"""A/A of compiled cases across fresh processes: spread per case, the autotuner's picks, and what the gate flags.

    .venv/bin/python scripts/compiled_aa.py results/pytest/h200/A.json results/pytest/h200/B.json ... \
        [--calibration K] [--between FILE] [--into studies/compiled-aa/README.md]

Each file is one `mlpbench run` (a fresh process, every compiled case compiled hermetically). For
every compiled case measured in all of them: device time per run, the spread (slowest / fastest
median − 1), how many different launch configurations Inductor's autotuner picked for its kernels,
and the gate's verdict of every run against the first at its default thresholds (mlpbench/judging/gate.py:
the compiled floor, noise multiple and bootstrap interval, and the between-run noise of
mlpbench/judging/between_runs.py), with the codegen difference when the picks differ (mlpbench/compile/codegen.py).
A flag whose generated code did not differ is an unexplained one.

The first K runs (--calibration, default all) measure each case's between-run noise (written to
--between when given: the file the gate reads for that machine); runs after them were not used to
measure it, so their flags are counted apart: the out-of-sample check of that threshold.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlpbench.judging import between_runs, gate
from mlpbench.compile import codegen, codegen_record
from mlpbench import atomic, registry, results


def _picks(info: dict) -> str:
    kernels = (info.get("codegen") or {}).get("kernels") or []
    return "; ".join(f"{k['name']}: " + ", ".join(f"{a}={b}" for a, b in sorted((k.get("config") or {}).items()))
                     for k in kernels) or "—"


def _point(path: Path, info: dict) -> gate.Point:
    samples = tuple(info["device_time_samples_s"])
    return gate.Point("aa", path.name, 0, "pytest.track_device_time", info["case"], "aa",
                      float(sorted(samples)[len(samples) // 2]), samples)


def table(paths: list[Path], allowances: dict[str, float] | None = None, calibration: int | None = None
          ) -> tuple[str, dict]:
    runs = [(p, results.sampled_records(p)) for p in paths]
    calibration = len(runs) if calibration is None else calibration
    order = {c.id: k for k, c in enumerate(registry.all_cases())}
    common = sorted((c for c in set.intersection(*(set(r) for _, r in runs)) if c in order), key=order.get)
    compiled = [c for c in common if registry.variant_of(registry.case_by_id(c)).compiles]
    rows = []
    counts = {"cases": len(compiled), "flagged": 0, "explained": 0, "picks differ": 0, "later flagged": 0,
              "later explained": 0, "later pairs": 0}
    for case in compiled:
        infos = [r[case] for _, r in runs]
        medians = [i["device_time_s"] for i in infos]
        picks = [_picks(i) for i in infos]
        distinct = len(set(picks))
        counts["picks differ"] += distinct > 1
        verdicts = []
        base = _point(runs[0][0], infos[0])
        between = (allowances or {}).get(case)
        threshold = None
        for k, ((path, _), info) in enumerate(zip(runs[1:], infos[1:]), start=2):
            v = gate.judge(base, _point(path, info), between=between)
            threshold = threshold or f"{v.threshold:.1%} ({v.threshold_from})"
            later = k > calibration
            counts["later pairs"] += later
            if v.verdict != "unchanged":
                explained = (infos[0].get("codegen_fingerprint") != info.get("codegen_fingerprint"))
                counts["flagged"] += 1
                counts["explained"] += explained
                counts["later flagged"] += later
                counts["later explained"] += later and explained
                changes = codegen_record.differences(infos[0].get("codegen"), info.get("codegen"))
                verdicts.append(f"run {k}: {v.verdict} {v.ratio:.3f}× "
                                f"({'; '.join(changes) if explained else 'unexplained'})")
        rows.append([case, " / ".join(f"{m * 1e6:,.1f}" for m in medians),
                     f"{max(medians) / min(medians) - 1:.1%}", str(distinct), picks[0] if distinct == 1 else
                     "<br>".join(dict.fromkeys(picks)), threshold or "—", "; ".join(verdicts) or "unchanged"])
    head = ["case", "device µs per run", "spread", "distinct picks", "launch configurations", "threshold (from)",
            "gate vs run 1"]
    md = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(md), counts


def alone_table(alone: list[Path], runs: list[Path]) -> str:
    """The hermetic check: each case measured in a process of its own (`alone`) against the same case
    measured after every other compiled case in one process (the A/A `runs`, the MLP's cases first)."""
    after = [results.sampled_records(p) for p in runs]
    head = ["case", "alone µs", "after the others µs per run", "alone / median after", "same picks"]
    md = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for path in alone:
        for case, info in results.sampled_records(path).items():
            others = [r[case] for r in after if case in r]
            if not others:
                continue
            times = sorted(o["device_time_s"] for o in others)
            median = times[len(times) // 2]
            same = all(_picks(o) == _picks(info) for o in others)
            per_run = " / ".join(f"{o['device_time_s'] * 1e6:,.2f}" for o in others)
            md.append(f"| {case} | {info['device_time_s'] * 1e6:,.2f} | {per_run} | "
                      f"{info['device_time_s'] / median:.3f} | {'yes' if same else 'no: ' + _picks(info)} |")
    return "\n".join(md)


def pinned_table(pinned: Path) -> str:
    """Cases rerun with MLPBENCH_PIN_AUTOTUNE: each against the run it was pinned to (its codegen
    record's pinned_from), with where each kernel's pick came from ("hit": read from the pinned entries)."""
    head = ["case", "pinned µs", "pinned-from run µs", "pinned / pinned-from", "same picks", "pick read from cache"]
    md = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    sources: dict[str, dict] = {}
    for case, info in results.sampled_records(pinned).items():
        source = (info.get("codegen") or {}).get("pinned_from")
        if not source:
            continue
        path = next((p for p in (Path(source), pinned.parent / Path(source).name) if p.exists()), None)
        base = (sources.setdefault(source, results.sampled_records(path)) if path else {}).get(case)
        states = ", ".join(sorted({str(k.get("autotune_cache_state")) for k in info["codegen"]["kernels"]}))
        md.append(f"| {case} | {info['device_time_s'] * 1e6:,.2f} | "
                  + (f"{base['device_time_s'] * 1e6:,.2f} | {info['device_time_s'] / base['device_time_s']:.3f} | "
                     f"{'yes' if _picks(base) == _picks(info) else 'no'}" if base else "— | — | —")
                  + f" | {states} |")
    return "\n".join(md)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--output", type=Path, help="write the page to this file as well")
    ap.add_argument("--into", type=Path, metavar="FILE",
                    help="write the page into FILE (a study's README) between its compiled_aa.py markers as well")
    ap.add_argument("--pinned", type=Path, help="a results file of cases rerun with MLPBENCH_PIN_AUTOTUNE")
    ap.add_argument("--alone", nargs="*", type=Path, default=[],
                    help="result files of cases each measured in a process of its own (gpu_run.sh alone)")
    ap.add_argument("--calibration", type=int, metavar="K",
                    help="the first K runs measure the between-run noise (default: all of them)")
    ap.add_argument("--between", type=Path, metavar="FILE",
                    help="write that measurement here (the format of results/between-runs/<machine>.json, which scripts/aa.py "
                         "writes from every variant)")
    a = ap.parse_args(argv)
    try:
        if a.into:  # before anything is written: a file without its markers fails at once
            atomic.read_section(a.into, "compiled_aa.py")
    except ValueError as e:
        print(f"compiled_aa: {e}", file=sys.stderr)
        return 2
    if len(a.files) < 2:
        print("compiled_aa: need at least two result files", file=sys.stderr)
        return 2
    k = len(a.files) if a.calibration is None else a.calibration
    if not 2 <= k <= len(a.files):
        print(f"compiled_aa: --calibration {k}: must be between 2 and the {len(a.files)} runs given", file=sys.stderr)
        return 2
    measured = between_runs.measure([results.sampled_records(p) for p in a.files[:k]])
    if a.between:
        between_runs.write(a.between, a.between.stem, [str(p) for p in a.files[:k]], measured)
    allowances = {case: e["allowance"] for case, e in measured.items() if "allowance" in e}
    md, counts = table(a.files, allowances, k)
    command = " ".join(["python scripts/compiled_aa.py", *map(str, a.files),
                        *(["--calibration", str(a.calibration)] if a.calibration is not None else []),
                        *(["--between", str(a.between)] if a.between else []),
                        *(["--alone", *map(str, a.alone)] if a.alone else []),
                        *(["--pinned", str(a.pinned)] if a.pinned else [])])
    later = len(a.files) - k
    which = f"Run {k + 1} was" if later == 1 else f"Runs {k + 1}–{len(a.files)} were"
    check = (f" {which} not used to measure the between-run noise: against run 1 the gate "
             f"flagged {counts['later flagged']} of {counts['later pairs']} case pairs, "
             f"{counts['later explained']} of them with a change in the generated code."
             if later else "")
    text = (f"# Compiled cases across fresh processes\n\nGenerated by `{command}`; regenerate it, never edit "
            "it. What each file is: the README beside the files. Each run is a fresh process with fresh "
            "Inductor and Triton caches, every compiled case compiled hermetically (mlpbench/compile/codegen.py); the "
            "gate's verdicts are at its default thresholds (mlpbench/judging/gate.py), each run against run 1, with "
            f"each case's between-run noise measured from runs 1–{k} (mlpbench/judging/between_runs.py: "
            f"{between_runs.MULTIPLE:g} standard deviations of the log median over the runs with the case's most "
            f"common generated code, at least {between_runs.MIN_RUNS} of them).\n\n"
            f"Runs: {', '.join(f'`{p}`' for p in a.files)}\n\n{counts['cases']} compiled cases in every run; "
            f"the autotuner's picks differed between runs for {counts['picks differ']}; the gate flagged "
            f"{counts['flagged']} run pairs against run 1, {counts['explained']} of them with a change in the "
            f"generated code.{check}\n\n{md}\n")
    if a.alone:
        text += ("\n## Alone against after the others\n\nEach case below in a fresh process of its own, against "
                 "the same case in the runs above (one process for every compiled case, the MLP's first).\n\n"
                 f"{alone_table(a.alone, a.files)}\n")
    if a.pinned:
        text += ("\n## Pinned to an earlier run's picks\n\nEach case below started from the autotuner's cache "
                 f"entries recorded in the run it names (`{codegen.PIN_ENV}`), in a fresh process.\n\n"
                 f"{pinned_table(a.pinned)}\n")
    if a.output:
        a.output.write_text(text)
    if a.into:
        atomic.write_section(a.into, "compiled_aa.py", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
