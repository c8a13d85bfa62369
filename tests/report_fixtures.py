"""Small synthetic results for the report, pages and tables tests: pytest-benchmark runs with the
extra_info fields mlpbench/results.py reads, and ASV result files in format v2.

`build(root)` writes root/results with two machines:

- `box` (a GPU, with measured copy and GEMM rates): an older run (gelu_mul at two shapes,
  eager/compiled/ours; mlp at one, eager/ours) whose outcomes lie in a file beside it, as older runs
  kept them, and a newer run (gelu_mul at one shape, eager/ours/maxautotune) whose outcomes are
  inside its JSON. Two ASV commits of GeluMulDevice, the second with ours 10% slower, and a
  compile-tax figure.
- `cpu` (no GPU): one run of linear, host time only.

Known facts: ours is the fastest gelu_mul bf16 variant by device time at both shapes; liger was
skipped at one shape (old run) and failed at the other (new run); maxautotune failed in the old
run and passed in the new one, so it is not "not timed".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

BOX, CPU = "box", "cpu"
OLD, NEW = "20261201T000000Z-standard-1.json", "20261202T000000Z-standard-2.json"
GELU = {"t8192-h3072": {"t": 8192, "h": 3072}, "t4096-h16384": {"t": 4096, "h": 16384}}
MLP = ("t8192-d768-h3072", {"t": 8192, "d": 768, "h": 3072})
# µs of device time at t8192-h3072; the larger gelu_mul shape takes twice as long
OLD_GELU = {"eager": 66.0, "compiled": 37.0, "ours": 36.0}
NEW_GELU = {"eager": 66.5, "ours": 35.5, "maxautotune": 40.0}
SKIPPED = ("gelu_mul/liger/bf16/t8192-h3072", "skipped", "Liger's kernels need a GPU build of Triton")
FAILED = ("gelu_mul/liger/bf16/t4096-h16384", "failed", "max relative error 0.31 against float64")
COMMITS = ("a" * 40, "b" * 40)
COMPILE_CASE = "mlp/compiled/bf16/t8192-d768-h3072"


def samples(median_s: float, spread: float = 0.01, n: int = 5) -> list[float]:
    return [median_s * (1 + spread * (k - n // 2)) for k in range(n)]


def record(op, variant, dtype, shape_id, dims, device_us=None, host_us=None, flops=0, nbytes=0, **extra) -> dict:
    """One pytest-benchmark record as the suite writes it; host_us is pytest-benchmark's own median."""
    host_us = host_us if host_us is not None else 2 * (device_us or 1.0)
    info = {"case": f"{op}/{variant}/{dtype}/{shape_id}", "op": op, "variant": variant, "dtype": dtype,
            "shape_id": shape_id, "shape": dims, "flops": flops, "bytes": nbytes, "host_time_s": host_us * 1e-6,
            "tier": "standard"}
    if device_us is not None:
        info |= {"device_time_s": device_us * 1e-6, "device_time_samples_s": samples(device_us * 1e-6),
                 "host_time_back_to_back_s": device_us * 1.1e-6,
                 "host_time_back_to_back_samples_s": samples(device_us * 1.1e-6)}
    return {"stats": {"median": host_us * 1e-6, "iqr": host_us * 1e-8, "min": host_us * 0.99e-6},
            "extra_info": info | extra}


def write_run(path: Path, machine: str, when: str, records: list[dict], ceilings: dict | None = None,
              outcomes: list[dict] | None = None, commit: str = COMMITS[0], dirty: bool | None = None) -> Path:
    """A pytest-benchmark file; `dirty`, where given, is its `commit_info.dirty` (pytest-benchmark's
    word for a working tree with uncommitted changes)."""
    info = {"id": commit} | ({} if dirty is None else {"dirty": dirty})
    doc = {"datetime": when, "commit_info": info, "benchmarks": records,
           "machine_info": {"mlpbench": {"machine": machine, "ceilings": ceilings or {}}}}
    if outcomes is not None:
        doc["outcomes"] = outcomes
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def outcome(case: str, result: str = "passed", reason: str = "") -> dict:
    return {"case": case, "outcome": result, "reason": reason, "shard": 0, "when": "call"}


ASV_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]


def write_asv(folder: Path, machine: str, commit: str, date: int, device_s: dict[str, float],
              shape: str = "t8192-h3072", module: str = "standard", extra: dict | None = None, seed: int = 0) -> Path:
    """An ASV result file (format v2): GeluMulDevice.track_device_time over variant × bf16 × `shape`,
    with 20 samples each, plus `extra` benchmarks as given (name → row)."""
    rng = np.random.default_rng(seed)
    variants = list(device_s)
    values = [list(device_s[v] * (1 + 0.001 * rng.standard_normal(20))) for v in variants]
    params = [[f"'{v}'" for v in variants], ["'bf16'"], [f"'{shape}'"]]
    results = {f"{module}.GeluMulDevice.track_device_time":
               [[float(np.median(s)) for s in values], params, "v3", 0, 1.0, None, None, None, None,
                [1] * len(variants), [20] * len(variants), values]}
    results |= extra or {}
    doc = {"commit_hash": commit, "date": date, "params": {"machine": machine, "python": "3.12"},
           "result_columns": ASV_COLUMNS, "results": results, "version": 2, "env_name": "existing"}
    path = folder / machine / f"{commit[:8]}-existing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    (folder / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    return path


def _gelu(variant: str, shape_id: str, device_us: float) -> dict:
    dims = GELU[shape_id]
    names = ["triton_poi_fused_gelu_mul_0"] if variant != "eager" else ["gelu_kernel", "mul_kernel"]
    return record("gelu_mul", variant, "bf16", shape_id, dims, device_us, nbytes=3 * dims["t"] * dims["h"] * 2,
                  kernel_names=names, kernels_per_call=len(names), memsets_per_call=0)


def _mlp(variant: str, device_us: float) -> dict:
    shape_id, dims = MLP
    names = ["nvjet_gate", "nvjet_up", "gelu_kernel", "mul_kernel", "nvjet_down"]
    times = [device_us * 1e-6 * f for f in (0.3, 0.3, 0.1, 0.1, 0.2)]
    return record("mlp", variant, "bf16", shape_id, dims, device_us, flops=6 * 8192 * 768 * 3072,
                  nbytes=2 * (2 * 8192 * 768 + 3 * 768 * 3072), kernel_names=names, kernels_per_call=5,
                  memsets_per_call=0, kernel_times_in_order_s=times,
                  kernel_times_s={n: t for n, t in zip(names, times)})


def build(root: Path, dirty: tuple[str, ...] = ()) -> Path:
    """The synthetic results folder (see the module's docstring); returns root/results. The runs of
    `box` named in `dirty` (OLD, NEW) come from a dirty tree, the others from a clean one."""
    results = root / "results"
    ceilings = {"copy_bandwidth_Bps": 6.0e12, "gemm_bf16_flops": 700e12}
    old = [_gelu(v, s, us * k) for k, s in enumerate(GELU, 1) for v, us in OLD_GELU.items()]
    old += [_mlp("eager", 250.0), _mlp("ours", 220.0)]
    old_path = write_run(results / "pytest" / BOX / OLD, BOX, "2026-12-01T00:00:00+00:00", old, ceilings,
                         dirty=OLD in dirty)
    old_outcomes = [outcome(r["extra_info"]["case"]) for r in old]
    old_outcomes += [outcome(*SKIPPED), outcome("gelu_mul/maxautotune/bf16/t8192-h3072", "failed", "compile error")]
    old_path.with_name(old_path.stem + ".outcomes.json").write_text(json.dumps({"outcomes": old_outcomes}))
    new = [_gelu(v, "t8192-h3072", us) for v, us in NEW_GELU.items()]
    write_run(results / "pytest" / BOX / NEW, BOX, "2026-12-02T00:00:00+00:00", new, ceilings,
              [outcome(r["extra_info"]["case"]) for r in new] + [outcome(*FAILED)], commit=COMMITS[1],
              dirty=NEW in dirty)

    cpu = [record("linear", v, "fp32", "t1024-i32-o64", {"t": 1024, "i": 32, "o": 64}, host_us=us,
                  flops=4_194_304, nbytes=401_664) for v, us in (("eager", 30.0), ("compiled", 25.0))]
    write_run(results / "pytest" / CPU / OLD, CPU, "2026-12-01T00:00:00+00:00", cpu,
              outcomes=[outcome(r["extra_info"]["case"]) for r in cpu])

    asv = results / "asv"
    asv.mkdir(parents=True, exist_ok=True)
    (asv / "benchmarks.json").write_text(json.dumps({"version": 2}))
    compile_tax = {"standard.CompileTime.track_cold_compile": [[12.5], [[f"'{COMPILE_CASE}'"]], "v1", 0, 1.0]}
    write_asv(asv, BOX, COMMITS[0], 1_796_000_000_000, {"eager": 66e-6, "ours": 36e-6}, seed=1)
    write_asv(asv, BOX, COMMITS[1], 1_796_100_000_000, {"eager": 66e-6, "ours": 36e-6 * 1.10}, seed=2,
              extra=compile_tax)
    return results


PHASES = ("phase_check_s", "phase_device_s", "phase_host_s", "phase_profile_s")


def costed_run(results: Path, machine: str, name: str, when: str, cases: dict[str, tuple[float, ...]],
               run_wall_s: float | None = None, ahead_s: float | None = None) -> Path:
    """A run whose records carry their cost: per case id (op/variant/dtype/shape) its wall time and its
    four phases (check, device, host, profile); the run's own wall time where given, and the seconds its
    workers spent on first calls ahead of timing (`ahead_s`, a part of its own)."""
    records = []
    for case, (wall, *phases) in cases.items():
        op, variant, dtype, shape_id = case.split("/")
        records.append(record(op, variant, dtype, shape_id, {"t": 1}, device_us=10.0, nbytes=1_000_000, wall_s=wall,
                              **dict(zip(PHASES, phases))))
    path = write_run(results / "pytest" / machine / name, machine, when, records,
                     outcomes=[outcome(c) for c in cases])
    if run_wall_s is not None:
        doc = json.loads(path.read_text())
        ahead = [{"part": "precompile: 3 cases in 2 workers", "wall_s": ahead_s}] if ahead_s else []
        doc["mlpbench_run"] = {"wall_s": run_wall_s,
                               "parts": [*ahead, {"part": "op gelu_mul", "wall_s": run_wall_s - (ahead_s or 0)}]}
        path.write_text(json.dumps(doc))
    return path
