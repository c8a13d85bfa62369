"""pytest-benchmark JSON → one tidy pandas DataFrame → the per-op tables that `mlpbench run` prints.

Throughput is derived here, never stored: TFLOP/s = flops / device time for the GEMM ops, GB/s =
bytes / device time for the memory-bound step (host time stands in where no device time exists).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

COMPUTE_BOUND = {"linear", "mlp"}


def load_pytest_json(paths) -> pd.DataFrame:
    """One row per benchmark record; unreadable or foreign files are skipped with a warning naming them."""
    rows = []
    for path in map(Path, paths):
        try:
            doc = json.loads(path.read_text())
            if isinstance(doc, dict) and "outcomes" in doc and "benchmarks" not in doc:
                continue  # a run's outcomes file: read by not_timed()
            benches = doc["benchmarks"]
            machine = doc.get("machine_info", {}).get("mlpbench", {}).get("machine", "unknown")
            commit = (doc.get("commit_info") or {}).get("id")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"skipping {path}: not a readable pytest-benchmark file ({exc})", stacklevel=2)
            continue
        for b in benches:
            info = b.get("extra_info", {})
            if "case" not in info:
                continue
            rows.append({
                "file": str(path), "machine": machine, "commit": commit,
                **{k: info.get(k) for k in ("case", "op", "variant", "dtype", "shape_id", "tier", "device",
                                            "device_time_s", "flops", "bytes", "max_rel_err", "timing_method",
                                            "peak_memory_bytes", "source", "kernels_per_call",
                                            "kernel_names", "kernel_times_s", "kernel_times_in_order_s")},
                "host_time_s": info.get("host_time_s", b["stats"]["median"]),
                "host_time_back_to_back_s": info.get("host_time_back_to_back_s"),
            })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["time_s"] = df["device_time_s"].fillna(df["host_time_s"])
    df["tflops"] = (df["flops"] / df["time_s"] / 1e12).where(df["op"].isin(COMPUTE_BOUND))
    df["gbps"] = df["bytes"] / df["time_s"] / 1e9
    # Each variant against eager from the same file (the same run): a box measured twice gives two pairs.
    pair = ["file", "machine", "op", "dtype", "shape_id"]
    eager = df[df["variant"] == "eager"].drop_duplicates(pair, keep="last").set_index(pair)["time_s"]
    key = pd.MultiIndex.from_frame(df[pair])
    df["speedup_vs_eager"] = eager.reindex(key).to_numpy() / df["time_s"].to_numpy()
    return df


def _fmt_us(s) -> str:
    return "—" if pd.isna(s) else f"{s * 1e6:,.1f}"


def _fmt(x, digits=2) -> str:
    return "—" if pd.isna(x) else f"{x:,.{digits}f}"


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def op_tables(df: pd.DataFrame) -> str:
    """Markdown: one table per op with device and host time, throughput and speedup over eager."""
    parts = []
    for op, g in df.groupby("op", sort=False):
        rate = "TFLOP/s" if op in COMPUTE_BOUND else "GB/s"
        rows = [
            [r.variant, r.dtype, r.shape_id, _fmt_us(r.device_time_s), _fmt_us(r.host_time_s),
             _fmt(r.tflops if op in COMPUTE_BOUND else r.gbps, 1), _fmt(r.speedup_vs_eager) + "×"]
            for r in g.sort_values(["shape_id", "dtype", "variant"]).itertuples()
        ]
        parts.append(f"### {op}\n\n" + markdown(
            ["variant", "dtype", "shape", "device µs", "host µs", rate, "vs eager"], rows))
    return "\n\n".join(parts)


def variant_columns(df: pd.DataFrame, op: str) -> str:
    """Markdown, one row per shape and dtype, one column per variant: device µs, rate, speedup."""
    g = df[df["op"] == op]
    variants = [v for v in ("eager", "compiled", "liger", "ours") if v in set(g["variant"])]
    rate = "TFLOP/s" if op in COMPUTE_BOUND else "GB/s"
    rows = []
    for (shape, dtype), cell in g.groupby(["shape_id", "dtype"], sort=False):
        by = cell.set_index("variant")
        row = [shape, dtype]
        for v in variants:
            if v not in by.index:
                row.append("—")
                continue
            r = by.loc[v]
            value = r["tflops"] if op in COMPUTE_BOUND else r["gbps"]
            row.append(f"{_fmt_us(r['time_s'])} µs · {_fmt(value, 0 if rate == 'GB/s' else 1)} · {_fmt(r['speedup_vs_eager'])}×")
        rows.append(row)
    return markdown(["shape", "dtype", *[f"{v} (µs · {rate} · vs eager)" for v in variants]], rows)


def not_timed(outcomes_path) -> str:
    """Markdown list of the cases a run did not time (failed or skipped), with their reasons."""
    doc = json.loads(Path(outcomes_path).read_text())
    rows = [[o["case"], o["outcome"], o["reason"]] for o in doc["outcomes"] if o["outcome"] != "passed"]
    return markdown(["case", "outcome", "reason"], rows) if rows else ""


def crossover_sweep(df: pd.DataFrame, dims: str, dtype: str) -> pd.DataFrame:
    """The compiled-vs-eager MLP rows of the token sweep at `dims`, from the records that carry
    back-to-back host time when any do (older records have the synchronised figure only)."""
    g = df[(df["op"] == "mlp") & (df["dtype"] == dtype) & df["shape_id"].str.endswith(dims)
           & df["variant"].isin(["eager", "compiled"])]
    if "host_time_back_to_back_s" in g and g["host_time_back_to_back_s"].notna().any():
        g = g[g["host_time_back_to_back_s"].notna()]
    # one run's figures, not an average over runs: the last record of each case (files load oldest first)
    return g.drop_duplicates(["variant", "shape_id"], keep="last")


def crossover_metric(g: pd.DataFrame) -> str:
    """The host-time column the crossover reads: back to back when the records have it."""
    col = "host_time_back_to_back_s"
    return col if col in g and not g.empty and g[col].notna().all() else "host_time_s"


def overhead_crossover(df: pd.DataFrame, dims: str = "d768-h3072", dtype: str = "bf16") -> int | None:
    """The smallest token count from which the compiled MLP's host time per call beats eager's
    (at `dims`, for every larger count measured too); None when it never does.

    Host time of calls queued back to back where the records have it (a serving loop's figure: the
    larger of CPU dispatch and device time), else the synchronised single-call host time."""
    g = crossover_sweep(df, dims, dtype)
    host = g.pivot_table(index="shape_id", columns="variant", values=crossover_metric(g))
    if not {"eager", "compiled"} <= set(host.columns):
        return None
    tokens = host.index.str.extract(r"^t(\d+)-", expand=False).astype(int)
    wins = pd.Series((host["compiled"] < host["eager"]).to_numpy(), index=tokens.to_numpy()).sort_index()
    crossover = None
    for t, win in zip(reversed(wins.index), reversed(wins.to_numpy())):
        if not win:
            break
        crossover = int(t)
    return crossover


def overhead_table(df: pd.DataFrame, dims: str = "d768-h3072", dtype: str = "bf16") -> str:
    """Markdown: per token count, eager and compiled device time and both host times (µs)."""
    g = crossover_sweep(df, dims, dtype)
    cols = [c for c in ("device_time_s", "host_time_back_to_back_s", "host_time_s") if c in g and g[c].notna().any()]
    if g.empty or not cols:
        return ""
    wide = g.pivot_table(index="shape_id", columns="variant", values=cols)
    tokens = wide.index.str.extract(r"^t(\d+)-", expand=False).astype(int)
    names = {"device_time_s": "device", "host_time_back_to_back_s": "host, back to back",
             "host_time_s": "host, one synchronised call"}
    rows = []
    for t, (_, r) in sorted(zip(tokens, wide.iterrows()), key=lambda x: x[0]):
        rows.append([str(t), *[f"{_fmt_us(r.get((c, 'eager')))} / {_fmt_us(r.get((c, 'compiled')))}" for c in cols]])
    return markdown(["tokens", *[f"{names[c]}: eager / compiled (µs)" for c in cols]], rows)
