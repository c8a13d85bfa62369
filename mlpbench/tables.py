"""pytest-benchmark runs → one pandas DataFrame of records (`frame`) → tables (`Table`: markdown,
HTML, CSV): the per-op tables that `mlpbench run` prints and the report's (mlpbench/report/).

Throughput is derived here, never stored: TFLOP/s = flops / device time for the GEMM ops, GB/s =
bytes / device time for the memory-bound step (host time stands in where no device time exists).

A figure that `noise` finds wanting (samples spread wide against their median; for host time also a
median far above the fastest call, or calls that last whole scheduler ticks) is marked noisy
wherever it is shown, with the reason, and so is every ratio built on it: on a busy machine a
median can be off by orders of magnitude while still looking like a measurement.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import registry, results
from .ops import ROLES

_, _COMPILER, _PEER, _OURS = ROLES  # the peer table sets our kernels against compilers' and peers'

# Rated in TFLOP/s against the measured GEMM rate (Op.bound "compute"); every other op in GB/s against
# the measured copy rate.
COMPUTE_BOUND = frozenset(name for name, op in registry.OPS.items() if op.compute_bound)
VARIANT_ORDER = registry.all_variants()  # column order: baselines first, then compilers, peers, ours
# What speedups are taken over, for prose about every op at once: the ops' baseline variants.
BASELINES = " or ".join(dict.fromkeys(op.baseline for op in registry.OPS.values()))
NOISY_SPREAD = 0.10  # IQR / median above this marks a figure noisy
NOISY_OVER_MIN = 2.0  # host time: a median above this many times the fastest call marks it noisy
TICK_S = 4e-3  # the scheduler tick of a CONFIG_HZ=250 kernel, the common default
TICK_TOLERANCE = 0.05  # of a tick: a sample this close to a whole number of ticks lies on one
NOISY_NOTE = (f"noisy: the IQR of the samples is over {NOISY_SPREAD:.0%} of their median, their median is over "
              f"{NOISY_OVER_MIN:g}× their fastest, or most of them last whole {TICK_S * 1e3:g} ms scheduler ticks, "
              "so the figure, and every ratio or rate built on it, may be far from what a quiet machine measures; "
              "run again with the machine otherwise idle.")
HOST_ONLY = "host time only"
PAIRED_RATIO = "host_time_back_to_back_paired_ratio"  # derived in `frame` (mlpbench run --paired)
PAIRED = "host_time_back_to_back_paired_s"  # that ratio times one baseline time (report.summary)


def _iqr(samples) -> float | None:
    if not isinstance(samples, (list, tuple)) or len(samples) < 2:
        return None
    q1, q3 = np.percentile(np.asarray(samples, dtype=float), [25, 75])
    return float(q3 - q1)


def noise(median, iqr=None, minimum=None, samples=None) -> str:
    """Why a time figure is not to be believed, as the tables print it after "noisy: "; '' when it is.

    Noisy when the IQR of its samples is over NOISY_SPREAD of the median (any figure: the samples
    disagree), when the median is over NOISY_OVER_MIN × `minimum` (a quiet machine repeats its
    fastest call: most calls lost time to something else), or when the median is a tick or more and
    most `samples` lie within TICK_TOLERANCE of a whole number of TICK_S ticks (the process was
    descheduled and woken by the scheduler's tick, so the figure counts ticks, not the call, and its
    IQR can be small). Pass `minimum` and `samples` for host time only: CUDA-graph replays are timed
    on the GPU, which the host's ticks do not stretch.
    """
    if median is None or pd.isna(median) or median <= 0:
        return ""
    if iqr is not None and not pd.isna(iqr) and iqr > NOISY_SPREAD * median:
        return f"IQR {iqr * 1e6:,.1f}"
    if minimum is not None and not pd.isna(minimum) and median > NOISY_OVER_MIN * minimum:
        return f"median {median / minimum:,.1f}× min"
    if isinstance(samples, (list, tuple)) and samples and median >= TICK_S:
        ticks = np.asarray(samples, dtype=float) / TICK_S
        on = (np.rint(ticks) >= 1) & (np.abs(ticks - np.rint(ticks)) <= TICK_TOLERANCE)
        if on.mean() > 0.5:
            return f"{on.mean():.0%} of samples on {TICK_S * 1e3:g} ms ticks"
    return ""


def baseline(op: str) -> str | None:
    """The op's baseline variant, which speedups are taken against (None for an op no longer registered)."""
    return registry.OPS[op].baseline if op in registry.OPS else None


def load_pytest_json(paths) -> pd.DataFrame:
    """`frame` of the pytest-benchmark files among `paths`; unreadable or foreign files are skipped
    with a warning naming them."""
    return frame(results.pytest_runs(paths))


def frame(runs: list[results.PytestRun]) -> pd.DataFrame:
    """One row per benchmark record of `runs` (results.pytest_records), with the figures derived:
    spreads, the time shown (device time where there is one), noise marks, rates, the fraction of
    the copy or GEMM rate the run measured, and the speedup over the op's baseline from the same file
    (the same run)."""
    df = results.pytest_records(runs)
    if df.empty:
        return df
    # The rates the run measured, which results.py names after the key runs store them under (`ceilings`):
    # rates of one copy and one GEMM, not bounds, so they are called what they are from here on.
    df = df.rename(columns={"copy_ceiling_Bps": "copy_rate_Bps", "gemm_ceiling_flops": "gemm_rate_flops"})
    df["device_iqr_s"] = df.pop("device_time_samples_s").map(_iqr)
    b2b = df.pop("host_time_back_to_back_samples_s")
    df["host_back_to_back_iqr_s"] = b2b.map(_iqr)
    for col in ("device_time_s", "device_iqr_s", "host_time_s", "host_iqr_s", "host_min_s",
                "host_time_back_to_back_s", "host_back_to_back_iqr_s", "copy_rate_Bps", "gemm_rate_flops",
                "flops", "bytes"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    # Why each figure is noisy ('' when it is not): `noise`, with the minimum and single-call samples of host time.
    df["device_noise"] = [noise(m, q) for m, q in zip(df["device_time_s"], df["device_iqr_s"])]
    df["host_noise"] = [noise(m, q, lo, s) for m, q, lo, s in
                        zip(df["host_time_s"], df["host_iqr_s"], df["host_min_s"], df.pop("host_time_samples_s"))]
    df["host_back_to_back_noise"] = [noise(m, q, min(s) if isinstance(s, list) and s else None) for m, q, s in
                                     zip(df["host_time_back_to_back_s"], df["host_back_to_back_iqr_s"], b2b)]
    on_device = df["device_time_s"].notna()
    df["time_s"] = df["device_time_s"].where(on_device, df["host_time_s"])
    df["time_iqr_s"] = df["device_iqr_s"].where(on_device, df["host_iqr_s"])
    df["time_noise"] = df["device_noise"].where(on_device, df["host_noise"])
    df["noisy"] = df["time_noise"] != ""
    compute = df["op"].isin(COMPUTE_BOUND)
    df["tflops"] = (df["flops"] / df["time_s"] / 1e12).where(compute)
    df["gbps"] = df["bytes"] / df["time_s"] / 1e9
    # Against the rate the same run measured, and only for device time: host time measures the CPU too.
    df["of_measured_rate"] = ((df["flops"] / df["device_time_s"] / df["gemm_rate_flops"]).where(compute)
                              .fillna((df["bytes"] / df["device_time_s"] / df["copy_rate_Bps"]).where(~compute)))
    # Each variant against its op's baseline from the same file (the same run): a box measured twice
    # gives two pairs.
    pair = ["file", "machine", "op", "dtype", "shape_id"]
    base = df[df["variant"] == df["op"].map(baseline)].drop_duplicates(pair, keep="last").set_index(pair)
    key = pd.MultiIndex.from_frame(df[pair])
    df["speedup_vs_eager"] = base["time_s"].reindex(key).to_numpy() / df["time_s"].to_numpy()
    base_noisy = base["noisy"].reindex(key).fillna(False).to_numpy(dtype=bool)
    df["speedup_noisy"] = df["noisy"].to_numpy(dtype=bool) | base_noisy
    # The paired ratio (mlpbench run --paired): back-to-back host time over the op's baseline's, their
    # rounds interleaved in one process; the baseline itself at 1 in a file that paired anything.
    ratio = pd.to_numeric(df["host_time_back_to_back_vs_eager"], errors="coerce")
    is_base = df["variant"] == df["op"].map(baseline)
    df[PAIRED_RATIO] = ratio = ratio.mask(is_base & df["file"].isin(set(df.loc[ratio.notna(), "file"])), 1.0)
    ratio_iqr = df.pop("host_time_back_to_back_vs_eager_samples").map(_iqr)
    df["host_back_to_back_paired_noise"] = [noise(r, q) for r, q in zip(ratio, ratio_iqr)]
    return df


SHAPE_KEY = ["machine", "op", "dtype", "shape_id"]


def latest_per_case(df: pd.DataFrame, variant: str | None = None) -> pd.DataFrame:
    """For each machine, op, dtype and shape, the records of the newest run that measured it: every
    variant of a shape then comes from one run, so their ratios never pair two runs.

    Only runs that measured the shape's baseline count (where one did): a run of a few variants (the
    compiled cases across fresh processes, say) must not hide a full run's other variants. With
    `variant`, the newest run that measured that variant instead (its table against its peers)."""
    if df.empty:
        return df
    if variant is not None:
        wanted = df["variant"] == variant
    else:
        wanted = df["variant"] == df["op"].map(baseline)
    runs = df.assign(_wanted=wanted).groupby([*SHAPE_KEY, "file"], sort=False)["_wanted"].transform("any")
    has_any = runs.groupby([df[k] for k in SHAPE_KEY], sort=False).transform("any")
    # A shape no wanted run measured keeps every run (the newest decides), unless a variant was asked for.
    eligible = df[runs | (~has_any if variant is None else False)]
    if eligible.empty:
        return eligible
    newest = eligible.sort_values(["datetime", "file"]).groupby(SHAPE_KEY, sort=False)["file"].last()
    key = pd.MultiIndex.from_frame(df[SHAPE_KEY])
    picked = df[newest.reindex(key).to_numpy() == df["file"].to_numpy()]
    return picked.drop_duplicates(["machine", "case"], keep="last")


def newest_per_variant(df: pd.DataFrame, column: str | None = None) -> pd.DataFrame:
    """Each machine's newest record of each case (op/variant/dtype/shape), among the records that
    carry `column` when given. Unlike latest_per_case, every variant comes from its own newest run,
    so a variant that older runs lack is still there; ratios between two variants may pair two runs."""
    if column is not None:
        df = df[df[column].notna()]
    return df.sort_values(["datetime", "file"]).drop_duplicates(["machine", "case"], keep="last")


def _fmt_us(s) -> str:
    return "—" if pd.isna(s) else f"{s * 1e6:,.1f}"


def _fmt(x, digits=2) -> str:
    return "—" if pd.isna(x) else f"{x:,.{digits}f}"


def fmt_time(median, iqr, host_only: bool = False, why: str | None = None) -> str:
    """µs, with why the figure is noisy said out loud when it is: `why` as `frame` found it (its
    *_noise columns), else `noise` of the IQR alone."""
    if pd.isna(median):
        return HOST_ONLY if host_only else "—"
    why = noise(median, iqr) if why is None else why
    return f"{median * 1e6:,.1f} (noisy: {why})" if why else f"{median * 1e6:,.1f}"


def fmt_ratio(x, noisy: bool, digits: int = 2) -> str:
    return "—" if pd.isna(x) else f"{x:,.{digits}f}×" + (" (noisy)" if noisy else "")


def noise_line(df: pd.DataFrame) -> str:
    """'' when no figure shown is noisy; else how many are, and what that means."""
    cols = [("device_time_s", "device_noise"), ("host_time_s", "host_noise")]
    shown = noisy = 0
    for value, why in cols:
        if value in df and why in df:
            shown += int(df[value].notna().sum())
            noisy += int((df[why] != "").sum())
    return f"{noisy} of {shown} figures are {NOISY_NOTE}" if noisy else ""


# A pytest-benchmark run made from a working tree with uncommitted changes (its `commit_info.dirty`):
# its commit does not name all the code that ran, so every page that names the run says so, in
# these words, beside its name.
DIRTY = "dirty tree"


def run_name(name: str, dirty: bool) -> str:
    """A run's name as a page shows it: marked where the run came from a dirty tree."""
    return f"{name} ({DIRTY})" if dirty else name


def dirty_runs(df: pd.DataFrame) -> set[str]:
    """The runs (labels) of `df`'s rows that came from a dirty tree (its `dirty_tree` column, which
    report.load adds); none where the frame has no such column."""
    if df.empty or "dirty_tree" not in df or "run" not in df:
        return set()
    return set(df.loc[df["dirty_tree"].eq(True), "run"])


def dirty_note(dirty) -> str:
    """'' without dirty runs; else the line that names them and says what their mark means."""
    if not dirty:
        return ""
    one = len(dirty) == 1
    return (f"{len(dirty)} pytest-benchmark run{'' if one else 's'} {'was' if one else 'were'} made from a working "
            f"tree with uncommitted changes (pytest-benchmark's `commit_info.dirty`), so the commit "
            f"{'it records' if one else 'each records'} does not name all the code that ran; "
            f"{'it is' if one else 'each is'} marked ({DIRTY}) wherever it is named: "
            + ", ".join(f"`{r}`" for r in sorted(dirty)) + ".")


def from_line(sources, dirty=(), link=lambda name: f"`{name}`") -> str:
    """The line below a table or plot naming the files its figures come from, `link(name)` spelling
    each, every run from a dirty tree marked."""
    return "From " + ", ".join(run_name(link(s), s in dirty) for s in sources) + "."


@dataclass
class Table:
    """Headers and rows of strings, the one table renderer: markdown (terminal, .md), HTML (the
    report page) and CSV. `sources` names the result files the figures come from."""

    headers: list[str]
    rows: list[list[str]]
    sources: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, df: pd.DataFrame) -> Table:
        """A frame's cells as text, a missing value empty."""
        def cell(v) -> str:
            return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)

        return cls([str(c) for c in df.columns], [[cell(v) for v in r] for r in df.itertuples(index=False)])

    def __bool__(self) -> bool:
        return bool(self.rows)

    def markdown(self) -> str:
        def line(cells) -> str:  # a pipe or a line break inside a cell (a failure's reason) would end it
            return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

        return "\n".join([line(self.headers), line("---" for _ in self.headers), *map(line, self.rows)])

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(_html_cell(c) for c in r) + "</tr>" for r in self.rows)
        return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.headers)
        writer.writerows(self.rows)
        return buf.getvalue()


def _html_cell(text: str) -> str:
    cls = " class='noisy'" if "noisy" in text else " class='na'" if text in ("—", HOST_ONLY) else ""
    number = re.match(r"^-?[\d,]*\.?\d+", text)
    sort = f" data-sort='{number.group().replace(',', '')}'" if number else ""
    return f"<td{cls}{sort}>{html.escape(text)}</td>"


def op_tables(df: pd.DataFrame) -> str:
    """Markdown: one table per op with device and host time, throughput and speedup over the op's
    baseline, noisy figures and the ratios built on them marked, then a line saying how many were noisy."""
    parts = []
    for op, g in df.groupby("op", sort=False):
        rate = "TFLOP/s" if op in COMPUTE_BOUND else "GB/s"
        rows = [
            [r.variant, r.dtype, r.shape_id, fmt_time(r.device_time_s, r.device_iqr_s, True, r.device_noise),
             fmt_time(r.host_time_s, r.host_iqr_s, why=r.host_noise),
             _fmt(r.tflops if op in COMPUTE_BOUND else r.gbps, 1) + (" (noisy)" if r.noisy else ""),
             fmt_ratio(r.speedup_vs_eager, r.speedup_noisy)]
            for r in g.sort_values(["shape_id", "dtype", "variant"]).itertuples()
        ]
        parts.append(f"### {op}\n\n" + Table(
            ["variant", "dtype", "shape", "device µs", "host µs", rate, f"vs {baseline(op)}"], rows).markdown())
    note = noise_line(df)
    return "\n\n".join(parts) + (f"\n\n{note}" if note else "")


def variant_table(df: pd.DataFrame, op: str) -> Table:
    """One row per shape and dtype, one column per variant: µs, rate and speedup over the baseline,
    each variant paired with the baseline from the same run (the newest that measured the shape)."""
    g = latest_per_case(df[df["op"] == op])
    variants = [v for v in VARIANT_ORDER if v in set(g["variant"])]
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
            row.append(f"{fmt_time(r['time_s'], r['time_iqr_s'], why=r['time_noise'])} µs · "
                       f"{_fmt(value, 0 if rate == 'GB/s' else 1)} · "
                       f"{fmt_ratio(r['speedup_vs_eager'], r['speedup_noisy'])}")
        rows.append(row)
    return Table(["shape", "dtype", *[f"{v} (µs · {rate} · vs {baseline(op)})" for v in variants]], rows,
                 _sources(g))


def _sources(g: pd.DataFrame) -> list[str]:
    return sorted(set(g["run"])) if "run" in g else []


def not_timed(path) -> str:
    """Markdown list of the cases a run did not time (failed or skipped), with their reasons, from
    the run JSON or its outcomes file."""
    rows = [[o["case"], o["outcome"], o.get("reason") or ""] for o in results.outcomes(path) if o["outcome"] != "passed"]
    return Table(["case", "outcome", "reason"], rows).markdown() if rows else ""


def sweep_ops() -> list[str]:
    """The ops with a token sweep for the host-overhead crossover (Op.overhead_sweep)."""
    return [name for name, op in registry.OPS.items() if op.overhead_sweep]


def sweep_variants(op: str, sweep: pd.DataFrame | None = None) -> tuple[str, ...]:
    """The variants the crossover compares: the op's baseline, then its compiler variants (those
    measured in `sweep`, when given: a compiler may be timed at a few shapes only)."""
    measured = set(sweep["variant"]) if sweep is not None else None
    return (registry.OPS[op].baseline,
            *(v for v in registry.OPS[op].of_role("compiler") if measured is None or v in measured))


def crossover_sweep(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """The baseline and compiler rows of the op's token sweep (Op.overhead_sweep: the dims besides
    the token count, and the dtype), from the records that carry back-to-back host time when any do
    (older records have the synchronised figure only). Adds `tokens`, from each record's shape."""
    dims, dtype = registry.OPS[op].overhead_sweep
    g = df[(df["op"] == op) & (df["dtype"] == dtype) & df["variant"].isin(sweep_variants(op))]
    g = g.loc[g["shape"].map(lambda s: isinstance(s, dict) and results.dims_id(s, without=results.TOKENS) == dims)
              .astype(bool)]
    g = g.assign(tokens=g["shape"].map(results.tokens))
    if "host_time_back_to_back_s" in g and g["host_time_back_to_back_s"].notna().any():
        g = g[g["host_time_back_to_back_s"].notna()]
    # one run's figures, not an average over runs: the last record of each case (files load oldest first)
    return g.drop_duplicates(["variant", "shape_id"], keep="last")


def crossover_metric(g: pd.DataFrame) -> str:
    """The host-time column the crossover reads: back to back when the records have it."""
    col = "host_time_back_to_back_s"
    return col if col in g and not g.empty and g[col].notna().all() else "host_time_s"


def overhead_crossover(df: pd.DataFrame, op: str, compiler: str | None = None) -> int | None:
    """The smallest token count from which the op's `compiler` variant (default: its first) beats
    the baseline on host time per call, for every larger count measured too; None when it never does.

    Host time of calls queued back to back where the records have it (a serving loop's figure: the
    larger of CPU dispatch and device time), else the synchronised single-call host time."""
    base, compiler = registry.OPS[op].baseline, compiler or registry.OPS[op].of_role("compiler")[0]
    g = crossover_sweep(df, op)
    host = g.pivot_table(index="tokens", columns="variant", values=crossover_metric(g))
    if not {base, compiler} <= set(host.columns):
        return None
    wins = (host[compiler] < host[base]).sort_index()
    crossover = None
    for t, win in zip(reversed(wins.index), reversed(wins.to_numpy())):
        if not win:
            break
        crossover = int(t)
    return crossover


SPREAD_OF = {"device_time_s": "device_iqr_s", "host_time_back_to_back_s": "host_back_to_back_iqr_s",
             "host_time_s": "host_iqr_s"}
NOISE_OF = {"device_time_s": "device_noise", "host_time_back_to_back_s": "host_back_to_back_noise",
            "host_time_s": "host_noise", PAIRED: "host_back_to_back_paired_noise"}  # frame's reasons for each figure's noise mark


def overhead_rows(df: pd.DataFrame, op: str) -> Table:
    """Per token count of the op's sweep, the baseline's and compilers' device time and both host
    times (µs), noisy ones marked."""
    g = crossover_sweep(df, op)
    cols = [c for c in SPREAD_OF if c in g and g[c].notna().any()]
    if g.empty or not cols:
        return Table([], [])
    names = {"device_time_s": "device", "host_time_back_to_back_s": "host, back to back",
             "host_time_s": "host, one synchronised call"}
    variants = sweep_variants(op, g)
    by = g.set_index(["tokens", "variant"])
    rows = []
    for t in sorted(set(g["tokens"])):
        row = [str(t)]
        for c in cols:
            cell = []
            for v in variants:
                r = by.loc[(t, v)] if (t, v) in by.index else None
                spread = r.get(SPREAD_OF[c]) if r is not None else None
                cell.append(fmt_time(r[c], spread, why=r.get(NOISE_OF[c])) if r is not None else "—")
            row.append(" / ".join(cell))
        rows.append(row)
    return Table(["tokens", *[f"{names[c]}: {' / '.join(variants)} (µs)" for c in cols]], rows, _sources(g))


def copy_rate(c: dict) -> str:
    """A run's measured copy rate, with the method that set it and the vendor's figure where the run
    kept them (ceilings_version 2, mlpbench/bandwidth.py); version 1 runs measured copy_ alone."""
    if not c.get("copy_bandwidth_Bps"):
        return "—"
    text = f"{c['copy_bandwidth_Bps'] / 1e12:.2f} TB/s"
    method = c.get("copy_method") or "copy_ alone"
    vendor = f"; vendor {c['vendor_bandwidth_Bps'] / 1e12:.1f}" if c.get("vendor_bandwidth_Bps") else ""
    return f"{text} ({method}{vendor})"


def peer_table(wide: pd.DataFrame, op: str, mine: str | None = None) -> Table:
    """Our variant `mine` (default: the op's first of role 'ours') against the faster of its compiler
    and peer variants (Inductor, Liger) at each shape, from the newest run per shape that measured it."""
    mine, others = mine or registry.OPS[op].of_role(_OURS)[0], registry.OPS[op].of_role(_COMPILER, _PEER)
    g = latest_per_case(wide[wide["op"] == op], variant=mine)  # the peers from mine's own run
    rows = []
    for (shape, dtype), cell in g.groupby(["shape_id", "dtype"], sort=False):
        by = cell.set_index("variant")
        peers = by.loc[[v for v in others if v in by.index]]
        if mine not in by.index or peers["time_s"].dropna().empty:
            continue
        ours, peer = by.loc[mine], peers.loc[peers["time_s"].idxmin()]
        noisy = bool(ours["noisy"] or peer["noisy"])
        compute = op in COMPUTE_BOUND
        rate = f"{ours['tflops']:,.1f} TFLOP/s" if compute else f"{ours['gbps'] / 1e3:,.2f} TB/s"
        of_rate = "—" if pd.isna(ours["of_measured_rate"]) else f"{ours['of_measured_rate']:.0%}"
        rows.append([shape, dtype, f"{ours['bytes'] / 1e6:,.1f}",
                     fmt_time(ours["time_s"], ours["time_iqr_s"], why=ours["time_noise"]),
                     f"{fmt_time(peer['time_s'], peer['time_iqr_s'], why=peer['time_noise'])} ({peer.name})",
                     f"{ours['time_s'] / peer['time_s']:.3f}" + (" (noisy)" if noisy else ""),
                     rate, of_rate])
    what = "measured GEMM rate" if op in COMPUTE_BOUND else "measured copy rate"
    return Table(["shape", "dtype", "MB moved", f"{mine} µs", "faster peer µs", f"{mine} / peer", f"{mine} rate",
                  f"of {what}"], rows, _sources(g))
