"""What the report holds (`sections`): the intro lines, then each section in reading order, its
text, plots and tables computed from what `load` read."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .. import fleet, registry, tables
from ..judging import gate
from ..ops import ROLES
from .costs import (COST_NOTE, case_costs, nightly_cost_table, process_cost_table, run_cost_table,
                    slowest_cases_table)
from .loading import Loaded, loaded
from .plots import history_plots, history_series, roofline_cases, roofline_plot, speedup_cases, speedup_plot
from .ranking import SUMMARY_NOTE, summary
from .section_tables import (asv_files_table, compile_table, gate_table, kernel_table, not_timed_table,
                             overhead_verdict, results_table, runs_table, step_table, structure_table)


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
                          "faster), and its rate against the copy or GEMM rate that run measured. MB moved counts "
                          "the fewest bytes one call must move.")]
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
