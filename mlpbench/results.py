"""The one reader of result files: pytest-benchmark JSON and ASV result files, for the gate, the
report, the tables and the pages.

A file that cannot be read (truncated, foreign, missing) is skipped with a warning naming it;
nothing else stops. What a measurement is of (op, variant, dtype, shape) comes from the file's
structure and the registry, never from taking a case id apart:

- pytest-benchmark records carry the record fields (mlpbench/record.py): `op`, `variant`, `dtype`,
  `shape` (the dims) and `shape_id`;
- ASV benchmarks of an op class (`<Op>Device`, `<Op>Host`) have the axes variant × dtype × shape as
  parameters, and the op comes from the class name;
- ASV benchmarks with one parameter holding an id (op classes before benchmark version v4, the
  compile-tax classes) are looked up by that id among the registry's cases and the changing-shapes
  runs (`subject`). An id found in neither (a case since removed) leaves the fields empty.

Besides the measurements it reads what travels with them: a run's case outcomes and its
`mlpbench_run`/`mlpbench_process`, a round's files for `mlpbench ab`, the nightly's history, the
confirmations, and the between-runs noise files (which, unlike the rest, raise: a gate must not
judge on a half-read allowance). Not results, so read where they are used: ASV's own
benchmarks.json and machine.json, the dashboard's graph JSON, the machine list, subprocess output,
and the files a writer reads back to rewrite (run_suite folding outcomes in, shards merging).

Importing this module imports no torch.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import registry
from .record import NAMES

# The token-count dim: every op's shapes start with it (t = batch × sequence), and sweeps over it
# (the overhead crossover, the changing-shapes runs) vary it alone.
TOKENS = registry.TOKENS
ASV_KINDS = ("Device", "Host", "Codegen")  # ASV op classes are registry.class_name(op) + one of these
NOT_RESULTS = ("machine.json", "benchmarks.json")  # ASV's own files beside the results

# Record fields a pytest-benchmark row keeps as they are (record.py says what each one is).
PYTEST_FIELDS = ("case", "op", "variant", "dtype", "shape", "shape_id", "tier", "device", "device_time_s", "flops",
                 "bytes", "max_rel_err", "timing_method", "peak_memory_bytes", "source", "kernels_per_call",
                 "memsets_per_call", "kernel_names", "kernel_times_s", "kernel_times_in_order_s",
                 "structure_problems", "shard", "host_time_back_to_back_vs_eager")
assert set(PYTEST_FIELDS) <= NAMES, set(PYTEST_FIELDS) - NAMES


dims_id = registry.dims_id  # the registry spells ids; this module looks them up


def shape_dims(op: str, shape_id: str, shape: dict | None = None) -> dict | None:
    """The dims of a measured shape: the record's own, else the registry's (None when it has none)."""
    if isinstance(shape, dict):
        return shape
    found = registry.shape_of(op, shape_id) if isinstance(op, str) else None
    return found.as_dict() if found else None


def tokens(dims) -> int | None:
    return dims.get(TOKENS) if isinstance(dims, dict) else None


# --- what a measurement is of ---------------------------------------------------------------------

@dataclass(frozen=True)
class Subject:
    """What an ASV benchmark parameter measures. `compiles`: its variant is torch.compile'd."""

    op: str
    variant: str
    dtype: str
    shape_id: str
    compiles: bool = False


def _variant_compiles(op: str, variant: str) -> bool:
    op_ = registry.OPS.get(op)
    return op_ is not None and variant in op_.variant_names and op_.variant(variant).compiles


@functools.cache
def _subjects() -> dict[str, Subject]:
    """Every id an ASV parameter can hold: registry case ids, and the changing-shapes runs' ids
    (per op with changing_shapes: each variant but the baseline at a shape's dims without the token
    count, compiler variants also with dynamic=True; as asv_compile.sequences makes them)."""
    out = {c.id: Subject(c.op, c.variant, c.dtype, c.shape.id, _variant_compiles(c.op, c.variant))
           for c in registry.all_cases()}
    for op in registry.OPS.values():
        if not op.changing_shapes:
            continue
        for shape in op.shapes:
            dims = dims_id(shape.as_dict(), without=TOKENS)
            for v in op.variants[1:]:
                for dtype in shape.dtypes:
                    out.setdefault(registry.sequence_id(op.name, v.name, dtype, shape),
                                   Subject(op.name, v.name, dtype, dims, v.compiles))
                    if v.compiles:
                        out.setdefault(registry.sequence_id(op.name, v.name, dtype, shape, dynamic=True),
                                       Subject(op.name, v.name + registry.DYNAMIC, dtype, dims, True))
    return out


def subject(param_id: str) -> Subject | None:
    """What a one-id ASV parameter measures, by lookup; None for an id the registry does not know."""
    return _subjects().get(param_id)


# ASV op classes ('GeluMulDevice') by the op they measure.
_OP_OF_CLASS = {f"{registry.class_name(op)}{kind}": op for op in registry.OPS for kind in ASV_KINDS}


# --- ASV result files -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One value of one ASV benchmark at one commit. `param` is the parameter as the gate keys and
    prints it: the case id for op classes, else the parameters joined."""

    machine: str
    commit: str
    date: int
    benchmark: str
    param: str
    version: str
    value: float | None
    samples: tuple[float, ...] | None
    op: str | None = None
    variant: str | None = None
    dtype: str | None = None
    shape_id: str | None = None
    compiles: bool = field(default=False, compare=False)

    def __post_init__(self):
        # A point made by hand from an id (tests, detection trials) learns what it measures by lookup.
        if self.op is None and (s := subject(self.param)) is not None:
            for name in ("op", "variant", "dtype", "shape_id", "compiles"):
                object.__setattr__(self, name, getattr(s, name))

    @property
    def method(self) -> str:
        """The benchmark's method name (`track_device_time`): the module holding it has been renamed."""
        return self.benchmark.rsplit(".", 1)[-1]


def _combos(params: list[list[str]]) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for values in params:
        combos = [c + (v.strip("'"),) for c in combos for v in values]  # ASV stores each value's repr
    return combos if params else []


def identify(benchmark: str, combos: list[tuple[str, ...]]) -> list[tuple[str, Subject | None]]:
    """(param, subject) per parameter combination."""
    parts = benchmark.split(".")
    op = _OP_OF_CLASS.get(parts[-2]) if len(parts) >= 3 else None
    if op and combos and all(len(c) == 3 for c in combos):
        # the case id, as registry.Case.id spells it: the gate keys points on it across versions
        return [(registry.case_id(op, variant, dtype, shape), Subject(op, variant, dtype, shape, _variant_compiles(op, variant)))
                for variant, dtype, shape in combos]
    return [(", ".join(c), subject(c[0]) if len(c) == 1 else None) for c in combos]


def _asv_points(doc: dict) -> list[Point]:
    cols = doc["result_columns"]
    out = []
    for name, row in doc["results"].items():
        r = dict(zip(cols, row))
        values = r["result"] if isinstance(r["result"], list) else [r["result"]]
        params = identify(name, _combos(r.get("params") or [])) or [("", None)]
        samples = r.get("samples") or [None] * len(values)
        for k, value in enumerate(values):
            s = samples[k] if k < len(samples) else None
            param, subj = params[k] if k < len(params) else (str(k), None)
            what = {} if subj is None else {"op": subj.op, "variant": subj.variant, "dtype": subj.dtype,
                                             "shape_id": subj.shape_id, "compiles": subj.compiles}
            missing = value is None or (isinstance(value, float) and math.isnan(value))
            out.append(Point(doc["params"]["machine"], doc["commit_hash"], doc.get("date") or 0, name, param,
                             str(r.get("version")), None if missing else float(value), tuple(s) if s else None, **what))
    return out


def _json(path) -> object:
    return json.loads(Path(path).read_text())


def asv_files(folder: Path) -> list[Path]:
    """The ASV result files under `folder` (not ASV's own files beside them); [] without the folder."""
    folder = Path(folder)
    return [p for p in sorted(folder.rglob("*.json")) if p.name not in NOT_RESULTS] if folder.is_dir() else []


def asv_end_times(folder: Path) -> list[float]:
    """When each benchmark in the ASV result files under `folder` ended (ms since the epoch): a row's
    started_at + duration, or an older file's `ended_at`. Unreadable files are skipped without a
    warning: the report warns about them where it reads their points."""
    times: list[float] = []
    for path in asv_files(folder):
        try:
            doc = _json(path)
            times += [v for v in (doc.get("ended_at") or {}).values() if isinstance(v, (int, float))]
            cols = doc.get("result_columns") or []
            for row in (doc.get("results") or {}).values() if "started_at" in cols else []:
                r = dict(zip(cols, row))
                if isinstance(r.get("started_at"), (int, float)):
                    times.append(r["started_at"] + 1000 * (r.get("duration") or 0))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return times


def asv_points(folder: Path) -> list[tuple[Path, Point]]:
    """Every ASV result point under `folder` with the file it came from (two result files of one
    commit, two environments or two runs, stay apart); [] when there is no such folder."""
    out: list[tuple[Path, Point]] = []
    if not folder.is_dir():
        return out
    for path in asv_files(folder):
        try:
            out += [(path, p) for p in _asv_points(_json(path))]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(f"skipping {path}: not a readable ASV result file ({type(exc).__name__}: {exc})",
                          stacklevel=2)
    return out


# --- pytest-benchmark files -----------------------------------------------------------------------

@dataclass
class PytestRun:
    """One pytest-benchmark file: `env` is machine_info["mlpbench"] (GPU, versions, ceilings)."""

    path: Path
    machine: str
    commit: str | None
    datetime: str
    env: dict
    benchmarks: list

    @property
    def ceilings(self) -> dict:
        return self.env.get("ceilings") or {}


def pytest_files(results: Path, folder: str = "pytest") -> list[Path]:
    """The pytest-benchmark files under results/<folder> (a run's outcomes file is not one, nor a
    hidden file: a run's parts and temporary files, which are not results until it publishes them)."""
    d = results / folder
    return sorted(p for p in d.rglob("*.json") if not p.name.endswith(".outcomes.json")
                  and not p.name.startswith(".")) if d.is_dir() else []


def pytest_runs(paths) -> list[PytestRun]:
    """The readable pytest-benchmark files among `paths`; the others are skipped with a warning naming them."""
    runs = []
    for path in map(Path, paths):
        try:
            doc = _json(path)
            if isinstance(doc, dict) and "outcomes" in doc and "benchmarks" not in doc:
                continue  # a run's outcomes file: read by outcomes()
            benches = doc["benchmarks"]
            env = doc.get("machine_info", {}).get("mlpbench", {}) or {}
            runs.append(PytestRun(path, env.get("machine", "unknown"), (doc.get("commit_info") or {}).get("id"),
                                  doc.get("datetime") or path.name, env, benches))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(f"skipping {path}: not a readable pytest-benchmark file ({exc})", stacklevel=2)
    return runs


def pytest_records(runs: list[PytestRun]) -> pd.DataFrame:
    """One row per benchmark record, as stored: the record fields, `shape` (the dims, from the
    record or the registry), the host time pytest-benchmark measured where the record has none,
    the ceilings of the run, and the file it came from (`file`, `run`: its name, `datetime`)."""
    rows = []
    for run in runs:
        for b in run.benchmarks:
            info = b.get("extra_info", {})
            if "case" not in info:
                continue
            stats = b.get("stats") or {}
            row = {"file": str(run.path), "run": run.path.name, "datetime": run.datetime, "machine": run.machine,
                   "commit": run.commit, **{k: info.get(k) for k in PYTEST_FIELDS}}
            row["shape"] = shape_dims(row["op"], row["shape_id"], row["shape"])
            rows.append(row | {
                "device_time_samples_s": info.get("device_time_samples_s"),
                "host_time_s": info.get("host_time_s", stats.get("median")),
                "host_iqr_s": stats.get("iqr"),
                "host_min_s": stats.get("min"),
                "host_time_samples_s": info.get("host_time_samples_s"),
                "host_time_back_to_back_s": info.get("host_time_back_to_back_s"),
                "host_time_back_to_back_samples_s": info.get("host_time_back_to_back_samples_s"),
                "host_time_back_to_back_vs_eager_samples": info.get("host_time_back_to_back_vs_eager_samples"),
                "copy_ceiling_Bps": run.ceilings.get("copy_bandwidth_Bps"),
                "gemm_ceiling_flops": run.ceilings.get(f"gemm_{info.get('dtype')}_flops"),
            })
    return pd.DataFrame(rows)


def device_samples(paths, drop_first: int = 0) -> dict[str, list[float]]:
    """Device samples per case of the pytest-benchmark files `paths`; `drop_first` leaves out each
    case's first samples (a warm-up)."""
    out = {}
    for run in pytest_runs(paths):
        for b in run.benchmarks:
            info = b["extra_info"]
            if info.get("device_time_samples_s"):
                out[info["case"]] = info["device_time_samples_s"][drop_first:]
    return out


def sampled_records(path: Path) -> dict[str, dict]:
    """{case id: record extra_info} of one pytest-benchmark file, for the cases with device-time samples."""
    return {b["extra_info"]["case"]: b["extra_info"] for run in pytest_runs([path]) for b in run.benchmarks
            if "device_time_samples_s" in b.get("extra_info", {})}


def run_extras(path: Path) -> tuple[dict, bool]:
    """What a run file holds beside its records, read in one pass: its `mlpbench_run` ({wall_s, parts};
    {} where it has none), and whether pytest-benchmark found the working tree dirty (its
    `commit_info.dirty`; False where it says nothing). ({}, False) for a file that cannot be read,
    without a warning: pytest_runs() warns about that file."""
    try:
        doc = _json(path)
        found, info = doc.get("mlpbench_run"), doc.get("commit_info") or {}
        dirty = info.get("dirty") is True
    except (OSError, ValueError, AttributeError):
        return {}, False
    return (found if isinstance(found, dict) and isinstance(found.get("wall_s"), (int, float)) else {}), dirty


def process_info(path: Path) -> dict:
    """The `mlpbench_process` of one pytest process's JSON (pytest_plugin.process_cost); {} without
    one, and without a warning: a process that timed nothing wrote no file."""
    try:
        found = _json(path).get("mlpbench_process")
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


# --- what travels with the measurements -----------------------------------------------------------

OUTCOMES_SUFFIX = ".outcomes.json"  # older runs kept their outcomes in a file of their own beside the run


def outcomes(path) -> list[dict]:
    """A run's case outcomes ({case, outcome, reason, ...}): the run JSON's `outcomes` list, else
    those of an outcomes file (`path` itself, or the one beside the run); [] where there are none."""
    path = Path(path)
    doc = _json(path)
    if "outcomes" not in doc and not path.name.endswith(OUTCOMES_SUFFIX):
        beside = path.with_name(path.stem + OUTCOMES_SUFFIX)
        doc = _json(beside) if beside.is_file() else {}
    return list(doc.get("outcomes") or [])


def own_outcomes(paths) -> list[dict]:
    """The `outcomes` lists of every file among `paths`, each file's own (a round's run files and
    outcomes files, as `mlpbench run` wrote them); an unreadable file is skipped with a warning."""
    out = []
    for path in map(Path, paths):
        try:
            out += _json(path).get("outcomes", [])
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            warnings.warn(f"skipping {path}: not a readable run or outcomes file ({exc})", stacklevel=2)
    return out


def nightly_history(path: Path) -> list[dict]:
    """The nights recorded in `path`; [] where there is none, or (with a warning) where it is unreadable:
    a lost history costs one night's comparison, never the nightly."""
    if not path.is_file():
        return []
    try:
        doc = _json(path)
        if not isinstance(doc, list):
            raise ValueError("not a list")
    except (OSError, ValueError) as exc:
        warnings.warn(f"ignoring {path}: not a readable nightly history ({exc})", stacklevel=2)
        return []
    return [n for n in doc if isinstance(n, dict) and isinstance(n.get("wall_s"), (int, float))]


def confirmations(folder: Path) -> dict[tuple[str, str, str], str]:
    """{(head commit, benchmark, param): status} of the confirmation files in `folder`. An unreadable
    file is skipped, silently: it leaves its steps as the gate judged them."""
    out = {}
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            for c in _json(p):
                out[(c["head"], c["benchmark"], c["param"])] = c["status"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def between_runs_doc(path: Path, versions) -> dict:
    """A between-runs noise file (between_runs.py writes it) of one of `versions`. Raises where it
    cannot be read, never skips: thresholds judged without a machine's noise file would mislead."""
    doc = _json(path)
    version = doc.get("version", 1)
    if version not in versions:
        raise ValueError(f"format version {version!r}, this reader knows {', '.join(map(str, versions))}")
    return doc
