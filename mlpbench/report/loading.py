"""Reading results/ once for the report and the pages (`load`): pytest-benchmark runs
(pytest/<machine>/, each with its cases' outcomes) and ASV runs (asv/), with the records and noise
the gate reads (codegen/, between-runs/) left where they lie, and the nightly's wall times
(nightly/). A file that cannot be read is skipped with a warning naming it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import tables
from ..record import NAMES
from ..results import (OUTCOMES_SUFFIX, PytestRun, Point, asv_points, nightly_history, outcomes, pytest_files,
                       pytest_runs, run_extras)

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


def label(path: Path, results: Path) -> str:
    """A file's name as the repository spells it (results/pytest/h200/….json), wherever `results` lies."""
    return f"{results.name}/{Path(path).relative_to(results).as_posix()}"


def asv_metric(benchmark: str) -> str:
    method = benchmark.rsplit(".", 1)[-1]
    return ASV_METRIC_ALIASES.get(method, method)


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
    beyond = {label(r.path, results): run_extras(r.path) for r in runs}
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

    out = []
    for path in sorted((results / "nightly").glob("*.json")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unreadable history: no nights, as for the nightly itself
            found = nightly_history(path)
        out += [n | {"machine": path.stem, "file": label(path, results)} for n in found]
    return out


def loaded(results: Path | Loaded) -> Loaded:
    return results if isinstance(results, Loaded) else load(results)


def _outcomes(results: Path, runs: list[PytestRun]) -> pd.DataFrame:
    """Each run's case outcomes (results.outcomes), and those of runs that timed nothing (an outcomes
    file alone, in its machine's folder)."""
    found = [(r.path, r.machine, r.datetime) for r in runs]
    alone = [p for p in sorted((results / "pytest").rglob("*" + OUTCOMES_SUFFIX))
             if not p.name.startswith(".") and not p.with_name(p.name.removesuffix(OUTCOMES_SUFFIX) + ".json").is_file()]
    for p in alone:
        try:  # named like a run: a UTC stamp first
            when = dt.datetime.strptime(p.name[:16], "%Y%m%dT%H%M%SZ").isoformat()
        except ValueError:
            when = p.name
        found.append((p, p.parent.name, when))
    rows = []
    for path, machine, when in found:
        try:
            read = outcomes(path)
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

