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


def asv_points(folder: Path) -> list[tuple[Path, Point]]:
    """Every ASV result point under `folder` with the file it came from (two result files of one
    commit, two environments or two runs, stay apart); [] when there is no such folder."""
    out: list[tuple[Path, Point]] = []
    if not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*.json")):
        if path.name in NOT_RESULTS:
            continue
        try:
            out += [(path, p) for p in _asv_points(json.loads(path.read_text()))]
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
            doc = json.loads(path.read_text())
            if isinstance(doc, dict) and "outcomes" in doc and "benchmarks" not in doc:
                continue  # a run's outcomes file: read by tables.not_timed()
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
