"""`mlpbench report`: every result in one tidy DataFrame, written out as markdown and one HTML page.

    mlpbench report --results results --output report/

Reads pytest-benchmark JSON (results/pytest/**) and ASV result files (results/asv/**). Rows are
one measurement each: source, machine, commit, op, variant, dtype, shape, metric, value. The HTML
page embeds its plots (PNG as data URIs) and loads nothing remote, so it can be opened anywhere.
A file that cannot be read is skipped with a warning naming it.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import warnings
from pathlib import Path

import pandas as pd

from . import gate, tables

METRICS_FROM_PYTEST = ("device_time_s", "host_time_s", "peak_memory_bytes", "kernels_per_call")

# A copy moves one byte read per byte written; GeLU·mul reads two tensors per one written, and on the
# H200 it ran 2% above the copy kernel of the same run (results/pytest/h200/20261129T224302Z-*.json).
# A ceiling exceeded by more than this margin was mis-measured (timing v1 recorded 2.77 TB/s, with
# the copy inside a CUDA graph, where kernels reached 4.37 TB/s: results/archive/h200-timing-v1/).
SUSPECT_MARGIN = 1.10


def _split_case(case: str) -> dict:
    parts = case.split("/")
    return dict(zip(("op", "variant", "dtype", "shape_id"), parts)) if len(parts) == 4 else {}


def tidy(results: Path) -> tuple[pd.DataFrame, dict]:
    """(long DataFrame of every measurement, ceilings by machine from pytest machine_info)."""
    files = sorted(p for p in (results / "pytest").rglob("*.json") if not p.name.endswith(".outcomes.json")) \
        if (results / "pytest").is_dir() else []
    wide = tables.load_pytest_json(files)
    rows, ceilings = [], {}
    if not wide.empty:
        for path in files:
            try:
                info = json.loads(path.read_text())["machine_info"]["mlpbench"]
                ceilings[info["machine"]] = info.get("ceilings", {})
            except (OSError, ValueError, KeyError, TypeError):
                pass  # already reported by load_pytest_json
        for r in wide.itertuples():
            for metric in METRICS_FROM_PYTEST:
                value = getattr(r, metric, None)
                if value is not None and not pd.isna(value):
                    rows.append({"source": "pytest", "machine": r.machine, "commit": r.commit, "date": None,
                                 "op": r.op, "variant": r.variant, "dtype": r.dtype, "shape_id": r.shape_id,
                                 "flops": r.flops, "bytes": r.bytes, "metric": metric, "value": float(value)})
    asv_dir = results / "asv"
    if asv_dir.is_dir():
        for p in gate.load(asv_dir):
            if p.value is None:
                continue
            rows.append({"source": "asv", "machine": p.machine, "commit": p.commit, "date": p.date,
                         **_split_case(p.param), "flops": None, "bytes": None,
                         "metric": p.benchmark.rsplit(".", 1)[-1], "value": p.value})
    return pd.DataFrame(rows), ceilings


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def speedup_plot(df: pd.DataFrame, op: str) -> str | None:
    """Bars: device-time speedup over eager for each shape × dtype, one bar per variant."""
    d = df[(df["source"] == "pytest") & (df["op"] == op) & (df["metric"] == "device_time_s")]
    if d.empty:
        return None
    t = d.pivot_table(index=["shape_id", "dtype"], columns="variant", values="value")
    if "eager" not in t.columns:
        return None
    speed = t.rdiv(t["eager"], axis=0)
    order = [v for v in ("eager", "compiled", "liger", "ours") if v in speed.columns]
    ax = speed[order].plot.bar(figsize=(max(6, 0.6 * len(speed)), 4), width=0.8)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_ylabel("speedup over eager (device time)")
    ax.set_xlabel("")
    ax.set_title(f"{op}: speedup over eager")
    ax.set_xticklabels([f"{s} {dt}" for s, dt in speed.index], rotation=55, ha="right", fontsize=7)
    return _png(ax.figure)


def roofline_plot(df: pd.DataFrame, ceilings: dict) -> str | None:
    """Achieved rate per case against this machine's measured ceilings (one panel per bound)."""
    import matplotlib.pyplot as plt

    d = df[(df["source"] == "pytest") & (df["metric"] == "device_time_s")].copy()
    if d.empty:
        return None
    fig, (mem, gemm) = plt.subplots(1, 2, figsize=(11, 4))
    memory_bound = d[d["op"].str.startswith("gelu_mul")]
    for variant, g in memory_bound.groupby("variant"):
        mem.scatter(g["bytes"] / 1e6, g["bytes"] / g["value"] / 1e12, label=variant, s=14)
    compute = d[d["op"].isin(tables.COMPUTE_BOUND)]
    for variant, g in compute.groupby("variant"):
        gemm.scatter(g["flops"] / g["bytes"], g["flops"] / g["value"] / 1e12, label=variant, s=14)
    styles = {"bf16": ":", "fp16": "-.", "fp32": "--"}
    for machine, c in ceilings.items():
        copy = c.get("copy_bandwidth_Bps")
        if copy:
            achieved = (memory_bound["bytes"] / memory_bound["value"]).max()
            # A ceiling far below what kernels achieved was mis-measured; say so on the plot itself.
            suspect = " — far below achieved: suspect" if achieved > SUSPECT_MARGIN * copy else ""
            mem.axhline(copy / 1e12, ls="--", color="grey", label=f"copy ceiling, {machine}{suspect}")
        for dt, ls in styles.items():
            rate = c.get(f"gemm_{dt}_flops")
            if rate:
                gemm.axhline(rate / 1e12, ls=ls, color="grey", label=f"{dt} GEMM ceiling, {machine}")
    mem.set_xscale("log")
    mem.set_xlabel("bytes moved per call (MB)")
    mem.set_ylabel("achieved TB/s")
    mem.set_title("memory-bound: gelu_mul, gelu_mul_train")
    gemm.set_xscale("log")
    gemm.set_xlabel("arithmetic intensity (FLOP per byte)")
    gemm.set_ylabel("achieved TFLOP/s")
    gemm.set_title("compute: mlp, linear")
    for ax in (mem, gemm):
        ax.legend(fontsize=7)
    return _png(fig)


def history_plot(df: pd.DataFrame) -> str | None:
    """Device time over commits, one line per ASV case."""
    import matplotlib.pyplot as plt

    d = df[(df["source"] == "asv") & (df["metric"] == "track_device_time")]
    if d.empty or d["commit"].nunique() < 2:
        return None
    order = d.drop_duplicates("commit").sort_values("date")["commit"].tolist()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for (machine, op, variant, dtype, shape), g in d.groupby(["machine", "op", "variant", "dtype", "shape_id"]):
        g = g.set_index("commit").reindex(order)
        ax.plot([c[:8] for c in order], g["value"] * 1e6, marker="o", label=f"{op}/{variant}/{dtype}/{shape} ({machine})")
    ax.set_ylabel("device time (µs)")
    ax.set_title("device time over commits (ASV)")
    ax.legend(fontsize=6)
    return _png(fig)


def _best_bandwidth(df: pd.DataFrame, machine: str) -> float:
    d = df[(df["source"] == "pytest") & (df["machine"] == machine) & (df["metric"] == "device_time_s")]
    return float((d["bytes"] / d["value"]).max()) if not d.empty else 0.0


def kernel_breakdown(wide: pd.DataFrame) -> str:
    """Markdown: device µs per call of each kernel the MLP cases launch (the per-GEMM view)."""
    if "kernel_times_s" not in wide or wide["kernel_times_s"].isna().all():
        return ""
    rows = []
    mlp = wide[(wide["op"] == "mlp") & wide["kernel_times_s"].notna()]
    if "kernel_times_in_order_s" in mlp and mlp["kernel_times_in_order_s"].notna().any():
        # the newest records, which give each launch its own figure (gate and up GEMMs apart)
        mlp = mlp[mlp["kernel_times_in_order_s"].notna()].drop_duplicates("case", keep="last")
        for r in mlp.itertuples():
            total = sum(r.kernel_times_in_order_s) or 1.0
            for k, (name, t) in enumerate(zip(r.kernel_names, r.kernel_times_in_order_s), 1):
                rows.append([r.case, f"{k}. {name[:60]}", f"{t * 1e6:,.1f}", f"{t / total:.0%}"])
        return tables.markdown(["case", "kernel, in launch order", "µs per call", "share"], rows)
    for r in mlp.drop_duplicates("case", keep="last").itertuples():
        total = sum(r.kernel_times_s.values()) or 1.0
        for name, t in sorted(r.kernel_times_s.items(), key=lambda kv: -kv[1]):
            rows.append([r.case, name[:60], f"{t * 1e6:,.1f}", f"{t / total:.0%}"])
    return tables.markdown(["case", "kernel", "µs per call", "share"], rows)


def compile_tax(df: pd.DataFrame) -> str:
    """Markdown: cold compile, recompile for a new shape, and the changing-shapes total, from ASV."""
    metrics = {"track_cold_compile": "cold compile", "track_recompile_new_shape": "recompile (static)",
               "track_recompile_new_shape_dynamic": "recompile (dynamic=True)",
               "track_total": "ten changing shapes, total"}
    d = df[(df["source"] == "asv") & df["metric"].isin(metrics)]
    if d.empty:
        return ""
    latest = d.sort_values("date").groupby(["machine", "op", "variant", "dtype", "shape_id", "metric"]).last()
    rows = [[f"{op}/{variant}/{dtype}/{shape}", machine, metrics[metric], f"{r.value:,.2f} s"]
            for (machine, op, variant, dtype, shape, metric), r in latest.iterrows()]
    return tables.markdown(["case", "machine", "figure", "seconds"], rows)


def overhead_section(df) -> str:
    """Where the compiled MLP starts to beat eager on host time, with the sweep behind the verdict."""
    crossover = tables.overhead_crossover(df)
    sweep = tables.crossover_sweep(df, "d768-h3072", "bf16")
    metric = {"host_time_back_to_back_s": "host time per call with calls queued back to back",
              "host_time_s": "host time of one synchronised call"}[tables.crossover_metric(sweep)]
    verdict = (f"The compiled MLP (d768-h3072, bf16) beats eager on {metric} from {crossover} tokens up."
               if crossover else f"No token count measured here from which the compiled MLP (d768-h3072, bf16) "
                                 f"beats eager on {metric} at every larger count.")
    if "file" in sweep and not sweep.empty:
        verdict += " From " + ", ".join(f"`{os.path.relpath(f)}`" for f in sorted(set(sweep["file"]))) + "."
    verdict += (" Back to back, a call costs the larger of its CPU dispatch and its device time: compiling "
                "saves device time but dispatches more slowly, so it pays once eager's device time outgrows "
                "the compiled module's dispatch.")
    table = tables.overhead_table(df)
    return verdict + ("\n\n" + table if table else "")


def write(results: Path, output: Path) -> list[Path]:
    """Write report.md (with plot-N.png), report.html (self-contained) and report.csv (tidy) under `output`."""
    import matplotlib

    matplotlib.use("Agg")
    df, ceilings = tidy(results)
    output.mkdir(parents=True, exist_ok=True)
    plots = {f"Speedup over eager: {op}": speedup_plot(df, op)
             for op in ("gelu_mul", "gelu_mul_train", "mlp", "linear")}
    plots["Achieved rate against measured ceilings"] = roofline_plot(df, ceilings)
    plots["Device time over commits"] = history_plot(df)
    plots = {k: v for k, v in plots.items() if v}
    wide = df[(df["source"] == "pytest")].pivot_table(
        index=["machine", "op", "variant", "dtype", "shape_id"], columns="metric", values="value").reset_index()
    md = ["# mlpbench report", "", f"{len(df)} measurements from `{os.path.relpath(results)}`: "
          f"{(df['source'] == 'pytest').sum() if not df.empty else 0} from pytest-benchmark, "
          f"{(df['source'] == 'asv').sum() if not df.empty else 0} from ASV.", ""]
    for machine, c in ceilings.items():
        if c:
            achieved = _best_bandwidth(df, machine)
            suspect = (f" The copy ceiling is far below the {achieved / 1e12:.2f} TB/s that kernels achieved: "
                       "it was mis-measured." if achieved > SUSPECT_MARGIN * c.get("copy_bandwidth_Bps", 0) else "")
            md.append(f"Ceilings on {machine}: copy {c.get('copy_bandwidth_Bps', 0) / 1e12:.2f} TB/s, "
                      f"bf16 GEMM {c.get('gemm_bf16_flops', 0) / 1e12:.0f} TFLOP/s ({c.get('method', '')}).{suspect}")
    wide_loaded = tables.load_pytest_json(sorted(p for p in (results / "pytest").rglob("*.json")
                                                 if not p.name.endswith(".outcomes.json"))) \
        if (results / "pytest").is_dir() else pd.DataFrame()
    sections = {}
    if not wide_loaded.empty:
        sections["Kernels per MLP call (device time by kernel)"] = kernel_breakdown(wide_loaded)
        sections["Host overhead crossover"] = overhead_section(wide_loaded)
    sections["Compile tax"] = compile_tax(df)
    for title, text in sections.items():
        if text:
            md += ["", f"## {title}", "", text]
    for k, (title, png) in enumerate(plots.items()):
        name = f"plot-{k}.png"
        (output / name).write_bytes(base64.b64decode(png))
        md += ["", f"## {title}", "", f"![{title}]({name})"]
    (output / "report.md").write_text("\n".join(md) + "\n")
    df.to_csv(output / "report.csv", index=False)
    body = "".join(f"<h2>{html.escape(t)}</h2><img alt='{html.escape(t)}' src='data:image/png;base64,{png}'>"
                   for t, png in plots.items())
    table = wide.to_html(index=False, float_format=lambda x: f"{x:.4g}") if not wide.empty else ""
    (output / "report.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>mlpbench report</title>"
        "<style>body{font-family:sans-serif;margin:2em}img{max-width:100%}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px}</style>"
        f"<h1>mlpbench report</h1><p>{html.escape(md[2])}</p>"
        + "".join(f"<h2>{html.escape(t)}</h2><pre>{html.escape(x)}</pre>" for t, x in sections.items() if x)
        + f"{body}<h2>All pytest-benchmark results</h2>{table}")
    return [output / "report.md", output / "report.html", output / "report.csv"]


def main(results: Path, output: Path) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        paths = write(results, output)
    for p in paths:
        print(p)
    return 0
