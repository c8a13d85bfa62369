"""Small fabricated result files in the formats the loaders read (mlpbench/results.py): ASV result
files (ASV's format v2, op-class benchmarks over variant × dtype × shape) and pytest-benchmark runs
with the `extra_info` record fields. Tests build what they need under tmp_path: the committed
results/ is being moved and pruned, so no test may depend on it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from mlpbench import registry

ASV_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
VERSION = "mlpbench-v4-device-v3"


def noisy(median: float, seed: int, n: int = 20, cv: float = 0.002) -> list[float]:
    """`n` samples spread by `cv` around `median`."""
    return [float(x) for x in median * (1 + cv * np.random.default_rng(seed).standard_normal(n))]


def op_class_row(values: dict[str, float | list[float]], version: str = VERSION) -> list:
    """One ASV row of an op class: axes variant × dtype × shape over the cases in `values` (ids of one
    op), each value a figure or its samples (the median is the result). Combinations not given are
    None, as ASV stores a parameter set that did not run."""
    cases = {c: registry.case_by_id(c) for c in values}
    axes = [list(dict.fromkeys(getattr(c, a) for c in cases.values())) for a in ("variant", "dtype")]
    axes.append(list(dict.fromkeys(c.shape.id for c in cases.values())))
    by_combo = {(c.variant, c.dtype, c.shape.id): v for c, v in zip(cases.values(), values.values())}
    combos = list(itertools.product(*axes))
    given = [by_combo.get(k) for k in combos]
    result = [float(np.median(v)) if isinstance(v, list) else v for v in given]
    params = [[repr(x) for x in axis] for axis in axes]
    if not any(isinstance(v, list) for v in given):
        return [result, params, version, 0, 1.0]
    samples = [v if isinstance(v, list) else None for v in given]
    counts = [len(s) if s else None for s in samples]
    return [result, params, version, 0, 1.0, None, None, None, None, [1] * len(combos), counts, samples]


def op_class_rows(method: str, values: dict[str, float | list[float]], kind: str = "Device",
                  module: str = "standard") -> dict[str, list]:
    """`<module>.<Op><kind>.<method>` rows, one per op among the case ids of `values`."""
    by_op: dict[str, dict] = {}
    for case, v in values.items():
        by_op.setdefault(registry.case_by_id(case).op, {})[case] = v
    return {f"{module}.{registry.class_name(op)}{kind}.{method}": op_class_row(vals) for op, vals in by_op.items()}


def asv_file(folder: Path, machine: str, commit: str, date: int, rows: dict[str, list]) -> Path:
    """`folder/<machine>/<commit[:8]>-existing.json`, an ASV result file holding `rows`."""
    doc = {"commit_hash": commit, "date": date, "params": {"machine": machine, "python": "3.12"},
           "result_columns": ASV_COLUMNS, "results": rows, "version": 2, "env_name": "existing"}
    path = folder / machine / f"{commit[:8]}-existing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def device_times(folder: Path, machine: str, commit: str, date: int, medians: dict[str, float], seed: int,
                 cv: float = 0.002) -> Path:
    """An ASV result file of device time (20 samples a case around its median) for the given cases."""
    values = {case: noisy(m, seed * 1000 + k, cv=cv) for k, (case, m) in enumerate(medians.items())}
    return asv_file(folder, machine, commit, date, op_class_rows("track_device_time", values))


def pytest_record(case_id: str, device_s: float, **info) -> dict:
    """One pytest-benchmark record of a registry case: the record fields the loaders read, the dims
    from the registry, host time twice the device time unless given."""
    c = registry.case_by_id(case_id)
    extra = {"case": c.id, "op": c.op, "variant": c.variant, "dtype": c.dtype, "shape": c.shape.as_dict(),
             "shape_id": c.shape.id, "tier": "standard", "device": "cuda", "device_time_s": device_s,
             "host_time_s": device_s * 2, "flops": 0, "bytes": 0} | info
    return {"name": f"test_case[{c.id}]", "stats": {"median": extra["host_time_s"]}, "extra_info": extra}


def pytest_run(folder: Path, machine: str, stamp: str, records: list[dict], commit: str | None = None,
               ceilings: dict | None = None, dirty: bool | None = None) -> Path:
    """`folder/<machine>/<stamp>-standard-1.json`: a pytest-benchmark file as `mlpbench run` writes it
    (stamp: a UTC time like 20990101T000000Z, so name order is time order); `dirty`, where given, is
    its `commit_info.dirty`."""
    env = {"machine": machine, "gpu": "fabricated GPU", **({"ceilings": ceilings} if ceilings else {})}
    when = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}+00:00"
    info = ({"id": commit} if commit else {}) | ({} if dirty is None else {"dirty": dirty})
    doc = {"machine_info": {"mlpbench": env}, "commit_info": info,
           "datetime": when, "benchmarks": records}
    path = folder / machine / f"{stamp}-standard-1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path
