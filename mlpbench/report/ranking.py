"""The report's summary: per machine, op and dtype, the variants ranked by each time the suite
measures, each rated against the copy or GEMM rate its run measured."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from .. import tables

# The copy and GEMM rates a run measures are rates, not bounds: GeLU·mul reads two tensors per one
# written and can stream a little faster than a copy. A rate exceeded by more than this margin was
# itself measured low (a copy captured in a CUDA graph runs on the copy engines, below what kernels reach).
SUSPECT_MARGIN = 1.10

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
