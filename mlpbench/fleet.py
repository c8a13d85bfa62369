"""The fleet side by side: each case's latest device time on every machine, and the fraction of
that machine's own measured ceiling it reached, so a case that lags on one GPU type stands out.

Raw times differ between GPU types for every case; the fraction of each machine's ceiling (copy
bandwidth for memory-bound ops, the GEMM rate of the case's dtype for compute-bound ones) does
not, so a case whose fraction is far below the other machines' is one that runs badly there.

Input: the measurements frame and the ceilings by machine of `report.load(...)`.
"""

from __future__ import annotations

import math

import pandas as pd

from . import tables

# The device-time metric of each source in report.load's measurements.
DEVICE_TIME = {"pytest": "device_time_s", "asv": "track_device_time"}
CASE = ["op", "variant", "dtype", "shape_id"]


def _fraction(row, ceilings: dict) -> float:
    ceiling = ceilings.get(row.machine) or {}
    if row.op in tables.COMPUTE_BOUND:
        work, peak = row.flops, ceiling.get(f"gemm_{row.dtype}_flops")
    else:
        work, peak = row.bytes, ceiling.get("copy_bandwidth_Bps")
    if not peak or work is None or pd.isna(work) or not work or not row.value:
        return math.nan
    return work / row.value / peak


def _lagging(row: pd.Series, machines: list[str]) -> tuple[float, str | None]:
    """(spread, the machine furthest behind) for one case: by fraction of ceiling where two or
    more machines have one, else by device time."""
    fractions = {m: row[("of_ceiling", m)] for m in machines if not pd.isna(row[("of_ceiling", m)])}
    if len(fractions) >= 2:
        worst = min(fractions, key=fractions.get)
        return max(fractions.values()) / fractions[worst], worst
    times = {m: row[("device_time_s", m)] for m in machines if not pd.isna(row[("device_time_s", m)])}
    if len(times) >= 2:
        worst = max(times, key=times.get)
        return times[worst] / min(times.values()), worst
    return math.nan, None


def side_by_side(df: pd.DataFrame, ceilings: dict) -> pd.DataFrame:
    """One row per (source, case); per machine its latest device time (s) and fraction of that
    machine's ceiling; `spread` (best over worst fraction where two machines have one, else
    slowest over fastest time) and `behind` (that worst machine). Largest spread first.

    Latest: the newest commit date for ASV rows; for pytest rows (no date) the last loaded,
    since report.load reads each machine's files, named by UTC time stamp, in sorted order."""
    wanted = pd.Series(False, index=df.index)
    for source, metric in DEVICE_TIME.items():
        wanted |= (df["source"] == source) & (df["metric"] == metric)
    d = df[wanted]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(load_order=range(len(d))).sort_values(["date", "load_order"], na_position="first", kind="stable")
    latest = d.drop_duplicates(["source", "machine", *CASE], keep="last").copy()
    # ASV files carry no FLOPs or bytes; they are the case's, so any row that has them serves.
    work = df.dropna(subset=["flops", "bytes"]).drop_duplicates(CASE, keep="last").set_index(CASE)[["flops", "bytes"]]
    known = work.reindex(pd.MultiIndex.from_frame(latest[CASE]))
    latest["flops"] = latest["flops"].astype(float).fillna(pd.Series(known["flops"].to_numpy(dtype=float), index=latest.index))
    latest["bytes"] = latest["bytes"].astype(float).fillna(pd.Series(known["bytes"].to_numpy(dtype=float), index=latest.index))
    latest["of_ceiling"] = [_fraction(r, ceilings) for r in latest.itertuples()]
    latest = latest.rename(columns={"value": "device_time_s"})
    wide = latest.pivot(index=["source", *CASE], columns="machine", values=["device_time_s", "of_ceiling"])
    machines = sorted(latest["machine"].unique())
    lag = [_lagging(r, machines) for _, r in wide.iterrows()]
    wide[("spread", "")] = [s for s, _ in lag]
    wide[("behind", "")] = [m for _, m in lag]
    return wide.sort_values(("spread", ""), ascending=False, na_position="last", kind="stable")


NOTE = ("µs: latest device time; %: of that machine's own ceiling (copy bandwidth for memory-bound ops, GEMM "
        "rate of the dtype for compute-bound ones). spread: best over worst fraction of ceiling (slowest over "
        "fastest time where ceilings are missing); behind: the worst machine.")


def table(wide: pd.DataFrame) -> tables.Table:
    """The side-by-side table: per machine `µs · % of its ceiling`, the largest spread first."""
    if wide.empty:
        return tables.Table([], [])
    machines = list(wide["device_time_s"].columns)
    rows = []
    for (source, *case), r in wide.iterrows():
        cells = []
        for m in machines:
            t, f = r[("device_time_s", m)], r[("of_ceiling", m)]
            cells.append("—" if pd.isna(t) else f"{t * 1e6:,.1f} µs" + ("" if pd.isna(f) else f" · {f:.0%}"))
        spread = r[("spread", "")]
        rows.append(["/".join(case), source, *cells, "—" if pd.isna(spread) else f"{spread:.2f}×",
                     r[("behind", "")] or "—"])
    return tables.Table(["case", "source", *machines, "spread", "behind"], rows)


def markdown(wide: pd.DataFrame) -> str:
    """The side-by-side table as markdown, with what its columns mean."""
    return "" if wide.empty else table(wide).markdown() + "\n\n" + NOTE
