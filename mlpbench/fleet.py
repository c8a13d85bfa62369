"""The fleet side by side: each case's latest device time on every machine, and the fraction of
the rate that machine measured (its copy rate for memory-bound ops, the GEMM rate of the case's
dtype for compute-bound ones) it reached, so a case that lags on one GPU type stands out.

Raw times differ between GPU types for every case; the fraction of each machine's measured rate
does not, so a case whose fraction is far below the other machines' is one that runs badly there.
The rates are what one copy and one GEMM reached, not bounds: a fraction can exceed 1.

Input: the measurements frame and the measured rates by machine of `report.load(...)`
(`Loaded.measured_rates`: the dicts runs store as `ceilings`).
"""

from __future__ import annotations

import math

import pandas as pd

from . import tables

# The device-time metric of each source in report.load's measurements.
DEVICE_TIME = {"pytest": "device_time_s", "asv": "track_device_time"}
CASE = ["op", "variant", "dtype", "shape_id"]


def _fraction(row, rates: dict) -> float:
    measured = rates.get(row.machine) or {}
    if row.op in tables.COMPUTE_BOUND:
        work, rate = row.flops, measured.get(f"gemm_{row.dtype}_flops")
    else:
        work, rate = row.bytes, measured.get("copy_bandwidth_Bps")
    if not rate or work is None or pd.isna(work) or not work or not row.value:
        return math.nan
    return work / row.value / rate


def _lagging(row: pd.Series, machines: list[str]) -> tuple[float, str | None]:
    """(spread, the machine furthest behind) for one case: by fraction of the measured rate where two
    or more machines have one, else by device time."""
    fractions = {m: row[("of_measured_rate", m)] for m in machines if not pd.isna(row[("of_measured_rate", m)])}
    if len(fractions) >= 2:
        worst = min(fractions, key=fractions.get)
        return max(fractions.values()) / fractions[worst], worst
    times = {m: row[("device_time_s", m)] for m in machines if not pd.isna(row[("device_time_s", m)])}
    if len(times) >= 2:
        worst = max(times, key=times.get)
        return times[worst] / min(times.values()), worst
    return math.nan, None


def side_by_side(df: pd.DataFrame, rates: dict) -> pd.DataFrame:
    """One row per (source, case); per machine its latest device time (s), fraction of the rate that
    machine measured (`of_measured_rate`) and the file (`run`) it came from; `spread` (best over worst fraction where two
    machines have one, else slowest over fastest time) and `behind` (that worst machine). Largest
    spread first.

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
    latest["of_measured_rate"] = [_fraction(r, rates) for r in latest.itertuples()]
    latest = latest.rename(columns={"value": "device_time_s"})
    if "run" not in latest:  # the file each figure came from, where the rows name it
        latest["run"] = None
    index = ["source", *CASE]
    # the file names pivoted apart, so that the figures stay floats
    wide = latest.pivot(index=index, columns="machine", values=["device_time_s", "of_measured_rate"]).join(
        latest.pivot(index=index, columns="machine", values=["run"]))
    machines = sorted(latest["machine"].unique())
    lag = [_lagging(r, machines) for _, r in wide.iterrows()]
    wide[("spread", "")] = [s for s, _ in lag]
    wide[("behind", "")] = [m for _, m in lag]
    return wide.sort_values(("spread", ""), ascending=False, na_position="last", kind="stable")


NOTE = ("µs: latest device time; %: of the rate that machine measured (its copy rate for memory-bound ops, its "
        "GEMM rate of the dtype for compute-bound ones; a rate, not a bound, so a case can exceed it). spread: best "
        "over worst fraction of the measured rate (slowest over fastest time where no rate was measured); behind: "
        "the worst machine.")


def table(wide: pd.DataFrame) -> tables.Table:
    """The side-by-side table: per machine `µs · % of its measured rate`, the largest spread first."""
    if wide.empty:
        return tables.Table([], [])
    machines = list(wide["device_time_s"].columns)
    rows = []
    for (source, *case), r in wide.iterrows():
        cells = []
        for m in machines:
            t, f = r[("device_time_s", m)], r[("of_measured_rate", m)]
            cells.append("—" if pd.isna(t) else f"{t * 1e6:,.1f} µs" + ("" if pd.isna(f) else f" · {f:.0%}"))
        spread, behind = r[("spread", "")], r[("behind", "")]
        # a case measured on one machine only has no spread and no machine behind (NaN, not text)
        rows.append(["/".join(case), source, *cells, "—" if pd.isna(spread) else f"{spread:.2f}×",
                     "—" if pd.isna(behind) or not behind else str(behind)])
    return tables.Table(["case", "source", *machines, "spread", "behind"], rows, _files(wide))


def _files(wide: pd.DataFrame) -> list[str]:
    """The files behind side_by_side's figures (its `run` columns)."""
    return sorted({f for f in wide["run"].stack().dropna() if f}) if "run" in wide else []


def markdown(wide: pd.DataFrame) -> str:
    """The side-by-side table as markdown, with what its columns mean."""
    return "" if wide.empty else table(wide).markdown() + "\n\n" + NOTE


# --- portability: is each case's ratio between two machines what their measured rates predict? ---

PORTABILITY_TITLE = "each ratio against what the measured rates predict"
# A case reaching less than this fraction of its roofline on every machine is bound by launches or
# latency, which neither measured rate describes: it gets no prediction, rather than a false alarm.
LATENCY_FRACTION = 0.5
NOISE_MULTIPLE = 3.0  # as the gate's: standard deviations of a spread before a case is called an outlier


def _roofline_s(flops, nbytes, dtype: str, rates: dict) -> float:
    """The case's time at one machine's measured rates: its FLOPs at the GEMM rate of its dtype or its
    bytes at the copy rate, whichever is longer (a memory-bound op does no GEMM: flops 0). Not a
    bound: a case can beat the rates one copy and one GEMM reached."""
    gemm, copy = rates.get(f"gemm_{dtype}_flops"), rates.get("copy_bandwidth_Bps")
    parts = [w / c for w, c in ((flops, gemm), (nbytes, copy)) if w and c and not pd.isna(w)]
    return max(parts) if parts else math.nan


def portability(df: pd.DataFrame, rates: dict, noise: dict[str, dict[str, float]] | None = None) -> pd.DataFrame:
    """One row per case that pytest runs measured on two machines with measured rates, for each pair
    of machines (alphabetical: h100 over h200): the measured device-time ratio, the ratio the two
    machines' measured rates predict from the case's roofline time (_roofline_s), their quotient
    (`departure`), the median departure of the cases of its bound on that pair (`class_departure`,
    the error the measured rates share), the case's departure beyond it (`beyond_class`), the allowance it
    is judged by and the verdict.

    The allowance is the two machines' between-run noise of the case combined (`noise`: {machine:
    {case id: allowance}}, between_runs.load, each already NOISE_MULTIPLE standard deviations), and at
    least gate.FLOOR: a case departing beyond its class by more is "not portable", a case that runs
    relatively worse (or better) on one machine than the hardware and its peers explain. A machine without a noise figure for the case counts the
    floor alone, and `noise_from` says so."""
    from .judging import gate

    noise = noise or {}
    with_rates = {m for m, c in rates.items() if c and c.get("copy_bandwidth_Bps")}
    pytest_rows = df[(df["source"] == "pytest") & (df["metric"] == DEVICE_TIME["pytest"])
                     & df["machine"].isin(with_rates)]
    wide = side_by_side(pytest_rows, rates)
    if wide.empty:
        return pd.DataFrame()
    work = df.dropna(subset=["flops", "bytes"]).drop_duplicates(CASE, keep="last").set_index(CASE)[["flops", "bytes"]]
    machines = sorted(wide["device_time_s"].columns)
    rows = []
    for i, a in enumerate(machines):
        for b in machines[i + 1:]:
            for (_, *case), r in wide.iterrows():
                ta, tb = r[("device_time_s", a)], r[("device_time_s", b)]
                if pd.isna(ta) or pd.isna(tb) or tuple(case) not in work.index:
                    continue
                flops, nbytes = work.loc[tuple(case)]
                op, variant, dtype, shape = case
                ra = _roofline_s(flops, nbytes, dtype, rates[a])
                rb = _roofline_s(flops, nbytes, dtype, rates[b])
                case_id = "/".join(case)
                out = {"case": case_id, "op": op, "pair": f"{a}/{b}", "measured": ta / tb,
                       "predicted": math.nan, "departure": math.nan, "allowance": math.nan, "noise_from": "",
                       "verdict": "no roofline", "runs": tuple(f for f in (r[("run", a)], r[("run", b)])
                                                               if isinstance(f, str) and f)}
                if not (pd.isna(ra) or pd.isna(rb)):
                    out["bound"] = "compute" if flops and rates[a].get(f"gemm_{dtype}_flops") and \
                        flops / rates[a][f"gemm_{dtype}_flops"] >= nbytes / rates[a]["copy_bandwidth_Bps"] else "memory"
                    if max(ra / ta, rb / tb) < LATENCY_FRACTION:
                        out["verdict"] = "latency-bound"
                    else:
                        known = [noise.get(m, {}).get(case_id) for m in (a, b)]
                        allowance = max(gate.FLOOR, math.hypot(*(k or 0.0 for k in known)))
                        out |= {"predicted": ra / rb, "departure": out["measured"] / (ra / rb),
                                "allowance": allowance, "verdict": "judged",
                                "noise_from": " and ".join(m for m, k in zip((a, b), known) if k) or "floor only"}
                rows.append(out)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    # Each measured rate is one kernel at one operating point (an 8192³ GEMM, a 1 GiB copy), and every case of
    # a bound shares its error: the class's median departure is that shared part, and a case is judged
    # by how far it departs beyond it.
    judged = frame["verdict"] == "judged"
    frame["class_departure"] = frame[judged].groupby(["pair", "bound"])["departure"].transform("median")
    frame["beyond_class"] = frame["departure"] / frame["class_departure"]
    # What the roofline leaves unexplained for a typical case of the class (cache residency, launch
    # latency, a kernel's own efficiency): a robust spread of log(beyond_class), MAD scaled to one
    # standard deviation, of which NOISE_MULTIPLE widen the allowance as the gate's noise does.
    logs = frame.loc[judged, "beyond_class"].map(math.log)
    spread = logs.abs().groupby([frame.loc[judged, "pair"], frame.loc[judged, "bound"]]).transform("median") * 1.4826
    frame.loc[judged, "allowance"] = [max(a, math.expm1(NOISE_MULTIPLE * s)) for a, s in
                                      zip(frame.loc[judged, "allowance"], spread)]
    far = frame["beyond_class"].map(lambda d: abs(math.log(d)) if not pd.isna(d) else 0.0) > \
        frame["allowance"].map(lambda x: math.log1p(x) if not pd.isna(x) else math.inf)
    frame.loc[judged, "verdict"] = "as predicted"
    frame.loc[judged & far, "verdict"] = "not portable"
    frame["distance"] = frame["beyond_class"].map(lambda d: abs(math.log(d)) if not pd.isna(d) else -1.0)
    return frame.sort_values(["pair", "distance"], ascending=[True, False], kind="stable").drop(columns="distance")


PORTABILITY_NOTE = (
    "measured: the first machine's device time over the second's, from each machine's newest pytest run; "
    "predicted: the same ratio of the case's roofline time (its FLOPs at the measured GEMM rate of its dtype or "
    "its bytes at the measured copy rate, whichever is longer, each machine's own rates from its runs); "
    "departure: measured over predicted; beyond its bound's median: the departure over the median departure of "
    "the cases of its bound (memory or compute), the error every such case shares with the measured rates. not "
    "portable: that is "
    "beyond the allowance, the largest of the two machines' between-run noise of the case combined, three "
    "robust standard deviations of the bound's cases and the gate's {floor:.0%} floor; latency-bound: under "
    f"{LATENCY_FRACTION:.0%} of its roofline on both, which neither measured rate predicts.")


def portability_table(frame: pd.DataFrame, verdicts: tuple[str, ...] | None = None) -> tables.Table:
    """The portability rows as a table, the cases furthest from their prediction first; `verdicts`
    keeps only rows of those verdicts."""
    if frame.empty:
        return tables.Table([], [])
    shown = frame if verdicts is None else frame[frame["verdict"].isin(verdicts)]

    def ratio(x):
        return "—" if pd.isna(x) else f"{x:.3f}"
    rows = [[r.case, r.pair, ratio(r.measured), ratio(r.predicted), ratio(r.departure), ratio(r.beyond_class),
             "—" if pd.isna(r.allowance) else f"±{r.allowance:.1%} ({r.noise_from})",
             r.verdict] for r in shown.itertuples()]
    files = sorted({f for runs in shown["runs"] for f in runs}) if "runs" in shown else []
    return tables.Table(["case", "machines", "measured", "predicted", "departure", "beyond its bound's median",
                         "allowance", "verdict"], rows, files)


def portability_summary(frame: pd.DataFrame) -> str:
    """One line: how many cases of each pair were judged, and how many are not portable."""
    if frame.empty:
        return ""
    parts = []
    for pair, g in frame.groupby("pair"):
        counts = g["verdict"].value_counts()
        parts.append(f"{pair}: {counts.get('not portable', 0)} of {int(g['predicted'].notna().sum())} cases "
                     f"with a prediction are not portable ({counts.get('latency-bound', 0)} latency-bound, "
                     "not judged)")
    return "; ".join(parts) + "."


def portability_of(data) -> pd.DataFrame:
    """portability() of a loaded results folder (report.Loaded), each machine's between-run noise
    read beside its results (results/between-runs/<machine>.json)."""
    from .judging import between_runs

    noise = {m: between_runs.load(data.root, m) for m in data.machines}
    return portability(data.measurements, data.measured_rates, noise)


def portability_markdown(frame: pd.DataFrame, dirty=(), link=lambda name: f"`{name}`") -> str:
    """The summary, the table with the files it comes from (`link` spells each; the runs of `dirty`,
    made from a dirty tree, marked) and what its columns mean."""
    from .judging import gate

    if frame.empty:
        return ""
    t = portability_table(frame)
    return (portability_summary(frame) + "\n\n" + t.markdown() + "\n\n"
            + (tables.from_line(t.sources, dirty, link) + "\n\n" if t.sources else "")
            + PORTABILITY_NOTE.format(floor=gate.FLOOR))


# --- silence is an alert: machines that stopped storing results -----------------------------------

STALE_HOURS = 36  # a nightly machine is silent when its newest stored measurement is older than this
MACHINES_FILE = ".github/nightly-machines.json"


def fleet_machines(start) -> list[str]:
    """The nightly's machines from the first MACHINES_FILE at or above `start`; [] where there is none."""
    import json
    from pathlib import Path

    for folder in [Path(start).resolve(), *Path(start).resolve().parents]:
        found = folder / MACHINES_FILE
        if found.is_file():
            return [m["machine"] for m in json.loads(found.read_text())]
    return []


def stored_at(results_dir, machine: str):
    """When `machine` last measured: the newest end of a benchmark in its ASV result files (UTC; a
    row's started_at + duration, or an older file's `ended_at`), None without any. The measurement
    time, not the commit's `date`: a box that measures an old commit, or the same commit again, is
    alive; a git checkout's file times say when it was checked out."""
    import datetime as dt
    from pathlib import Path

    from .results import asv_end_times

    times = asv_end_times(Path(results_dir) / machine)
    return dt.datetime.fromtimestamp(max(times) / 1000, dt.timezone.utc) if times else None


def stale_lines(results_dir, machines: list[str], now=None, hours: float = STALE_HOURS) -> list[str]:
    """One "**Stale:**" line per machine of `machines` whose newest stored results are older than `hours`."""
    import datetime as dt

    now = now or dt.datetime.now(dt.timezone.utc)
    lines = []
    for machine in machines:
        when = stored_at(results_dir, machine)
        if when is None:
            lines.append(f"**Stale:** {machine} has stored no results")
        elif (age := (now - when).total_seconds() / 3600) > hours:
            lines.append(f"**Stale:** {machine} last stored results {age:.0f} hours ago")
    return lines


def main(argv=None) -> int:
    """`python -m mlpbench.fleet stale`: the stale lines of the nightly's machines, for the fleet summary."""
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m mlpbench.fleet")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stale", help=f"machines of {MACHINES_FILE} with no results stored for --hours")
    s.add_argument("--results", type=Path, default=Path("results/asv"), help="ASV results (default: results/asv)")
    s.add_argument("--machines", type=Path, default=Path(MACHINES_FILE), help=f"default: {MACHINES_FILE}")
    s.add_argument("--hours", type=float, default=STALE_HOURS, help=f"default: {STALE_HOURS}")
    args = p.parse_args(argv)
    import json

    machines = [m["machine"] for m in json.loads(args.machines.read_text())]
    for line in stale_lines(args.results, machines, hours=args.hours):
        print(line + "\n")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
