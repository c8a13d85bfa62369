"""Results pages: one markdown page per machine, generated from the result files, never typed.

    mlpbench report --pages docs/results

writes docs/results/<machine>.md for every machine found under results/ (pytest-benchmark runs in
pytest/ and pytest-shards/, ASV runs in asv/ and the folders beside it) and docs/results/README.md
listing them. Every table names the files its figures come from, and links them. The pages hold
no date of their own making, so regenerating them from the same files gives the same bytes:
tests/test_pages.py regenerates them and fails when the committed pages differ.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

from . import gate, registry, report, tables
from .ops import ROLES
from .results import Point, asv_points, pytest_runs, tokens

OURS = ROLES[-1]  # the variant role whose variants get a table against the faster peer

EXPECTATIONS = Path(__file__).with_name("expectations.toml")
OPS = tuple(registry.OPS)
# ASV folders beside asv/ hold a second run of a commit (an A/A check) or a branch's run, to be
# gated against asv/: their names start with "asv-".
EXTRA_ASV = "asv-"
# Cases this fast are dominated by launch jitter; the shard comparison reports them apart.
SMALL_CASE_S = 20e-6
AGREEMENT = 0.02


class Page:
    """Markdown being built for one machine, with links relative to the page's own folder."""

    def __init__(self, results: Path, folder: Path):
        self.results, self.folder, self.lines = results, folder, []

    def link(self, target: Path, text: str | None = None) -> str:
        rel = os.path.relpath(target, self.folder).replace(os.sep, "/")
        return f"[`{text or report.label(target, self.results)}`]({rel})"

    def add(self, *paragraphs: str) -> None:
        for text in paragraphs:
            self.lines += [text, ""]

    def table(self, t: tables.Table, files=()) -> None:
        self.add(t.markdown())
        files = sorted(set(files))
        if files:
            self.add("From " + ", ".join(self.link(self.results / Path(*Path(f).parts[1:])) for f in files) + ".")

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def _runs_of(wide: pd.DataFrame, t: tables.Table) -> list[str]:
    return sorted(set(wide.loc[wide["file"].isin(t.sources), "run"]))


def machines(results: Path) -> list[str]:
    found = set()
    for folder in ("pytest", "pytest-shards"):
        wide = report.load_wide(results, folder)
        if not wide.empty:
            found |= set(wide["machine"])
    for folder in sorted(results.glob(f"{EXTRA_ASV[:-1]}*")):
        found |= {d.name for d in folder.iterdir() if d.is_dir()} if folder.is_dir() else set()
    return sorted(found - {"unknown"})


def _saved(value: str) -> str:
    try:
        return dt.datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError):
        return "—"


def runs_table(wide: pd.DataFrame, results: Path) -> tables.Table:
    """One row per pytest-benchmark run: when, which commit, what it measured with, its ceilings."""
    rows = []
    for run, g in wide.groupby("run", sort=True):
        (read,) = pytest_runs([g["file"].iloc[0]])
        info, c = read.env, read.ceilings
        shards = len(info.get("mlpbench_shards", [])) if "mlpbench_shards" in info else 0
        rows.append([run.rsplit("/", 1)[-1], _saved(g["datetime"].iloc[0]), (g["commit"].iloc[0] or "—")[:7],
                     ", ".join(sorted(set(g["tier"].dropna()))), str(len(g)),
                     f"{info.get('gpu', '—')}" + (f" ×{info.get('gpu_count')}" if info.get("gpu_count", 1) > 1 else ""),
                     f"{info.get('driver', '—')} / {info.get('cuda', '—')}",
                     f"{info.get('torch', '—')} / {info.get('triton', '—')} / {info.get('liger_kernel', '—')} / "
                     f"{info.get('kernels', '—')}",
                     tables.copy_ceiling(c),
                     f"{c['gemm_bf16_flops'] / 1e12:,.0f} TFLOP/s" if c.get("gemm_bf16_flops") else "—",
                     str(shards) if shards else "1"])
    return tables.Table(["file", "saved (UTC)", "commit", "tier", "records", "GPU", "driver / CUDA",
                         "torch / triton / liger-kernel / kernels", "copy ceiling", "bf16 GEMM ceiling", "processes"],
                        rows)


def structure_table(wide: pd.DataFrame) -> tables.Table:
    """Kernels per call by op and variant from the newest record of each case, split-K kernels apart."""
    from . import expectations

    split_k = tomllib.loads(EXPECTATIONS.read_text())["patterns"]["split_k"]
    latest = tables.latest_per_case(wide)
    latest = latest[latest["kernel_names"].notna()]
    rows = []
    for op in OPS:
        for variant in tables.VARIANT_ORDER:
            g = latest[(latest["op"] == op) & (latest["variant"] == variant)]
            if g.empty:
                continue
            splits = [sum(bool(re.search(split_k, k)) for k in names) for names in g["kernel_names"]]
            main = sorted({int(round(n - s)) for n, s in zip(g["kernels_per_call"], splits)})
            split_at = [f"{dtype} {shape_id}" for dtype, _, shape_id in sorted(
                {(r.dtype, tokens(r.shape) or 0, r.shape_id) for r, s in zip(g.itertuples(), splits) if s})]
            unmet = 0
            for r in g.itertuples():
                found = registry.shape_of(op, r.shape_id)
                unmet += bool(expectations.check(op, variant, r.shape, list(r.kernel_names), r.kernels_per_call,
                                              layout=found.layout if found else None, dtype=r.dtype))
            memsets = sorted({f"{m:g}" for m in g["memsets_per_call"].dropna()})
            rows.append([op, variant, "–".join(map(str, (main[0], main[-1]))) if len(main) > 1 else str(main[0]),
                         f"{len(split_at)} of {len(g)}" + (f": {', '.join(split_at)}" if split_at else ""),
                         ", ".join(memsets) or "—", f"{len(g) - unmet} of {len(g)}"])
    return tables.Table(["op", "variant", "kernels per call (split-K apart)", "cases with split-K kernels",
                         "memsets per call", "cases meeting expectations.toml"], rows, sorted(set(latest["file"])))


def shard_section(page: Page, shards: pd.DataFrame, single: pd.DataFrame) -> None:
    """A sharded run against the single-process records of the run nearest in time, case by case."""
    for run, g in shards.groupby("run", sort=True):
        when = g["datetime"].iloc[0]
        near = single.assign(gap=(pd.to_datetime(single["datetime"], utc=True, format="ISO8601")
                                  - pd.to_datetime(when, utc=True, format="ISO8601")).abs())
        near = near.sort_values(["gap", "run"], kind="stable").drop_duplicates("case")
        both = g.merge(near[["case", "device_time_s", "run"]], on="case", suffixes=("", "_single"))
        both = both[both["device_time_s"].notna() & both["device_time_s_single"].notna()]
        if both.empty:
            continue
        ratio = both["device_time_s"] / both["device_time_s_single"]
        big = both["device_time_s_single"] >= SMALL_CASE_S
        rows = []
        for name, mask in (("all cases", np.ones(len(both), bool)), (f"cases of {SMALL_CASE_S * 1e6:.0f} µs or more", big),
                           (f"cases under {SMALL_CASE_S * 1e6:.0f} µs", ~big)):
            r = ratio[mask]
            if r.empty:
                continue
            lo, hi = np.percentile(r, [5, 95])
            rows.append([name, str(len(r)), f"{np.median(r):.3f}", f"{lo:.3f}–{hi:.3f}",
                         f"{(abs(r - 1) <= AGREEMENT).mean():.0%}"])
        per_shard = g["shard"].value_counts().sort_index()
        page.add(f"### {Path(run).name}",
                 f"{len(g)} records from {len(per_shard)} processes, one per GPU "
                 f"({', '.join(f'shard {int(k)}: {n}' for k, n in per_shard.items())}), against the single-GPU "
                 "record of each case from the run nearest in time. Ratio: sharded device time over single-GPU.")
        files = [run, *sorted(set(both["run_single"]))]
        page.table(tables.Table(["cases", "count", "median ratio", "5th–95th percentile",
                                 f"within ±{AGREEMENT:.0%}"], rows), files)
        worst = both.assign(ratio=ratio).loc[big].sort_values("ratio", key=lambda r: -abs(r - 1), kind="stable")
        if not worst.empty:
            page.add(f"Largest differences, cases of {SMALL_CASE_S * 1e6:.0f} µs or more:")
            page.table(tables.Table(["case", "single µs", "sharded µs", "ratio"], [
                [r.case, f"{r.device_time_s_single * 1e6:,.1f}", f"{r.device_time_s * 1e6:,.1f}", f"{r.ratio:.3f}"]
                for r in worst.head(5).itertuples()]), files)


def asv_held(points: dict[str, list[tuple[Path, Point]]], machine: str) -> tables.Table:
    """What each ASV folder holds for this machine, per result file."""
    rows = []
    for folder, pts in points.items():
        by_file: dict[Path, list[Point]] = {}
        for path, p in pts:
            if p.machine == machine:
                by_file.setdefault(path, []).append(p)
        for path, ps in sorted(by_file.items()):
            ok = [p for p in ps if p.value is not None]
            kinds = sorted({report.asv_metric(p.benchmark) for p in ok})
            rows.append([f"{folder}/", ps[0].commit[:7],
                         dt.datetime.fromtimestamp(ps[0].date / 1000, dt.timezone.utc).strftime("%Y-%m-%d"),
                         path.name, str(len({p.param for p in ok})), str(len(ok)), str(len(ps) - len(ok)),
                         ", ".join(sorted({p.version for p in ps})), ", ".join(kinds)])
    return tables.Table(["folder", "commit", "commit date", "file", "cases", "values", "failed", "benchmark version",
                         "benchmarks"], rows)


def _keys(points: list[Point], commit: str) -> set:
    return {(p.benchmark, p.param, p.version) for p in points if p.commit == commit and p.value is not None}


def gate_rows(points: dict[str, list[tuple[Path, Point]]], machine: str, results_root: Path | None = None
              ) -> tuple[tables.Table, list[str]]:
    """`mlpbench check` on the committed ASV runs: each commit of asv/ against the previous one it
    shares benchmarks with (what the nightly does), and each commit of a folder beside asv/ against the
    commit of asv/ nearest in date that shares benchmarks with it (the same commit, for an A/A pair)."""
    base = [p for _, p in points.get("asv", []) if p.machine == machine]
    dated = sorted({(p.date, p.commit) for p in base})
    rows, files = [], set()
    for folder, pts in points.items():
        head = [p for _, p in pts if p.machine == machine]
        for date, h in sorted({(p.date, p.commit) for p in head}):
            keys = _keys(head, h)
            if folder == "asv":
                earlier = [c for d, c in dated if (d, c) < (date, h) and keys & _keys(base, c)]
                b = earlier[-1] if earlier else None
            else:
                sharing = [(abs(d - date), c) for d, c in dated if keys & _keys(base, c)]
                b = min(sharing)[1] if sharing else None
            if b is None:
                continue
            # the results root: codegen records and between-run noise, as the nightly reads them
            verdicts = gate.compare(head, b, h, machine, base_points=base, codegen_root=results_root)
            count = {k: sum(v.verdict == k for v in verdicts) for k in ("regression", "improvement")}
            flagged = sorted(v.param + ("" if v.benchmark.endswith(".track_device_time")
                                        else f" ({report.asv_metric(v.benchmark)})")
                             for v in verdicts if v.verdict == "regression")
            rows.append([f"{folder}/ {h[:7]}", f"asv/ {b[:7]}", str(len(verdicts)), str(count["regression"]),
                         str(count["improvement"]), str(sum(v.verdict.endswith("(not gated)") for v in verdicts)),
                         ", ".join(f"`{f}`" for f in flagged[:8]) + (" …" if len(flagged) > 8 else "") or "—"])
            files |= {path for path, p in pts if p.commit == h and p.machine == machine}
            files |= {path for path, p in points["asv"] if p.commit == b and p.machine == machine}
    return tables.Table(["head", "base", "compared", "regressed", "improved", "moved, not gated", "regressed cases"],
                        rows), sorted(files)


def machine_page(results: Path, folder: Path, machine: str) -> str:
    page = Page(results, folder)
    wide = report.load_wide(results)
    wide = wide[wide["machine"] == machine] if not wide.empty else wide
    df, _ = report.tidy(results)
    df = df[df["machine"] == machine]
    page.add(f"# Results on {machine}",
             f"Generated by `mlpbench report --pages {os.path.relpath(folder, results.parent)}` from the files "
             f"under `{results.name}/`; regenerate it, never edit it: `tests/test_pages.py` fails when this page "
             "and the files disagree. Each table links the files its figures come from. Figures are medians; "
             f"one whose IQR is over {tables.NOISY_SPREAD:.0%} of its median is marked noisy with its IQR, and "
             f"so is every ratio built on it. Each variant is compared with {tables.BASELINES} from the same run, "
             "the newest run that measured the shape (the summary instead takes each variant's own newest record). "
             "How each figure is measured: the README's \"What is measured\".")
    if not wide.empty:
        page.add("## Runs")
        page.table(runs_table(wide, results))
        page.add("## Summary", report.SUMMARY_NOTE)
        overview = report.summary(wide)
        page.table(overview, overview.sources)
        page.add("## Ours against the faster peer",
                 "Each of our variants' device time over the fastest of the op's compiler variants (Inductor) and "
                 "peers' kernels (Liger) at each shape (below 1: ours is faster). MB moved counts the fewest bytes one "
                 "call must move; the ceiling is the one measured in the same run.")
        for op in OPS:
            for k, mine in enumerate(registry.OPS[op].of_role(OURS)):
                t = tables.peer_table(wide, op, mine)
                if t:
                    page.add(f"### {op}" if k == 0 else f"### {op}: {mine}")
                    page.table(t, _runs_of(wide, t))
        page.add("## Per op", "Cells: median time in µs · GB/s (GeLU·mul) or TFLOP/s (GEMM ops) · speedup over "
                              f"{tables.BASELINES} of the same run.")
        for op in OPS:
            t = tables.variant_table(wide, op)
            if t:
                page.add(f"### {op}")
                page.table(t, _runs_of(wide, t))
        if "kernel_names" in wide and wide["kernel_names"].notna().any():
            page.add("## Launch structure",
                     "Kernels each call launches, from the profiler pass of the newest record of each case. "
                     "Where cuBLAS splits a GEMM along K it launches a kernel of its own for it; those are "
                     "counted apart, as are memsets. The last column checks each record against "
                     "`mlpbench/expectations.toml` as it stands today.")
            t = structure_table(wide)
            page.table(t, _runs_of(wide, t))
        sweeps = [(op, t) for op in tables.sweep_ops() if (t := tables.overhead_rows(wide, op))]
        if sweeps:
            page.add("## Host overhead crossover")
        for op, sweep in sweeps:
            page.add(report.overhead_verdict(wide, op))
            page.table(sweep, _runs_of(wide, sweep))
    compile_ = report.compile_table(df)
    if compile_:
        page.add("## Compile tax", "From ASV's compile benchmarks, each a fresh process with empty Inductor and "
                                   "Triton caches; the newest commit's figures.")
        page.table(compile_, compile_.sources)
    shards = report.load_wide(results, "pytest-shards")
    if not shards.empty and not wide.empty:
        shards = shards[shards["machine"] == machine]
        if not shards.empty:
            page.add("## Sharded over several GPUs",
                     "`mlpbench run --shards` runs one pytest process per GPU and merges what they write. Device "
                     "time should not depend on it.")
            shard_section(page, shards, wide)
    points = {f.name: asv_points(f) for f in sorted(results.iterdir())
              if f.is_dir() and (f.name == "asv" or f.name.startswith(EXTRA_ASV))}
    held = asv_held(points, machine)
    if held:
        page.add("## ASV results held", "Per result file: the commit, the cases it holds, values recorded and "
                                        "failed, and the benchmark version (a new timing method is a new version; "
                                        "`mlpbench check` compares equal versions only).")
        page.table(held)
    gated, files = gate_rows(points, machine, results)
    if gated:
        detection = results.parent / "docs" / "regression-detection.md"
        page.add("## The regression gate on these runs",
                 "`mlpbench check` on each commit of `asv/` against the previous commit it shares benchmarks "
                 "with, as the nightly runs it, and on each commit of the folders beside `asv/` (a second run of "
                 "one commit, a branch's run) against the commit of `asv/` nearest in date that shares benchmarks "
                 "with it. Thresholds and test: the README's \"Regression gate\". "
                 "How often it finds planted slowdowns, and its false alarms: "
                 + page.link(detection, "docs/regression-detection.md") + ".")
        page.table(gated, [report.label(f, results) for f in files])
    return page.text()


def write(results: Path, folder: Path) -> list[Path]:
    """Write <machine>.md per machine and README.md listing them into `folder`; return their paths."""
    results, folder = results.resolve(), folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for machine in machines(results):
        path = folder / f"{machine}.md"
        path.write_text(machine_page(results, folder, machine))
        written.append(path)
    index = ["# Results pages", "",
             f"Generated by `mlpbench report --pages {os.path.relpath(folder, results.parent)}` from the files under "
             f"`{results.name}/`, one page per machine:", ""]
    index += [f"- [{p.stem}]({p.name})" for p in written]
    (folder / "README.md").write_text("\n".join(index) + "\n")
    return [*written, folder / "README.md"]
