"""`mlpbench report`: read every result file once, compute the report's sections from what was read,
render them as markdown, one self-contained HTML page and CSV; never the other way round.

    mlpbench report --results results --output docs/report [--pages docs/results]

`load` reads results/: pytest-benchmark runs (pytest/<machine>/, each with its cases' outcomes)
and ASV runs (asv/), with the records and noise the gate reads (codegen/, between-runs/).
`sections` computes the report from that, for every machine or, after `Loaded.of`, for one (the
results pages, mlpbench/pages.py). `write` renders report.md, report.html and report.csv: the HTML
embeds its plots and loads nothing remote, the markdown links the HTML for the plots, the CSV holds
one row per measurement. A file that cannot be read is skipped with a warning naming it.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html
import io
import json
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from . import expectations, fleet, gate, registry, tables
from .ops import ELEMENT_SIZE, ROLES
from .record import METRICS, NAMES
from .results import PytestRun, Point, asv_points, pytest_files, pytest_runs

# The record fields (mlpbench/record.py) that reach report.csv from pytest-benchmark records, each
# with the column holding the IQR of its samples (tables.frame), where it has samples.
METRICS_FROM_PYTEST = {"device_time_s": "device_iqr_s", "host_time_s": "host_iqr_s",
                       "peak_memory_bytes": None, "kernels_per_call": None}
assert set(METRICS_FROM_PYTEST) <= NAMES, set(METRICS_FROM_PYTEST) - NAMES
# ASV names its host-time benchmark `time_host` in older result files and `track_host_time` in newer
# ones; both are one metric. Benchmarks are told apart by method name only: the module that holds
# them has been renamed and may be again.
ASV_METRIC_ALIASES = {"time_host": "track_host_time"}
# `dirty_tree`: whether the pytest-benchmark run came from a working tree with uncommitted changes
# (tables.DIRTY); empty for ASV rows, whose result files record no such thing.
MEASUREMENT_COLUMNS = ["source", "run", "machine", "commit", "date", "version", "op", "variant", "dtype",
                       "shape_id", "flops", "bytes", "metric", "value", "iqr", "noisy", "dirty_tree"]

# The copy and GEMM rates a run measures are rates, not bounds: GeLU·mul reads two tensors per one
# written and can stream a little faster than a copy. A rate exceeded by more than this margin was
# itself measured low (a copy captured in a CUDA graph runs on the copy engines, below what kernels reach).
SUSPECT_MARGIN = 1.10
# More lines than this in one axes can no longer be followed by eye; a figure with more is split.
LINES_PER_AXES = 12


def label(path: Path, results: Path) -> str:
    """A file's name as the repository spells it (results/pytest/h200/….json), wherever `results` lies."""
    return f"{results.name}/{Path(path).relative_to(results).as_posix()}"


def asv_metric(benchmark: str) -> str:
    method = benchmark.rsplit(".", 1)[-1]
    return ASV_METRIC_ALIASES.get(method, method)


# --- load ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Loaded:
    """Everything `load` read; every section is computed from this alone. Records, outcomes and
    measurements carry `dirty_tree`: whether their run came from a dirty tree (tables.DIRTY)."""

    root: Path  # the results folder
    runs: list[PytestRun]  # oldest first within each machine (file names are UTC stamps)
    records: pd.DataFrame  # one row per pytest-benchmark record (tables.frame), `run` its file's label
    points: list[tuple[Path, Point]]  # every ASV result point, with its file
    outcomes: pd.DataFrame  # one row per case outcome of a run: machine, run, datetime, case, outcome, reason
    measurements: pd.DataFrame  # one row per measurement, pytest and ASV (MEASUREMENT_COLUMNS): report.csv
    run_walls: dict = dataclasses.field(default_factory=dict)  # run label → its `mlpbench_run`, where it has one
    nights: list = dataclasses.field(default_factory=list)  # the nightly's wall times (nights), oldest first
    dirty: set = dataclasses.field(default_factory=set)  # labels of the runs made from a dirty tree (tables.DIRTY)

    @property
    def machines(self) -> list[str]:
        found = {r.machine for r in self.runs} | {p.machine for _, p in self.points} | set(self.outcomes["machine"])
        return sorted(found - {"unknown"})

    @property
    def measured_rates(self) -> dict:
        """Each machine's measured copy and GEMM rates (the dict runs store as `ceilings`), from its
        newest pytest run."""
        return {r.machine: r.ceilings for r in self.runs}

    def label(self, path: Path) -> str:
        return label(path, self.root)

    def of(self, machine: str) -> Loaded:
        """The same results, narrowed to one machine."""
        def rows(df):
            return df[df["machine"] == machine] if not df.empty else df

        runs = [r for r in self.runs if r.machine == machine]
        names = {self.label(r.path) for r in runs}
        return Loaded(self.root, runs, rows(self.records), [(f, p) for f, p in self.points if p.machine == machine],
                      rows(self.outcomes), rows(self.measurements),
                      {k: v for k, v in self.run_walls.items() if k in names},
                      [n for n in self.nights if n["machine"] == machine], self.dirty & names)


def load(results: Path) -> Loaded:
    """The one reader of results/ for the report and the pages."""
    results = Path(results)
    runs = pytest_runs(pytest_files(results))
    records = tables.frame(runs)
    beyond = {label(r.path, results): _beyond_records(r.path) for r in runs}
    dirty = {name for name, (_, is_dirty) in beyond.items() if is_dirty}
    if not records.empty:
        records["run"] = [label(Path(f), results) for f in records["file"]]
        records["dirty_tree"] = records["run"].isin(dirty)
    points = asv_points(results / "asv")
    outcomes = _outcomes(results, runs)
    outcomes["dirty_tree"] = outcomes["run"].isin(dirty)
    return Loaded(results, runs, records, points, outcomes, _measurements(results, records, points),
                  {name: wall for name, (wall, _) in beyond.items() if wall}, nights(results), dirty)


def nights(results: Path) -> list[dict]:
    """Every night that `mlpbench nightly` kept in results/nightly/<machine>.json, with its `machine`
    and `file`, oldest first per machine."""
    from .nightly import load_history

    out = []
    for path in sorted((results / "nightly").glob("*.json")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unreadable history: no nights, as for the nightly itself
            found = load_history(path)
        out += [n | {"machine": path.stem, "file": label(path, results)} for n in found]
    return out


def loaded(results: Path | Loaded) -> Loaded:
    return results if isinstance(results, Loaded) else load(results)


def _outcomes(results: Path, runs: list[PytestRun]) -> pd.DataFrame:
    """Each run's case outcomes (tables.outcomes), and those of runs that timed nothing (an outcomes
    file alone, in its machine's folder)."""
    found = [(r.path, r.machine, r.datetime) for r in runs]
    alone = [p for p in sorted((results / "pytest").rglob("*" + tables.OUTCOMES_SUFFIX))
             if not p.name.startswith(".") and not p.with_name(p.name.removesuffix(tables.OUTCOMES_SUFFIX) + ".json").is_file()]
    for p in alone:
        try:  # named like a run: a UTC stamp first
            when = dt.datetime.strptime(p.name[:16], "%Y%m%dT%H%M%SZ").isoformat()
        except ValueError:
            when = p.name
        found.append((p, p.parent.name, when))
    rows = []
    for path, machine, when in found:
        try:
            read = tables.outcomes(path)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            warnings.warn(f"skipping the outcomes of {path}: not readable ({exc})", stacklevel=2)
            continue
        rows += [{"machine": machine, "run": label(path, results), "datetime": when, "case": o.get("case"),
                  "outcome": o.get("outcome"), "reason": o.get("reason") or ""} for o in read]
    return pd.DataFrame(rows, columns=["machine", "run", "datetime", "case", "outcome", "reason"])


def _measurements(results: Path, wide: pd.DataFrame, points: list[tuple[Path, Point]]) -> pd.DataFrame:
    rows = []
    for r in wide.to_dict("records"):
        for metric, spread in METRICS_FROM_PYTEST.items():
            value = r.get(metric)
            if value is None or pd.isna(value):
                continue
            iqr = r.get(spread) if spread else None
            iqr = None if iqr is None or pd.isna(iqr) else float(iqr)
            rows.append({"source": "pytest", "run": r["run"], "machine": r["machine"], "commit": r["commit"],
                         "date": None, "version": None, "op": r["op"], "variant": r["variant"], "dtype": r["dtype"],
                         "shape_id": r["shape_id"], "flops": r["flops"], "bytes": r["bytes"], "metric": metric,
                         "value": float(value), "iqr": iqr,
                         "noisy": bool(r.get(tables.NOISE_OF.get(metric)) or tables.noise(value, iqr)),
                         "dirty_tree": bool(r["dirty_tree"])})
    for path, p in points:
        if p.value is None:
            continue
        iqr = float(np.subtract(*np.percentile(p.samples, [75, 25]))) if p.samples and len(p.samples) > 1 else None
        metric = asv_metric(p.benchmark)
        # single synchronised calls: the host-time tests of tables.noise apply
        single = metric == "track_host_time" and p.samples
        rows.append({"source": "asv", "run": label(path, results), "machine": p.machine, "commit": p.commit,
                     "date": p.date, "version": p.version, "op": p.op, "variant": p.variant, "dtype": p.dtype,
                     "shape_id": p.shape_id, "flops": None, "bytes": None,
                     "metric": metric, "value": p.value, "iqr": iqr,
                     "noisy": bool(tables.noise(p.value, iqr, min(p.samples) if single else None,
                                                list(p.samples) if single else None)),
                     "dirty_tree": None})
    return pd.DataFrame(rows, columns=MEASUREMENT_COLUMNS)


# --- summary -------------------------------------------------------------------------------------

# The times the summary ranks variants by, each with its name in the summary's `time` column: what
# the GPU spends (CUDA-graph replay) and what an eager serving loop pays per call (calls queued back
# to back, no graphs). Replaying a graph hides CPU dispatch, so a variant can win one and lose the other.
SUMMARY_TIMES = {"device_time_s": "device", "host_time_back_to_back_s": "host, back to back"}
PAIRED_NAME = "host, back to back, paired"
HOST_TIMES = ("host_time_back_to_back_s", tables.PAIRED)
SUMMARY_NOTE = ("Per machine, op and dtype, the variants ranked twice: by device time (`device`: CUDA-graph "
                "replay, what the GPU spends) and by host time per call with calls queued back to back, without "
                "graphs (`host, back to back`: what an eager serving loop pays). Each row names the variant "
                "fastest at most shapes, its lead over the next fastest where it wins, its speedup over "
                f"{tables.BASELINES} at every shape, and its rate at its largest shape; device time is also rated "
                "against the copy or GEMM rate measured in the same run (a rate, not a bound: a case can exceed "
                "it; docs/method.md says why). Every variant of the op is compared, each by its "
                "own newest record of the case that has that time, so two variants' figures may come from two "
                f"runs: the files are named below the table. Where a run was paired (`mlpbench run --paired`), a "
                f"third ranking (`{PAIRED_NAME}`) reads each variant's back-to-back host time as its ratio to "
                f"{tables.BASELINES}, their rounds interleaved in one process, times one time of that baseline per shape: "
                "the host's drift between variants timed apart cancels out. A machine without device time (no GPU) is ranked by "
                f"the host time of one synchronised call (`{tables.HOST_ONLY}`).")


def _rate(op: str, r, seconds: float) -> str:
    if op in tables.COMPUTE_BOUND:
        tflops = r["flops"] / seconds / 1e12
        return f"{tflops:,.1f} TFLOP/s" if tflops >= 1 else f"{tflops * 1e3:,.1f} GFLOP/s"
    gbps = r["bytes"] / seconds / 1e9
    return f"{gbps / 1e3:,.2f} TB/s" if gbps >= 100 else f"{gbps:,.1f} GB/s"


def _of_measured_rate(r) -> str:
    if pd.isna(r["of_measured_rate"]):
        return "no rate measured" if pd.isna(r["device_time_s"]) else "—"
    if r["op"] in tables.COMPUTE_BOUND:
        what = f"{r['dtype']} GEMM {r['gemm_rate_flops'] / 1e12:,.0f} TFLOP/s"
    else:
        what = f"copy {r['copy_rate_Bps'] / 1e12:,.2f} TB/s"
    suspect = "; that rate suspect (measured low)" if r["of_measured_rate"] > SUSPECT_MARGIN else ""
    return f"{r['of_measured_rate']:.0%} of {what}{suspect}"


def _spread(values) -> str:
    v = sorted(values)
    if not v:
        return "—"
    mid, lo, hi = (f"{x:.2f}" for x in (float(np.median(v)), v[0], v[-1]))
    return f"{mid}×" if lo == hi else f"{mid}× ({lo}–{hi}×)"


def _ranking(op: str, d: pd.DataFrame, column: str) -> list[str]:
    """The summary's cells after `time`, from `d`: one op and dtype, each variant's newest record
    of each shape that has `column`."""
    if d.empty:
        return ["not recorded by any run", "—", "—", "—", "—"]
    d = d.assign(loud=d[tables.NOISE_OF[column]] != "")
    ranked = [s.sort_values(column, kind="stable") for _, s in d.groupby("shape_id", sort=False)]
    wins = Counter(s.iloc[0]["variant"] for s in ranked)
    best = max(wins, key=lambda v: (wins[v], -tables.VARIANT_ORDER.index(v) if v in tables.VARIANT_ORDER else 0))
    won = [s for s in ranked if s.iloc[0]["variant"] == best]
    margins = [s.iloc[1][column] / s.iloc[0][column] for s in won if len(s) > 1]
    runner_up = Counter(s.iloc[1]["variant"] for s in won if len(s) > 1)
    noisy = any(bool(s.iloc[0]["loud"]) or (len(s) > 1 and bool(s.iloc[1]["loud"])) for s in won)
    mine = d[d["variant"] == best].set_index("shape_id")
    base = d[d["variant"] == tables.baseline(op)].set_index("shape_id").reindex(mine.index)
    over = (base[column] / mine[column]).dropna()
    over_noisy = bool((mine["loud"] | base["loud"].eq(True))[over.index].any())
    big = mine.sort_values("flops" if op in tables.COMPUTE_BOUND else "bytes").iloc[-1]
    lead = f"{_spread(margins)} over {runner_up.most_common(1)[0][0]}" if margins else "only variant"
    return [f"{best}, {wins[best]} of {len(ranked)} shapes",
            lead + (" (noisy)" if noisy else ""),
            _spread(over.tolist()) + (" (noisy)" if over_noisy else ""),
            f"{_rate(op, big, big[column])}, {big.name}" + (" (noisy)" if big["loud"] else ""),
            # the measured rates rate device time only: host time measures the CPU too
            "—" if column in HOST_TIMES else _of_measured_rate(big)]


def _paired(g: pd.DataFrame, op: str) -> pd.DataFrame:
    """Each variant's newest paired record (one machine, op and dtype), its paired ratio times one
    time per shape, the baseline's back-to-back time from the baseline's newest paired record: two
    variants from two runs compare by their ratios alone, each free of its own process's drift."""
    newest = tables.newest_per_variant(g, tables.PAIRED_RATIO)
    base = newest[newest["variant"] == tables.baseline(op)].set_index("shape_id")["host_time_back_to_back_s"]
    times = newest[tables.PAIRED_RATIO] * newest["shape_id"].map(base)
    return newest.assign(**{tables.PAIRED: times}).dropna(subset=[tables.PAIRED])


def summary(wide: pd.DataFrame) -> tables.Table:
    """Per machine, op and dtype, one row per time of SUMMARY_TIMES (SUMMARY_NOTE says what each
    cell holds), every variant from its own newest record of each case (tables.newest_per_variant).
    Where the op and dtype have no device time there (no GPU), single-call host time stands in for it."""
    rows, runs = [], set()
    for (machine, op, dtype), g in wide.groupby(["machine", "op", "dtype"], sort=False):
        times = dict(SUMMARY_TIMES)
        if g["device_time_s"].isna().all():
            times = {"host_time_s": tables.HOST_ONLY} | {c: t for c, t in times.items() if c != "device_time_s"}
        if g[tables.PAIRED_RATIO].notna().any():
            times[tables.PAIRED] = PAIRED_NAME
        for column, name in times.items():
            newest = _paired(g, op) if column == tables.PAIRED else tables.newest_per_variant(g, column)
            runs |= set(newest["run"])
            rows.append([machine, op, dtype, name, *_ranking(op, newest, column)])
    return tables.Table(["machine", "op", "dtype", "time", "fastest", "its lead where it wins",
                         f"its speedup over {tables.BASELINES}", "its rate at the largest shape",
                         "of that run's measured copy or GEMM rate"], rows, sorted(runs))


# --- plots ---------------------------------------------------------------------------------------

def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def speedup_cases(wide: pd.DataFrame, machine: str, op: str) -> pd.DataFrame:
    """The records speedup_plot draws: the newest run of each shape of the op on the machine."""
    return tables.latest_per_case(wide[(wide["machine"] == machine) & (wide["op"] == op)])


def speedup_plot(wide: pd.DataFrame, machine: str, op: str) -> str | None:
    """Bars: speedup over the op's baseline for each shape × dtype, one bar per variant, from the
    newest run of each shape; bars built on a noisy figure are hatched. The legend sits outside the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    d = speedup_cases(wide, machine, op)
    base = tables.baseline(op)
    if d.empty or base not in set(d["variant"]):
        return None
    speed = d.pivot_table(index=["shape_id", "dtype"], columns="variant", values="speedup_vs_eager", sort=False)
    noisy = d.pivot_table(index=["shape_id", "dtype"], columns="variant", values="speedup_noisy", sort=False,
                          aggfunc="max").reindex_like(speed).fillna(False).astype(bool)
    order = [v for v in tables.VARIANT_ORDER if v in speed.columns]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(speed)), 3.6))
    width = 0.8 / len(order)
    x = np.arange(len(speed))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, v in enumerate(order):
        bars = ax.bar(x + (k - (len(order) - 1) / 2) * width, speed[v].to_numpy(), width, label=v, color=colors[k])
        for bar, loud in zip(bars, noisy[v].to_numpy()):
            if loud:
                bar.set_hatch("///")
                bar.set_edgecolor("black")
    ax.axhline(1, color="k", lw=0.8)
    time = "device time" if d["device_time_s"].notna().all() else "host time (no device time here)"
    ax.set_ylabel(f"speedup over {base}\n({time})")
    ax.set_title(f"{op} on {machine}: speedup over {base}, per shape and dtype")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{s} {dt}" for s, dt in speed.index], rotation=55, ha="right", fontsize=7)
    handles = ax.get_legend_handles_labels()[0]
    if noisy.to_numpy().any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="noisy (IQR > 10% of median)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _png(fig)


def roofline_cases(wide: pd.DataFrame, machine: str) -> pd.DataFrame:
    """The records roofline_plot draws: the newest run of each case on the machine with device time."""
    return tables.latest_per_case(wide[(wide["machine"] == machine) & wide["device_time_s"].notna()])


def roofline_plot(wide: pd.DataFrame, machine: str) -> str | None:
    """Achieved rate per case against the copy and GEMM rates measured in the newest run (one panel
    per bound)."""
    import matplotlib.pyplot as plt

    d = roofline_cases(wide, machine)
    if d.empty:
        return None
    newest = d.sort_values(["datetime", "file"]).iloc[-1]
    fig, (mem, gemm) = plt.subplots(1, 2, figsize=(12, 4))
    memory_bound = d[~d["op"].isin(tables.COMPUTE_BOUND)]
    compute = d[d["op"].isin(tables.COMPUTE_BOUND)]
    for variant in tables.VARIANT_ORDER:
        g = memory_bound[memory_bound["variant"] == variant]
        if not g.empty:
            mem.scatter(g["bytes"] / 1e6, g["bytes"] / g["device_time_s"] / 1e12, label=variant, s=14)
        g = compute[compute["variant"] == variant]
        if not g.empty:
            gemm.scatter(g["flops"] / g["bytes"], g["flops"] / g["device_time_s"] / 1e12, label=variant, s=14)
    copy = newest["copy_rate_Bps"]
    if not pd.isna(copy) and not memory_bound.empty:
        achieved = (memory_bound["bytes"] / memory_bound["device_time_s"]).max()
        # A copy rate far below what kernels achieved was measured low; say so on the plot itself.
        suspect = " — far below achieved: suspect" if achieved > SUSPECT_MARGIN * copy else ""
        mem.axhline(copy / 1e12, ls="--", color="grey", label=f"measured copy rate{suspect}")
    for dtype, ls in {"bf16": ":", "fp16": "-.", "fp32": "--"}.items():
        rate = d.loc[d["dtype"] == dtype, "gemm_rate_flops"].dropna()
        if not rate.empty:
            gemm.axhline(rate.iloc[-1] / 1e12, ls=ls, color="grey", label=f"measured {dtype} GEMM rate")
    mem.set(xscale="log", xlabel="bytes moved per call (MB)", ylabel="achieved TB/s",
            title=f"memory-bound on {machine}: {', '.join(sorted(set(memory_bound['op'])))}")
    gemm.set(xscale="log", xlabel="arithmetic intensity (FLOP per byte)", ylabel="achieved TFLOP/s",
             title=f"compute on {machine}: {', '.join(sorted(set(compute['op'])))}")
    for ax in (mem, gemm):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return _png(fig)


def history_series(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """ASV device time per case and commit, relative to the case's first commit, from the newest
    benchmark version of each case only (a new timing method starts a new series, as in ASV's own
    report). Cases measured at one commit have no history and are left out; the counts say so."""
    d = df[(df["source"] == "asv") & (df["metric"] == "track_device_time")].copy()
    left_out = {"one commit": 0, "older versions": 0}
    if d.empty:
        return d, left_out
    d["case"] = d["op"] + "/" + d["variant"] + "/" + d["dtype"] + "/" + d["shape_id"]
    d = d.sort_values(["date", "commit"])
    newest = d.groupby(["machine", "case"])["version"].transform("last")
    left_out["older versions"] = int((d["version"] != newest).sum())
    d = d[d["version"] == newest]
    # two runs of one commit (two result files) give that commit the median of their values
    d = d.groupby(["machine", "op", "variant", "dtype", "shape_id", "case", "commit"], as_index=False).agg(
        value=("value", "median"), date=("date", "min"))
    commits = d.groupby(["machine", "case"])["commit"].transform("nunique")
    left_out["one commit"] = int(d.loc[commits < 2, "case"].nunique())
    d = d[commits >= 2].sort_values(["date", "commit"])
    d["relative"] = d["value"] / d.groupby(["machine", "case"])["value"].transform("first")
    return d, left_out


def history_plots(df: pd.DataFrame) -> list[tuple[str, str]]:
    """Small multiples per machine and op: one axes per variant (columns) and dtype (rows), one line
    per shape, each case's device time relative to its first commit on a log axis. At most
    LINES_PER_AXES lines per axes (more shapes split the figure); the legend sits below the axes."""
    import matplotlib.pyplot as plt

    d, _ = history_series(df)
    out = []
    for (machine, op), g in d.groupby(["machine", "op"], sort=False):
        commits = g.drop_duplicates("commit").sort_values(["date", "commit"])["commit"].tolist()
        pos = {c: k for k, c in enumerate(commits)}
        shapes = list(dict.fromkeys(g.sort_values("shape_id")["shape_id"]))
        variants = [v for v in tables.VARIANT_ORDER if v in set(g["variant"])] + sorted(
            set(g["variant"]) - set(tables.VARIANT_ORDER))
        dtypes = [t for t in registry.DTYPES if t in set(g["dtype"])]
        parts = [shapes[k:k + LINES_PER_AXES] for k in range(0, len(shapes), LINES_PER_AXES)]
        colors = plt.get_cmap("tab20" if len(shapes) > 10 else "tab10").colors
        color = {s: colors[k % len(colors)] for k, s in enumerate(shapes)}
        lo = min(0.98, float(g["relative"].min()) * 0.99)
        hi = max(1.02, float(g["relative"].max()) * 1.01)
        for n, part in enumerate(parts, 1):
            fig, axes = plt.subplots(len(dtypes), len(variants), figsize=(2.6 * len(variants) + 0.6, 2.0 * len(dtypes) + 0.8),
                                     sharex=True, sharey=True, squeeze=False)
            for i, dtype in enumerate(dtypes):
                for j, v in enumerate(variants):
                    ax = axes[i][j]
                    cell = g[(g["dtype"] == dtype) & (g["variant"] == v) & g["shape_id"].isin(part)]
                    for shape, line in cell.groupby("shape_id", sort=False):
                        ax.plot([pos[c] for c in line["commit"]], line["relative"], marker="o", ms=3, lw=1.2,
                                color=color[shape], label=shape)
                    ax.axhline(1, color="grey", lw=0.6)
                    ax.set_yscale("log")
                    ax.set_ylim(lo, hi)
                    ax.yaxis.set_minor_formatter(plt.NullFormatter())
                    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:.2f}×"))
                    ax.set_yticks(sorted({lo, 1.0, hi}))
                    if i == 0:
                        ax.set_title(v, fontsize=9)
                    if j == 0:
                        ax.set_ylabel(dtype, fontsize=9)
                    ax.set_xticks(range(len(commits)))
                    ax.set_xticklabels([c[:7] for c in commits], rotation=45, ha="right", fontsize=7)
                    ax.tick_params(axis="y", labelsize=7)
            handles = [plt.Line2D([], [], color=color[s], marker="o", ms=3, lw=1.2) for s in part]
            fig.legend(handles, part, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(6, len(part)),
                       fontsize=7, frameon=False, title="shape", title_fontsize=8)
            which = f" (shapes {n} of {len(parts)})" if len(parts) > 1 else ""
            fig.suptitle(f"{op} on {machine}: device time relative to each case's first commit{which}", fontsize=10)
            fig.tight_layout()
            out.append((f"History: {op} on {machine}{which}", _png(fig)))
    return out


# --- tables --------------------------------------------------------------------------------------

def kernel_table(wide: pd.DataFrame) -> tables.Table:
    """Device µs per call of each kernel the cases of ops with Op.kernel_breakdown launch (the
    per-GEMM view of the MLPs), newest record per case."""
    if "kernel_times_s" not in wide or wide["kernel_times_s"].isna().all():
        return tables.Table([], [])
    rows = []
    broken_down = [name for name, op in registry.OPS.items() if op.kernel_breakdown]
    mlp = wide[wide["op"].isin(broken_down) & wide["kernel_times_s"].notna()]
    if "kernel_times_in_order_s" in mlp and mlp["kernel_times_in_order_s"].notna().any():
        # the newest records, which give each launch its own figure (gate and up GEMMs apart)
        mlp = mlp[mlp["kernel_times_in_order_s"].notna()].drop_duplicates("case", keep="last")
        for r in mlp.itertuples():
            total = sum(r.kernel_times_in_order_s) or 1.0
            for k, (name, t) in enumerate(zip(r.kernel_names, r.kernel_times_in_order_s), 1):
                rows.append([r.case, f"{k}. {name[:60]}", f"{t * 1e6:,.1f}", f"{t / total:.0%}"])
        return tables.Table(["case", "kernel, in launch order", "µs per call", "share"], rows,
                            sorted(set(mlp["run"])) if "run" in mlp else [])
    mlp = mlp.drop_duplicates("case", keep="last")
    for r in mlp.itertuples():
        total = sum(r.kernel_times_s.values()) or 1.0
        for name, t in sorted(r.kernel_times_s.items(), key=lambda kv: -kv[1]):
            rows.append([r.case, name[:60], f"{t * 1e6:,.1f}", f"{t / total:.0%}"])
    return tables.Table(["case", "kernel", "µs per call", "share"], rows,
                        sorted(set(mlp["run"])) if "run" in mlp else [])


def step_table(wide: pd.DataFrame) -> tables.Table:
    """The elementwise step inside each MLP call (every kernel that is neither a GEMM nor a split-K
    reduction, by expectations.toml's patterns) against the copy rate the same run measured, per variant:
    a fused kernel left at 60% of bandwidth inside a compiled model shows here without a trace."""
    ops = {name: op for name, op in registry.OPS.items() if op.step_bytes}
    need = {"kernel_names", "kernel_times_in_order_s", "shape", "copy_rate_Bps"}
    if wide.empty or not need <= set(wide.columns):
        return tables.Table([], [])
    found = expectations.patterns()
    library = [re.compile(found[k]) for k in ("gemm", "split_k") if k in found]
    d = wide[wide["op"].isin(ops) & wide["kernel_times_in_order_s"].notna()]
    d = tables.newest_per_variant(d)
    rows = []
    for r in d.itertuples():
        step = [(n, t) for n, t in zip(r.kernel_names, r.kernel_times_in_order_s)
                if not any(p.search(n) for p in library)]
        if not step or not isinstance(r.shape, dict):
            continue
        seconds = sum(t for _, t in step)
        rate = ops[r.op].step_bytes(r.shape, ELEMENT_SIZE[r.dtype]) / seconds
        copy = r.copy_rate_Bps
        rows.append([r.machine, r.op, r.variant, r.dtype, r.shape_id, ", ".join(n[:40] for n, _ in step),
                     f"{seconds * 1e6:,.1f}", f"{rate / 1e12:,.2f}",
                     "—" if pd.isna(copy) else f"{rate / copy:.0%}"])
    return tables.Table(["machine", "op", "variant", "dtype", "shape", "elementwise kernels", "µs per call", "TB/s",
                         "of the measured copy rate"], rows, sorted(set(d["run"])) if rows else [])


# The compile-tax benchmarks (record.METRICS, reported and never gated), with their names in the table.
COMPILE_METRICS = {"track_cold_compile": "cold compile", "track_recompile_new_shape": "recompile (static)",
                   "track_recompile_new_shape_dynamic": "recompile (dynamic=True)",
                   "track_total": "ten changing shapes, total"}
assert all(METRICS[m].gated == "no" for m in COMPILE_METRICS)


def compile_table(df: pd.DataFrame) -> tables.Table:
    """Cold compile, recompile for a new shape, and the changing-shapes total, newest commit's from ASV."""
    d = df[(df["source"] == "asv") & df["metric"].isin(COMPILE_METRICS)]
    if d.empty:
        return tables.Table([], [])
    latest = d.sort_values(["date", "commit", "run"]).groupby(
        ["machine", "op", "variant", "dtype", "shape_id", "metric"]).last()
    rows = [[registry.case_id(op, variant, dtype, shape), machine, COMPILE_METRICS[metric], f"{r.value:,.2f} s"]
            for (machine, op, variant, dtype, shape, metric), r in latest.iterrows()]
    return tables.Table(["case", "machine", "figure", "seconds"], rows, sorted(set(latest["run"])))


def overhead_verdict(wide: pd.DataFrame, op: str) -> str:
    """Where the op's compiler variants start to beat its baseline on host time (Op.overhead_sweep),
    and why compiling pays only past it."""
    dims, dtype = registry.OPS[op].overhead_sweep
    sweep = tables.crossover_sweep(wide, op)
    base, *compilers = tables.sweep_variants(op, sweep)
    compilers = compilers or list(registry.OPS[op].of_role("compiler")[:1])  # none measured: say so
    metric = {"host_time_back_to_back_s": "host time per call with calls queued back to back",
              "host_time_s": "host time of one synchronised call"}[tables.crossover_metric(sweep)]
    texts = []
    for compiler in compilers:
        crossover = tables.overhead_crossover(wide, op, compiler)
        if crossover:
            texts.append(f"The {compiler} {op} ({dims}, {dtype}) beats {base} on {metric} from {crossover} tokens up.")
        else:
            texts.append(f"No token count measured here from which the {compiler} {op} ({dims}, {dtype}) beats "
                         f"{base} on {metric} at every larger count.")
    return " ".join(texts) + (" Back to back, a call costs the larger of its CPU dispatch and its device time: "
                              "compiling saves device time but dispatches more slowly, so it pays once "
                              f"{base}'s device time outgrows the compiled module's dispatch.")


def results_table(wide: pd.DataFrame) -> tables.Table:
    """Every pytest-benchmark record, one row each, with the run it came from."""
    rows, dirty = [], tables.dirty_runs(wide)
    for r in wide.sort_values(["machine", "op", "variant", "dtype", "shape_id", "datetime"]).itertuples():
        rate = r.tflops if r.op in tables.COMPUTE_BOUND else r.gbps
        rows.append([tables.run_name(r.run, r.run in dirty), r.machine, r.op, r.variant, r.dtype, r.shape_id,
                     tables.fmt_time(r.device_time_s, r.device_iqr_s, True, r.device_noise),
                     tables.fmt_time(r.host_time_s, r.host_iqr_s, why=r.host_noise),
                     "—" if pd.isna(rate) else f"{rate:,.1f}" + (" (noisy)" if r.noisy else ""),
                     tables.fmt_ratio(r.speedup_vs_eager, r.speedup_noisy),
                     "—" if pd.isna(r.kernels_per_call) else f"{r.kernels_per_call:g}",
                     "—" if pd.isna(r.peak_memory_bytes) else f"{r.peak_memory_bytes / 1e6:,.1f}"])
    return tables.Table(["run", "machine", "op", "variant", "dtype", "shape", "device µs", "host µs",
                         "TFLOP/s or GB/s", f"vs {tables.BASELINES}", "kernels per call", "peak MB"], rows)



def _saved(value: str) -> str:
    try:
        return dt.datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError):
        return "—"


def runs_table(data: Loaded) -> tables.Table:
    """One row per pytest-benchmark run: when, which commit, what it measured with, the copy and GEMM
    rates it measured."""
    counts = data.records.groupby("run").size() if not data.records.empty else pd.Series(dtype=int)
    tiers = data.records.groupby("run")["tier"].agg(lambda t: ", ".join(sorted(set(t.dropna())))) \
        if not data.records.empty else pd.Series(dtype=str)
    rows = []
    for run in sorted(data.runs, key=lambda r: (r.machine, r.path.name)):
        name, info, c = data.label(run.path), run.env, run.ceilings
        gpus = info.get("gpu_count") or 1
        rows.append([run.machine, tables.run_name(run.path.name, name in data.dirty), _saved(run.datetime),
                     (run.commit or "—")[:7], tiers.get(name, ""),
                     str(counts.get(name, 0)), f"{info.get('gpu', '—')}" + (f" ×{gpus}" if gpus > 1 else ""),
                     f"{info.get('driver', '—')} / {info.get('cuda', '—')}",
                     f"{info.get('torch', '—')} / {info.get('triton', '—')} / {info.get('liger_kernel', '—')} / "
                     f"{info.get('kernels', '—')}",
                     tables.copy_rate(c),
                     f"{c['gemm_bf16_flops'] / 1e12:,.0f} TFLOP/s" if c.get("gemm_bf16_flops") else "—",
                     str(len({b.get("extra_info", {}).get("shard") for b in run.benchmarks} - {None}) or 1)])
    return tables.Table(["machine", "file", "saved (UTC)", "commit", "tier", "records", "GPU", "driver / CUDA",
                         "torch / triton / liger-kernel / kernels", "measured copy rate", "measured bf16 GEMM rate",
                         "processes"],
                        rows, sorted(data.label(r.path) for r in data.runs))


def structure_table(wide: pd.DataFrame) -> tables.Table:
    """Kernels per call by machine, op and variant from the newest record of each case, split-K
    kernels apart, and how many cases meet expectations.toml as it stands."""
    if "kernel_names" not in wide or wide["kernel_names"].isna().all():
        return tables.Table([], [])
    split_k = expectations.patterns()["split_k"]
    latest = tables.latest_per_case(wide)
    latest = latest[latest["kernel_names"].notna()]
    rows = []
    for (machine, op, variant), g in latest.groupby(["machine", "op", "variant"]):
        splits = [sum(bool(re.search(split_k, k)) for k in names) for names in g["kernel_names"]]
        main = sorted({int(round(n - s)) for n, s in zip(g["kernels_per_call"], splits)})
        split_at = [f"{dtype} {shape_id}" for dtype, _, shape_id in sorted(
            {(r.dtype, r.shape.get(registry.TOKENS, 0) if isinstance(r.shape, dict) else 0, r.shape_id)
             for r, s in zip(g.itertuples(), splits) if s})]
        unmet = 0
        for r in g.itertuples():
            found = registry.shape_of(op, r.shape_id)
            unmet += bool(expectations.check(op, variant, r.shape, list(r.kernel_names), r.kernels_per_call,
                                             layout=found.layout if found else None, dtype=r.dtype))
        memsets = sorted({f"{m:g}" for m in g["memsets_per_call"].dropna()})
        rows.append([machine, op, variant, "–".join(map(str, (main[0], main[-1]))) if len(main) > 1 else str(main[0]),
                     f"{len(split_at)} of {len(g)}" + (f": {', '.join(split_at)}" if split_at else ""),
                     ", ".join(memsets) or "—", f"{len(g) - unmet} of {len(g)}"])
    order = {v: k for k, v in enumerate(tables.VARIANT_ORDER)}
    op_order = {o: k for k, o in enumerate(registry.OPS)}
    rows.sort(key=lambda r: (r[0], op_order.get(r[1], len(op_order)), order.get(r[2], len(order))))
    return tables.Table(["machine", "op", "variant", "kernels per call (split-K apart)", "cases with split-K kernels",
                         "memsets per call", "cases meeting expectations.toml"], rows, sorted(set(latest["run"])))


def asv_files_table(data: Loaded) -> tables.Table:
    """Per ASV result file: its commit, the cases it holds, values recorded and failed, benchmark versions."""
    by_file: dict[Path, list[Point]] = {}
    for path, p in data.points:
        by_file.setdefault(path, []).append(p)
    rows = []
    for path, ps in sorted(by_file.items(), key=lambda kv: (kv[1][0].machine, kv[1][0].date, kv[0].name)):
        ok = [p for p in ps if p.value is not None]
        rows.append([ps[0].machine, ps[0].commit[:7],
                     dt.datetime.fromtimestamp(ps[0].date / 1000, dt.timezone.utc).strftime("%Y-%m-%d"),
                     path.name, str(len({p.param for p in ok})), str(len(ok)), str(len(ps) - len(ok)),
                     ", ".join(sorted({p.version for p in ps})),
                     ", ".join(sorted({asv_metric(p.benchmark) for p in ok}))])
    return tables.Table(["machine", "commit", "commit date", "file", "cases", "values", "failed", "benchmark version",
                         "benchmarks"], rows, sorted(data.label(f) for f in by_file))


def gate_table(data: Loaded) -> tables.Table:
    """`mlpbench check` on each commit of asv/ against the previous one it shares benchmarks with, per
    machine, as the nightly runs it (reading codegen records and between-run noise from the results)."""
    rows, files = [], set()
    for machine in data.machines:
        points = [p for _, p in data.points if p.machine == machine]
        held = {}
        for p in points:
            if p.value is not None:
                held.setdefault(p.commit, set()).add((p.benchmark, p.param, p.version))
        dated = sorted({(p.date, p.commit) for p in points if p.commit in held})
        for k, (_, head) in enumerate(dated):
            earlier = [c for _, c in dated[:k] if c != head and held[head] & held[c]]
            if not earlier:
                continue
            base = earlier[-1]
            verdicts = gate.compare(points, base, head, machine, codegen_root=data.root)
            count = Counter(v.verdict for v in verdicts)
            flagged = sorted(v.param + ("" if v.benchmark.endswith(".track_device_time")
                                        else f" ({asv_metric(v.benchmark)})")
                             for v in verdicts if v.verdict == "regression")
            rows.append([machine, head[:7], base[:7], str(len(verdicts)), str(count["regression"]),
                         str(count["improvement"]), str(sum(v.verdict.endswith("(not gated)") for v in verdicts)),
                         ", ".join(f"`{f}`" for f in flagged[:8]) + (" …" if len(flagged) > 8 else "") or "—"])
            files |= {data.label(f) for f, p in data.points if p.machine == machine and p.commit in (base, head)}
    return tables.Table(["machine", "head", "base", "compared", "regressed", "improved", "moved, not gated",
                         "regressed cases"], rows, sorted(files))


def not_timed_table(outcomes: pd.DataFrame) -> tables.Table:
    """Per machine, each case whose newest outcome is not a pass, with its reason and its run."""
    newest = outcomes.sort_values(["datetime", "run"], kind="stable").drop_duplicates(["machine", "case"], keep="last")
    d = newest[newest["outcome"] != "passed"].sort_values(["machine", "case"])
    dirty = tables.dirty_runs(d)
    rows = [[r.machine, r.case, r.outcome, r.reason, tables.run_name(r.run.rsplit("/", 1)[-1], r.run in dirty)]
            for r in d.itertuples()]
    return tables.Table(["machine", "case", "outcome", "reason", "run"], rows, sorted(set(d["run"])))


# --- the suite's own cost ------------------------------------------------------------------------

# The phases of a case's wall time (record fields, runner.Phases), as the tables name them.
PHASE_COLUMNS = {"phase_check_s": "check & compile", "phase_device_s": "device timing",
                 "phase_host_s": "host timing", "phase_profile_s": "profiler"}
assert set(PHASE_COLUMNS) | {"wall_s"} <= NAMES, set(PHASE_COLUMNS) - NAMES
SLOWEST_CASES = 10  # per machine
COST_NOTE = ("Wall time of `mlpbench run`, per run: its total, the first calls that worker processes made "
             "before timing began (compiles made ahead, `--precompile`; the first pytest process starts beside "
             "them, so what it does meanwhile is inside that column), the part its cases spent in each phase "
             "(check & compile: the float64 check, where compiled variants compile or read what a worker "
             "compiled; device timing; host timing, single "
             "calls and back to back; the profiler pass) and the rest, outside any case and outside the compiles made "
             "ahead (process starts, imports, measuring the copy and GEMM rates); the processes of a sharded run run at once, so their cases can add up to "
             "more than the run. Then each pytest process's time outside its cases (its interpreter and imports; "
             "collection and preloading up to its first case, including any wait for the compiles made ahead, "
             "which it starts beside, and for the process before it: the processes of a run start at once and "
             "measure in turn, so their wall times overlap; memory released after cases; measuring the copy and GEMM rates; its "
             "exit), the slowest cases "
             "per machine, each from its newest record, and the wall time of each night of `mlpbench nightly` "
             "(results/nightly/<machine>.json), by step. Runs recorded before these fields existed are left out.")


def case_costs(data: Loaded) -> pd.DataFrame:
    """One row per pytest-benchmark record that carries its wall time: machine, run, datetime, case,
    `wall_s` and the phases (PHASE_COLUMNS); older records, without them, are left out."""
    rows = []
    for run in data.runs:
        for b in run.benchmarks:
            info = b.get("extra_info") or {}
            if "case" in info and isinstance(info.get("wall_s"), (int, float)):
                rows.append({"machine": run.machine, "run": data.label(run.path), "datetime": run.datetime,
                             "case": info["case"], "wall_s": float(info["wall_s"]),
                             **{k: float(info.get(k) or 0.0) for k in PHASE_COLUMNS}})
    return pd.DataFrame(rows, columns=["machine", "run", "datetime", "case", "wall_s", *PHASE_COLUMNS])


def _beyond_records(path: Path) -> tuple[dict, bool]:
    """What a run file holds beside its records, read in one pass: its `mlpbench_run` ({wall_s, parts};
    {} where it has none), and whether pytest-benchmark found the working tree dirty (its
    `commit_info.dirty`; False where it says nothing). ({}, False) for a file that cannot be read."""
    try:
        doc = json.loads(Path(path).read_text())
        found, info = doc.get("mlpbench_run"), doc.get("commit_info") or {}
        dirty = info.get("dirty") is True
    except (OSError, ValueError, AttributeError):
        return {}, False
    return (found if isinstance(found, dict) and isinstance(found.get("wall_s"), (int, float)) else {}), dirty


def _secs(s: float) -> str:
    return f"{s:,.1f} s"


def _share(s: float, total: float | None) -> str:
    return _secs(s) + (f" ({s / total:.0%})" if total else "")


def run_cost_table(data: Loaded, costs: pd.DataFrame | None = None) -> tables.Table:
    """Per run that recorded its cost: its wall time, the compiles its workers made ahead of timing,
    its cases' phases summed (each with its share of the run's wall time) and the time spent outside
    any case."""
    costs = case_costs(data) if costs is None else costs
    by_run = {run: g for run, g in costs.groupby("run")} if not costs.empty else {}
    rows, files = [], []
    for run in sorted(data.runs, key=lambda r: (r.machine, r.path.name)):
        name = data.label(run.path)
        total = data.run_walls.get(name, {}).get("wall_s")
        g = by_run.get(name)
        if total is None and g is None:
            continue
        in_cases = 0.0 if g is None else float(g["wall_s"].sum())
        # the first calls that worker processes made before any case was timed (mlpbench/precompile.py)
        ahead = sum(p.get("wall_s", 0.0) for p in data.run_walls.get(name, {}).get("parts", [])
                    if str(p.get("part", "")).startswith("precompile"))
        phases = [_share(0.0 if g is None else float(g[k].sum()), total) for k in PHASE_COLUMNS]
        rest = None if total is None else total - in_cases - ahead
        rows.append([run.machine, tables.run_name(run.path.name, name in data.dirty),
                     "—" if total is None else _secs(total),
                     str(0 if g is None else len(g)), _share(ahead, total) if ahead else "—", *phases,
                     "—" if rest is None or rest < 0 else _share(rest, total)])
        files.append(name)
    return tables.Table(["machine", "run", "wall time", "cases", "compiles made ahead", *PHASE_COLUMNS.values(),
                         "outside the cases"], rows, sorted(files))


def process_cost_table(data: Loaded) -> tables.Table:
    """Per pytest process of each run that accounted for it (pytest_plugin.process_cost): its wall time,
    and the parts of it outside its cases."""
    keys = {"boot_s": "interpreter and imports", "start_s": "to the first case", "waited_s": "of it, waiting for compiles",
            "turn_s": "of it, waiting for the process before", "release_s": "memory released",
            "ceilings_s": "measuring copy and GEMM rates", "end_s": "exit"}
    rows, files = [], []
    for run in sorted(data.runs, key=lambda r: (r.machine, r.path.name)):
        name = data.label(run.path)
        for part in data.run_walls.get(name, {}).get("parts", []):
            if not any(k in part for k in keys):
                continue
            rows.append([run.machine, tables.run_name(run.path.name, name in data.dirty), str(part.get("part", "")),
                         _secs(float(part.get("wall_s", 0.0))),
                         *("—" if k not in part else _secs(float(part[k])) for k in keys)])
            files.append(name)
    return tables.Table(["machine", "run", "process", "wall time", *keys.values()], rows, sorted(set(files)))


NIGHT_STEPS = ("record", "of it, compiles made ahead", "publish", "gate")


def nightly_cost_table(data: Loaded) -> tables.Table:
    """Each night `mlpbench nightly` kept: its machine, commit, date, wall time and steps."""
    def in_order(steps: dict) -> list:
        # the order a night runs them in (the file sorts its keys), "of it, …" after the step it is part of
        return sorted(steps.items(), key=lambda kv: (NIGHT_STEPS.index(kv[0]) if kv[0] in NIGHT_STEPS
                                                     else len(NIGHT_STEPS), kv[0]))

    rows = [[n["machine"], str(n.get("commit", ""))[:8], str(n.get("date", "")), _secs(float(n["wall_s"])),
             ", ".join(f"{k} {_secs(float(v))}" for k, v in in_order(n.get("steps") or {})) or "—"]
            for n in data.nights]
    return tables.Table(["machine", "commit", "date", "wall time", "steps"], rows,
                        sorted({n["file"] for n in data.nights}))


def slowest_cases_table(data: Loaded, n: int = SLOWEST_CASES, costs: pd.DataFrame | None = None) -> tables.Table:
    """Per machine, the `n` cases of longest wall time, each from its newest record, with its phases
    and the phase that took longest."""
    costs = case_costs(data) if costs is None else costs
    if costs.empty:
        return tables.Table([], [])
    newest = costs.sort_values(["datetime", "run"], kind="stable").drop_duplicates(["machine", "case"], keep="last")
    rows, files = [], set()
    for machine, g in newest.groupby("machine"):
        top = g.sort_values(["wall_s", "case"], ascending=[False, True], kind="stable").head(n)
        for r in top.itertuples():
            spent = {label: getattr(r, k) for k, label in PHASE_COLUMNS.items()}
            rows.append([machine, r.case, _secs(r.wall_s), *(_share(v, r.wall_s) for v in spent.values()),
                         max(spent, key=spent.get), tables.run_name(r.run.rsplit("/", 1)[-1], r.run in data.dirty)])
            files.add(r.run)
    return tables.Table(["machine", "case", "wall time", *PHASE_COLUMNS.values(), "longest phase", "run"],
                        rows, sorted(files))


# --- sections ------------------------------------------------------------------------------------

class Report(NamedTuple):
    """What `sections` computes: the measurements (report.csv), the intro lines, then each section,
    a title and its parts in reading order: ('h3', text), ('text', markdown), ('plot', title, png,
    sources), ('table', Table) or ('long', Table); a table's `sources` are said below it, a plot's
    below it on the HTML page. `dirty`: the runs among them made from a dirty tree, marked where named."""

    measurements: tables.Table
    intro: list[str]
    sections: list[tuple[str, list[tuple]]]
    dirty: frozenset = frozenset()


def _runs(d: pd.DataFrame) -> list[str]:
    return sorted(set(d["run"])) if not d.empty and "run" in d else []


def _intro(data: Loaded) -> list[str]:
    wide, df = data.records, data.measurements
    files = len(set(df["run"]) | set(data.outcomes["run"]))
    intro = [f"{len(df)} measurements from {files} result files under `{data.root.name}/`: "
             f"{(df['source'] == 'pytest').sum()} from pytest-benchmark, {(df['source'] == 'asv').sum()} from ASV. "
             f"Each variant is compared with {tables.BASELINES} from the same run: the newest run that measured "
             "the shape; the summary instead takes each variant's own newest record."]
    for machine, g in wide.groupby("machine") if not wide.empty else []:
        newest = g.sort_values(["datetime", "file"]).iloc[-1]
        if pd.isna(newest["copy_rate_Bps"]):
            intro.append(f"{machine}: no copy or GEMM rate measured (no GPU), so its figures are {tables.HOST_ONLY}.")
        else:
            what = tables.copy_rate(data.measured_rates.get(machine) or {"copy_bandwidth_Bps": newest["copy_rate_Bps"]})
            shown = tables.run_name(f"`{newest['run']}`", newest["run"] in data.dirty)
            intro.append(f"{machine}: measured copy rate {what} in {shown}; each run's figures are rated "
                         "against the copy and GEMM rates that run measured.")
    dirty = tables.dirty_note(data.dirty)
    return intro + ([tables.noise_line(wide)] if not wide.empty and tables.noise_line(wide) else []) \
        + ([dirty] if dirty else [])


def sections(data: Loaded | Path, full: bool = True) -> Report:
    """The report's sections from `data` (a results folder is loaded first): the summary, then plots,
    then tables, the long ones last; a section with no table or plot is left out. Without `full`, no
    plots and no long tables (the results pages)."""
    data = loaded(data)
    wide, df, machines = data.records, data.measurements, data.machines
    by = {m: data.of(m) for m in machines}
    rec = not wide.empty  # the sections built on pytest-benchmark records
    draw = full and rec
    out = [("Summary", [("text", SUMMARY_NOTE), ("table", summary(wide))] if rec else [])]
    out.append((f"Speedup over {tables.BASELINES}",
                [("text", "Per shape and dtype, from the newest run of each shape; hatched bars rest on a noisy "
                          "figure.")]
                + [("plot", f"{op} on {m}", png, _runs(speedup_cases(wide, m, op))) for m in machines
                   for op in registry.OPS if draw and (png := speedup_plot(wide, m, op))]))
    out.append(("Achieved rate against the measured copy and GEMM rates",
                [("plot", f"achieved rate on {m}", png, _runs(roofline_cases(wide, m))) for m in machines
                 if draw and (png := roofline_plot(wide, m))]))
    history = history_plots(df) if full else []
    if history:
        left_out = history_series(df)[1]
        out.append(("History", [("text", "ASV's device time for each case relative to its first commit, on a log "
                                         "axis: a line that climbs is a case that got slower. One panel per variant "
                                         f"and dtype, one line per shape. Left out: {left_out['one commit']} cases "
                                         f"measured at one commit only, and {left_out['older versions']} points of "
                                         "an older timing-method version.")] + [("plot", *h, []) for h in history]))
    across = fleet.side_by_side(df, data.measured_rates)
    if not across.empty and len(across["device_time_s"].columns) > 1:
        portable = fleet.portability_of(data)
        out.append(("Across machines", [("text", "The same case on every machine, the case furthest behind on "
                                                 "one of them first. " + fleet.NOTE), ("table", fleet.table(across))]
                    + ([("h3", f"Portability: {fleet.PORTABILITY_TITLE}"),
                        ("text", fleet.portability_summary(portable) + " "
                         + fleet.PORTABILITY_NOTE.format(floor=gate.FLOOR)),
                        ("table", fleet.portability_table(portable))] if not portable.empty else [])))
    out.append(("Per-op tables", [("text", "Cells: median time in µs · GB/s (GeLU·mul) or TFLOP/s (GEMM ops) · "
                                           f"speedup over {tables.BASELINES} of the same run.")]
                + [part for m in machines for op in registry.OPS
                   if rec and (t := tables.variant_table(by[m].records, op))
                   for part in (("h3", f"{op} on {m}"), ("table", t))]))
    out.append(("Our kernels against the faster peer",
                [("text", "Each of our variants' device time over the fastest compiler variant (Inductor) or peer "
                          "kernel (Liger) of the same run, from the newest run that measured it (below 1: ours is "
                          "faster), and its rate against the copy or GEMM rate that run measured. MB moved counts the fewest bytes one "
                          "call must move.")]
                + [part for m in machines for op in registry.OPS for mine in registry.OPS[op].of_role(ROLES[-1])
                   if rec and (t := tables.peer_table(by[m].records, op, mine))
                   for part in (("h3", f"{op}: {mine} on {m}"), ("table", t))]))
    out.append(("Launch structure",
                [("text", "Kernels each call launches, from the profiler pass of the newest record of each case. "
                          "Where cuBLAS splits a GEMM along K it launches a kernel of its own for it; those are "
                          "counted apart, as are memsets. The last column checks each record against "
                          "`mlpbench/expectations.toml` as it stands today."),
                 ("table", structure_table(wide) if rec else tables.Table([], []))]))
    out.append(("Host overhead crossover",
                [part for m in machines for op in tables.sweep_ops()
                 if rec and (t := tables.overhead_rows(by[m].records, op))
                 for part in (*([("h3", f"on {m}")] if len(machines) > 1 else []),
                              ("text", overhead_verdict(by[m].records, op)), ("table", t))]))
    out.append(("Compile tax", [("text", "From ASV's compile benchmarks, each a fresh process with empty Inductor and "
                                         "Triton caches; the newest commit's figures."), ("table", compile_table(df))]))
    out.append(("Not timed", [("text", "Cases whose newest outcome on the machine was a skip or a failure, with the "
                                       "reason its run recorded: never timed, so in no table above."),
                              ("table", not_timed_table(data.outcomes))]))
    out.append(("The regression gate on these runs",
                [("text", "`mlpbench check` on each commit of `asv/` against the previous commit it shares benchmarks "
                          "with, as the nightly runs it. Thresholds and test: the README's \"Regression gate\"; how "
                          "often it finds planted slowdowns, and its false alarms: `studies/gate-detection/README.md`."),
                 ("table", gate_table(data))]))
    costs = case_costs(data)
    cost_tables = (("Per run", run_cost_table(data, costs)), ("Per process, outside its cases", process_cost_table(data)),
                   ("The slowest cases", slowest_cases_table(data, costs=costs)),
                   ("The nightly", nightly_cost_table(data)))
    out.append(("Where the suite's time goes",
                [("text", COST_NOTE)] + [part for h3, t in cost_tables if t for part in (("h3", h3), ("table", t))]))
    out.append(("pytest-benchmark runs", [("text", "One row per run: when, which commit, what it measured with, its "
                                                   "measured copy and GEMM rates."), ("table", runs_table(data))]))
    out.append(("ASV result files", [("text", "Per result file: the commit, the cases it holds, values recorded and "
                                              "failed, and the benchmark version (a new timing method is a new "
                                              "version; `mlpbench check` compares equal versions only)."),
                                     ("table", asv_files_table(data))]))
    if draw:
        out.append(("The MLP's elementwise step against the measured copy rate",
                    [("text", "Inside each MLP call, the kernels that are not GEMMs (eager: GeLU then mul; compiled: "
                              "Inductor's fused kernel; Liger's and ours: one fused kernel), rated by the fewest bytes "
                              "the step must move (gate and up read, their product written) over their device time, "
                              "against the copy rate the same run measured. Newest record of each case."),
                     ("long", step_table(wide))]))
        out.append(("Kernels per MLP call", [("text", "Device time by kernel, in launch order, newest record of each "
                                                      "case."), ("long", kernel_table(wide))]))
        out.append(("All pytest-benchmark results", [("text", "One row per record, with the file it came from."),
                                                     ("long", results_table(wide))]))
    shown = [(title, parts) for title, parts in out
             if any(kind == "plot" or (kind in ("table", "long") and rest[0]) for kind, *rest in parts)]
    return Report(tables.Table.of(df), _intro(data), shown, frozenset(data.dirty))


# --- rendering -----------------------------------------------------------------------------------

# The page's stylesheet and its sorting script (click a header: numbers sort as numbers, by
# data-sort), package data inlined so that the page stays one self-contained file.
STATIC = Path(__file__).with_name("static")


def anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def _code(name: str) -> str:
    return f"`{name}`"


def markdown(rep: Report, title: str, preface: tuple[str, ...] = (), link=_code, plots: str | None = None) -> str:
    """The report as markdown: `link(label)` spells each source file, `plots` names the HTML page
    whose sections hold the plots (left out where None)."""
    md = [f"# {title}", ""] + [line for text in (*preface, *rep.intro) for line in (text, "")]
    for name, parts in rep.sections:
        shown = [(kind, *rest) for kind, *rest in parts if kind != "plot"]
        drawn = [rest[0] for kind, *rest in parts if kind == "plot"]
        if not (plots and drawn) and not any(kind in ("table", "long") for kind, *_ in shown):
            continue
        md += [f"## {name}", ""]
        for kind, *rest in shown:
            if kind == "h3":
                md += [f"### {rest[0]}", ""]
            elif kind == "text":
                md += [rest[0], ""]
            else:
                md += [rest[0].markdown(), ""]
                if rest[0].sources:
                    md += [tables.from_line(rest[0].sources, rep.dirty, link), ""]
        if plots and drawn:
            md += [f"Plots in [{plots}]({plots}#{anchor(name)}): " + "; ".join(drawn) + ".", ""]
    return "\n".join(md).rstrip() + "\n"


def _inline(text: str) -> str:
    """Markdown `code` spans as <code>, everything else escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(parts))


def html_page(rep: Report) -> str:
    """The report as one self-contained HTML page: plots as data: URIs, stylesheet and script inline."""
    body = []
    for title, parts in rep.sections:
        body.append(f"<h2 id='{anchor(title)}'>{html.escape(title)}</h2>")
        for kind, *rest in parts:
            if kind == "h3":
                body.append(f"<h3>{html.escape(rest[0])}</h3>")
            elif kind == "text":
                body.append(f"<p class='text'>{_inline(rest[0])}</p>")
            elif kind == "plot":
                body.append(f"<img alt='{html.escape(rest[0])}' src='data:image/png;base64,{rest[1]}'>")
                if rest[2]:
                    body.append(f"<p class='src'>{_inline(tables.from_line(rest[2], rep.dirty))}</p>")
            else:
                table = rest[0].html()
                if kind == "long":
                    table = f"<details><summary>{len(rest[0].rows)} rows: click to open</summary>{table}</details>"
                body.append(table)
                if rest[0].sources:
                    body.append(f"<p class='src'>{_inline(tables.from_line(rest[0].sources, rep.dirty))}</p>")
    nav = "".join(f"<a href='#{anchor(t)}'>{html.escape(t)}</a>" for t, _ in rep.sections)
    lines = "".join(f"<p class='{'note' if 'noisy' in t or tables.DIRTY in t else 'intro'}'>{_inline(t)}</p>"
                    for t in rep.intro)
    return ("<!doctype html><html lang='en'><meta charset='utf-8'><title>mlpbench report</title>"
            f"<meta name='viewport' content='width=device-width'><style>{(STATIC / 'report.css').read_text()}</style>"
            f"<h1>mlpbench report</h1>{lines}<nav>{nav}</nav>" + "".join(body)
            + f"<script>{(STATIC / 'report.js').read_text()}</script></html>\n")


def write(results: Path | Loaded, output: Path) -> list[Path]:
    """Write report.md, report.html (self-contained, with the plots) and report.csv (one row per
    measurement) under `output`."""
    import matplotlib

    matplotlib.use("Agg")
    output.mkdir(parents=True, exist_ok=True)
    rep = sections(loaded(results))
    paths = [output / "report.md", output / "report.html", output / "report.csv"]
    paths[0].write_text(markdown(rep, "mlpbench report", plots=paths[1].name))
    paths[1].write_text(html_page(rep))
    paths[2].write_text(rep.measurements.csv())
    return paths
