"""The suite's own cost, as the report shows it: wall time per run and per pytest process, the
slowest cases and each night of `mlpbench nightly`, from the fields runs and nights record."""

from __future__ import annotations

import pandas as pd

from .. import tables
from ..record import NAMES
from .loading import Loaded

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
             "ahead (process starts, imports, measuring the copy and GEMM rates); the processes of a sharded "
             "run run at once, so their cases can add up to more than the run. Then each pytest process's time outside its cases (its interpreter and imports; "
             "collection and preloading up to its first case, including any wait for the compiles made ahead, "
             "which it starts beside, and for the process before it: the processes of a run start at once and "
             "measure in turn, so their wall times overlap; memory released after cases; measuring the copy "
             "and GEMM rates; its exit), the slowest cases "
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
        # the first calls that worker processes made before any case was timed (mlpbench/compile/precompile.py)
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
