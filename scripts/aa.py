"""A/A of every variant across fresh processes and boxes: each case's between-run noise, what the gate reads.

    .venv/bin/python scripts/aa.py RUN.json ... [--calibration K] [--reference RUN.json] \
        [--between results/between-runs/h200.json] [--output FILE] [--into FILE]

Each RUN is one `mlpbench run` of one commit (a fresh process, fresh compiler caches), on some box
of one machine; the records say which (`box_id`). The first K runs (--calibration, default all)
measure each case's between-run noise (mlpbench/judging/between_runs.py: device time over every box, back-
to-back host time within boxes), written to --between when given. Cases of --reference (a run of the
whole tier on that machine) that the runs did not measure inherit a measured case's figures.

Runs after the first K were not used to measure anything: the out-of-sample check. The gate
(mlpbench/judging/gate.py, default thresholds) judges each of them against each calibration run for device
time, and against each other run of its own box for back-to-back host time (host time is compared on
one box only), once with the measured noise and once without it (the floors and the within-run rule
alone). A flag there is a verdict the gate would have given with no commit to blame.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from mlpbench.judging import between_runs, gate
from mlpbench.compile import codegen_record
from mlpbench import atomic, registry, results

DEVICE_METHOD, HOST_METHOD = "pytest.track_device_time", "pytest.track_host_time_back_to_back"
MICRO_S = 20e-6  # below this device time a case is microsecond-sized: launch and host path, not the GPU
GEMM_INTENSITY = 100  # FLOPs per byte moved above which a case is bound by its GEMMs, not by memory


def size_class(info: dict) -> str:
    if info["device_time_s"] < MICRO_S:
        return "µs-sized"
    if not info.get("bytes"):
        return "unknown"
    return "GEMM-bound" if (info.get("flops") or 0) / info["bytes"] > GEMM_INTENSITY else "memory-bound"


def picks_only(base: dict, head: dict) -> bool:
    """Whether two records of a case differ only in the autotuner's picks: what the gate lists as the
    autotuner's pick, not failing (gate.attribute). Another kernel, source or setting is not."""
    if base.get("codegen_fingerprint") == head.get("codegen_fingerprint"):
        return False
    changes = codegen_record.differences(base.get("codegen"), head.get("codegen"))
    return all(": Inductor chose " in c for c in changes)


def _has(info: dict, host: bool) -> bool:
    field = between_runs.HOST if host else between_runs.DEVICE
    return bool(info.get(field)) and bool(info.get(f"{field[:-2]}_samples_s"))


def _point(name: str, info: dict, host: bool) -> gate.Point:
    field = between_runs.HOST if host else between_runs.DEVICE
    samples = tuple(info[f"{field[:-2]}_samples_s"])
    return gate.Point("aa", name, 0, HOST_METHOD if host else DEVICE_METHOD, info["case"], "aa",
                      float(info[field]), samples)


def _judge(base: tuple[str, dict], head: tuple[str, dict], host: bool, allowance: float | None) -> str:
    (bn, b), (hn, h) = base, head
    boxes = (b.get("box_id"), h.get("box_id")) if host else None
    return gate.judge(_point(bn, b, host), _point(hn, h, host), between=allowance, boxes=boxes).verdict


def out_of_sample(runs: list[tuple[str, dict]], k: int, cases: dict[str, dict]) -> dict:
    """Flags of the runs after the first k: device time against every calibration run, host time
    against every other run of its box. {figure: {"pairs", "with", "without", "explained", "false",
    "flagged": [(case, pair, verdict)]}}; "with"/"without": flags with and without the measured noise;
    "explained": flags with it where the two runs differ only in the autotuner's picks (picks_only),
    which the gate does not fail on; "false": the other regressions with it, which would fail a gate
    with no commit to blame."""
    later = list(range(k, len(runs)))
    device_pairs = [(i, j) for j in later for i in range(k)]
    host_pairs = [(i, j) for j in later for i in range(j) if i != j]
    out = {}
    for figure, pairs, host in (("device", device_pairs, False), ("host", host_pairs, True)):
        counts = {"pairs": 0, "with": 0, "without": 0, "explained": 0, "false": 0, "flagged": []}
        for case, entry in cases.items():
            allowance = (entry.get(between_runs.HOST_ENTRY) or {}).get("allowance") if host else entry.get("allowance")
            for i, j in pairs:
                (bn, br), (hn, hr) = runs[i], runs[j]
                if case not in br or case not in hr or not _has(br[case], host) or not _has(hr[case], host):
                    continue
                if host and (not br[case].get("box_id") or br[case].get("box_id") != hr[case].get("box_id")):
                    continue
                counts["pairs"] += 1
                counts["without"] += _judge((bn, br[case]), (hn, hr[case]), host, None) != "unchanged"
                verdict = _judge((bn, br[case]), (hn, hr[case]), host, allowance)
                if verdict != "unchanged":
                    counts["with"] += 1
                    explained = picks_only(br[case], hr[case])
                    counts["explained"] += explained
                    counts["false"] += verdict == "regression" and not explained
                    counts["flagged"].append((case, f"run {j + 1} vs run {i + 1}",
                                              verdict + (" (the autotuner's pick)" if explained else "")))
        out[figure] = counts
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def summary(cases: dict[str, dict], infos: dict[str, dict]) -> str:
    """Per variant and size class: how many cases, and the median and largest allowance of each figure."""
    groups = defaultdict(list)
    for case, entry in cases.items():
        if case in infos:
            groups[(case.split("/")[1], size_class(infos[case]))].append(entry)
    head = ["variant", "size class", "cases", "device: median", "device: largest", "host: median", "host: largest"]
    md = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    order = {v: k for k, v in enumerate(("eager", "compiled", "maxautotune", "liger", "ours", "dualgemm",
                                         "ourscompiled", "dualgemmcompiled"))}
    for (variant, size), entries in sorted(groups.items(), key=lambda g: (order.get(g[0][0], 99), g[0][1])):
        dev = [e["allowance"] for e in entries if "allowance" in e]
        host = [e[between_runs.HOST_ENTRY]["allowance"] for e in entries
                if "allowance" in (e.get(between_runs.HOST_ENTRY) or {})]
        md.append(f"| {variant} | {size} | {len(entries)} | {_pct(statistics.median(dev) if dev else None)} | "
                  f"{_pct(max(dev, default=None))} | {_pct(statistics.median(host) if host else None)} | "
                  f"{_pct(max(host, default=None))} |")
    return "\n".join(md)


def per_case(cases: dict[str, dict], runs: list[tuple[str, dict]], infos: dict[str, dict]) -> str:
    order = {c.id: k for k, c in enumerate(registry.all_cases())}
    head = ["case", "size class", "device µs per run", "device allowance", "back-to-back host µs per run",
            "host allowance (within boxes)"]
    md = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for case in sorted(cases, key=lambda c: order.get(c, len(order))):
        entry = cases[case]
        host = entry.get(between_runs.HOST_ENTRY) or {}
        per = [r[case] for _, r in runs if case in r]
        md.append(f"| {case} | {size_class(infos[case])} | "
                  + " / ".join(f"{i['device_time_s'] * 1e6:,.1f}" for i in per) + f" | {_pct(entry.get('allowance'))} | "
                  + " / ".join(f"{i[between_runs.HOST] * 1e6:,.1f}" for i in per if i.get(between_runs.HOST))
                  + f" | {_pct(host.get('allowance'))} |")
    return "\n".join(md)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--calibration", type=int, metavar="K",
                    help="the first K runs measure the between-run noise (default: all of them)")
    ap.add_argument("--reference", type=Path, metavar="RUN",
                    help="a run of the whole tier: its cases that the runs did not measure inherit a measured one's noise")
    ap.add_argument("--between", type=Path, metavar="FILE",
                    help="write the noise here (results/between-runs/<machine>.json, what the gate reads)")
    ap.add_argument("--output", type=Path, help="write the page to this file as well")
    ap.add_argument("--into", type=Path, metavar="FILE",
                    help="write the page into FILE (a study's README) between its aa.py markers as well")
    a = ap.parse_args(argv)
    try:
        if a.into:  # before anything is written: a file without its markers fails at once
            atomic.read_section(a.into, "aa.py")
    except ValueError as e:
        print(f"aa: {e}", file=sys.stderr)
        return 2
    k = len(a.files) if a.calibration is None else a.calibration
    if not between_runs.MIN_RUNS <= k <= len(a.files):
        print(f"aa: --calibration {k}: must be between {between_runs.MIN_RUNS} and the {len(a.files)} runs given",
              file=sys.stderr)
        return 2
    runs = [(p.name, results.sampled_records(p)) for p in a.files]
    measured = between_runs.measure([r for _, r in runs[:k]])
    inherited = {}
    if a.reference:
        reference = results.sampled_records(a.reference)
        inherited = between_runs.inherit(measured, {c: i[between_runs.DEVICE] for c, i in reference.items()})
    if a.between:
        between_runs.write(a.between, a.between.stem, [str(p) for p in a.files[:k]], measured | inherited,
                           str(a.reference) if a.reference else None)
    infos = {}  # each case's record from the first run that has it, calibration runs first
    for _, r in runs:
        infos = r | infos
    checks = out_of_sample(runs, k, measured)
    boxes = Counter()
    lines = []
    for n, (path, (_, r)) in enumerate(zip(a.files, runs), start=1):
        box = Counter(i.get("box_id") or None for i in r.values()).most_common(1)[0][0]
        boxes[box] += n <= k and box is not None
        info = json.loads(path.read_text()).get("commit_info") or {}
        commit = (info.get("id") or "?")[:8] + (" (dirty)" if info.get("dirty") else "")
        lines.append(f"| {n} | `{path}` | {commit} | {f'{box:013x}' if box else 'unknown'} | "
                     f"{'calibration' if n <= k else 'out of sample'} | {len(r)} |")
    command = " ".join(["python scripts/aa.py", *map(str, a.files),
                        *(["--calibration", str(a.calibration)] if a.calibration is not None else []),
                        *(["--reference", str(a.reference)] if a.reference else []),
                        *(["--between", str(a.between)] if a.between else [])])
    check = []
    for figure, c in checks.items():
        what = ("device time, each run against each calibration run (across boxes)" if figure == "device" else
                "back-to-back host time, each run against each other run of its box")
        check.append(f"| {what} | {c['pairs']} | {c['without']} ({c['without'] / max(c['pairs'], 1):.1%}) | "
                     f"{c['with']} ({c['with'] / max(c['pairs'], 1):.1%}) | {c['explained']} | "
                     f"{c['false']} ({c['false'] / max(c['pairs'], 1):.1%}) |")
    flagged = [f"| {case} | {figure} | {pair} | {verdict} |" for figure, c in checks.items()
               for case, pair, verdict in c["flagged"]]
    text = (
        f"# Every variant across fresh processes and boxes\n\nGenerated by `{command}`; regenerate it, never "
        "edit it. What each file is: the README beside the files. Noise per case as the gate reads it "
        f"(mlpbench/judging/between_runs.py): device time, {between_runs.MULTIPLE:g} standard deviations of the log median "
        "over the calibration runs with the case's most common generated code, whichever box ran them; back-to-back "
        f"host time, {between_runs.MULTIPLE:g} pooled standard deviations within boxes.\n\n"
        "| run | file | commit | box | use | cases |\n| --- | --- | --- | --- | --- | --- |\n" + "\n".join(lines) + "\n\n"
        f"{len(measured)} cases measured in the calibration runs on {sum(1 for b in boxes if boxes[b])} boxes; "
        f"{len(inherited)} cases of the reference run without a device allowance of their own "
        f"({sum(c in measured for c in inherited)} of them measured, but too few times with one generated code) "
        "inherit a measured case's figures (listed at the end).\n\n"
        "## By variant and size class\n\nSize class: µs-sized below "
        f"{MICRO_S * 1e6:g} µs of device time, else GEMM-bound above {GEMM_INTENSITY} FLOPs per byte, else "
        "memory-bound.\n\n" + summary(measured, infos) + "\n\n"
        "## Out of sample\n\nThe runs that measured nothing, judged by the gate at its default thresholds, without "
        "and with the measured noise. Every flag here is one with no commit to blame.\n\n"
        "| comparison | case pairs | flagged without the noise | flagged with it | of those, the autotuner's pick | "
        "other regressions |\n| --- | --- | --- | --- | --- | --- |\n" + "\n".join(check) + "\n\n"
        + ("| case | figure | pair | verdict with the noise |\n| --- | --- | --- | --- |\n" + "\n".join(flagged) + "\n\n"
           if flagged else "")
        + "## Per case\n\n" + per_case(measured, runs, infos) + "\n")
    if inherited:
        text += ("\n## Inherited\n\n| case | inherits from |\n| --- | --- |\n"
                 + "\n".join(f"| {c} | {e[between_runs.INHERITS]} |" for c, e in sorted(inherited.items())) + "\n")
    if a.output:
        a.output.write_text(text)
    if a.into:
        atomic.write_section(a.into, "aa.py", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
