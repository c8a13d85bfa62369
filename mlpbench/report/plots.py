"""The report's plots, each a PNG as base64 for the HTML page: speedups over the baseline, the
rate achieved against the run's measured copy and GEMM rates, and ASV's history. matplotlib is
imported where a plot is drawn, so that reading and the tables need none."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd

from .. import registry, tables
from .ranking import SUSPECT_MARGIN

# More lines than this in one axes can no longer be followed by eye; a figure with more is split.
LINES_PER_AXES = 12


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
    for dtype, ls in {"bf16": ":", "fp16": "-.", "fp32": "--", "fp8": (0, (5, 1, 1, 1, 1, 1))}.items():
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
