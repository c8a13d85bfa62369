"""The tables of the report's sections besides the summary and the suite's cost: kernels and
launch structure, the elementwise step, compile tax, host overhead, every record, the runs and ASV
files read, the gate on them, and the cases never timed. Each computed from `Loaded` or its frames."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from pathlib import Path

import pandas as pd

from .. import expectations, registry, tables
from ..judging import gate
from ..ops import ELEMENT_SIZE, FP8
from ..record import METRICS
from ..results import Point
from .loading import Loaded, asv_metric


def kernel_table(wide: pd.DataFrame) -> tables.Table:
    """Device µs per call of each kernel the cases of ops with Op.kernel_breakdown launch (the
    per-GEMM view of the MLPs), newest record per case."""
    if "kernel_times_s" not in wide or wide["kernel_times_s"].isna().all():
        return tables.Table([], [])
    rows = []
    broken_down = [name for name, op in registry.OPS.items() if op.kernel_breakdown]
    mlp = wide[wide["op"].isin(broken_down) & wide["kernel_times_s"].notna()]
    if "kernel_times_in_order_s" in mlp and mlp["kernel_times_in_order_s"].notna().any():
        # the newest records, which give each launch its own figure (gate and up GEMMs apart)
        mlp = mlp[mlp["kernel_times_in_order_s"].notna()].drop_duplicates("case", keep="last")
        for r in mlp.itertuples():
            total = sum(r.kernel_times_in_order_s) or 1.0
            for k, (name, t) in enumerate(zip(r.kernel_names, r.kernel_times_in_order_s), 1):
                rows.append([r.case, f"{k}. {name[:60]}", f"{t * 1e6:,.1f}", f"{t / total:.0%}"])
        return tables.Table(["case", "kernel, in launch order", "µs per call", "share"], rows,
                            sorted(set(mlp["run"])) if "run" in mlp else [])
    mlp = mlp.drop_duplicates("case", keep="last")
    for r in mlp.itertuples():
        total = sum(r.kernel_times_s.values()) or 1.0
        for name, t in sorted(r.kernel_times_s.items(), key=lambda kv: -kv[1]):
            rows.append([r.case, name[:60], f"{t * 1e6:,.1f}", f"{t / total:.0%}"])
    return tables.Table(["case", "kernel", "µs per call", "share"], rows,
                        sorted(set(mlp["run"])) if "run" in mlp else [])


def step_table(wide: pd.DataFrame) -> tables.Table:
    """The elementwise step inside each MLP call (every kernel that is neither a GEMM nor a split-K
    reduction, by expectations.toml's patterns) against the copy rate the same run measured, per variant:
    a fused kernel left at 60% of bandwidth inside a compiled model shows here without a trace."""
    ops = {name: op for name, op in registry.OPS.items() if op.step_bytes}
    need = {"kernel_names", "kernel_times_in_order_s", "shape", "copy_rate_Bps"}
    if wide.empty or not need <= set(wide.columns):
        return tables.Table([], [])
    found = expectations.patterns()
    library = [re.compile(found[k]) for k in ("gemm", "split_k") if k in found]
    # fp8's elementwise kernels quantize x and h besides act·mul, in bf16 and e4m3: step_bytes does not
    # count what they move, so its cases are left out rather than rated against a wrong sum.
    d = wide[wide["op"].isin(ops) & wide["kernel_times_in_order_s"].notna() & (wide["dtype"] != FP8)]
    d = tables.newest_per_variant(d)
    rows = []
    for r in d.itertuples():
        step = [(n, t) for n, t in zip(r.kernel_names, r.kernel_times_in_order_s)
                if not any(p.search(n) for p in library)]
        if not step or not isinstance(r.shape, dict):
            continue
        seconds = sum(t for _, t in step)
        rate = ops[r.op].step_bytes(r.shape, ELEMENT_SIZE[r.dtype]) / seconds
        copy = r.copy_rate_Bps
        rows.append([r.machine, r.op, r.variant, r.dtype, r.shape_id, ", ".join(n[:40] for n, _ in step),
                     f"{seconds * 1e6:,.1f}", f"{rate / 1e12:,.2f}",
                     "—" if pd.isna(copy) else f"{rate / copy:.0%}"])
    return tables.Table(["machine", "op", "variant", "dtype", "shape", "elementwise kernels", "µs per call", "TB/s",
                         "of the measured copy rate"], rows, sorted(set(d["run"])) if rows else [])


# The compile-tax benchmarks (record.METRICS, reported and never gated), with their names in the table.
COMPILE_METRICS = {"track_cold_compile": "cold compile", "track_recompile_new_shape": "recompile (static)",
                   "track_recompile_new_shape_dynamic": "recompile (dynamic=True)",
                   "track_total": "ten changing shapes, total"}
assert all(METRICS[m].gated == "no" for m in COMPILE_METRICS)


def compile_table(df: pd.DataFrame) -> tables.Table:
    """Cold compile, recompile for a new shape, and the changing-shapes total, newest commit's from ASV."""
    d = df[(df["source"] == "asv") & df["metric"].isin(COMPILE_METRICS)]
    if d.empty:
        return tables.Table([], [])
    latest = d.sort_values(["date", "commit", "run"]).groupby(
        ["machine", "op", "variant", "dtype", "shape_id", "metric"]).last()
    rows = [[registry.case_id(op, variant, dtype, shape), machine, COMPILE_METRICS[metric], f"{r.value:,.2f} s"]
            for (machine, op, variant, dtype, shape, metric), r in latest.iterrows()]
    return tables.Table(["case", "machine", "figure", "seconds"], rows, sorted(set(latest["run"])))


def overhead_verdict(wide: pd.DataFrame, op: str) -> str:
    """Where the op's compiler variants start to beat its baseline on host time (Op.overhead_sweep),
    and why compiling pays only past it."""
    dims, dtype = registry.OPS[op].overhead_sweep
    sweep = tables.crossover_sweep(wide, op)
    base, *compilers = tables.sweep_variants(op, sweep)
    compilers = compilers or list(registry.OPS[op].of_role("compiler")[:1])  # none measured: say so
    metric = {"host_time_back_to_back_s": "host time per call with calls queued back to back",
              "host_time_s": "host time of one synchronised call"}[tables.crossover_metric(sweep)]
    texts = []
    for compiler in compilers:
        crossover = tables.overhead_crossover(wide, op, compiler)
        if crossover:
            texts.append(f"The {compiler} {op} ({dims}, {dtype}) beats {base} on {metric} from {crossover} tokens up.")
        else:
            texts.append(f"No token count measured here from which the {compiler} {op} ({dims}, {dtype}) beats "
                         f"{base} on {metric} at every larger count.")
    return " ".join(texts) + (" Back to back, a call costs the larger of its CPU dispatch and its device time: "
                              "compiling saves device time but dispatches more slowly, so it pays once "
                              f"{base}'s device time outgrows the compiled module's dispatch.")


def results_table(wide: pd.DataFrame) -> tables.Table:
    """Every pytest-benchmark record, one row each, with the run it came from."""
    rows, dirty = [], tables.dirty_runs(wide)
    for r in wide.sort_values(["machine", "op", "variant", "dtype", "shape_id", "datetime"]).itertuples():
        rate = r.tflops if r.op in tables.COMPUTE_BOUND else r.gbps
        rows.append([tables.run_name(r.run, r.run in dirty), r.machine, r.op, r.variant, r.dtype, r.shape_id,
                     tables.fmt_time(r.device_time_s, r.device_iqr_s, True, r.device_noise),
                     tables.fmt_time(r.host_time_s, r.host_iqr_s, why=r.host_noise),
                     "—" if pd.isna(rate) else f"{rate:,.1f}" + (" (noisy)" if r.noisy else ""),
                     tables.fmt_ratio(r.speedup_vs_eager, r.speedup_noisy),
                     "—" if pd.isna(r.kernels_per_call) else f"{r.kernels_per_call:g}",
                     "—" if pd.isna(r.peak_memory_bytes) else f"{r.peak_memory_bytes / 1e6:,.1f}"])
    return tables.Table(["run", "machine", "op", "variant", "dtype", "shape", "device µs", "host µs",
                         "TFLOP/s or GB/s", f"vs {tables.BASELINES}", "kernels per call", "peak MB"], rows)


def _saved(value: str) -> str:
    try:
        return dt.datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError):
        return "—"


def runs_table(data: Loaded) -> tables.Table:
    """One row per pytest-benchmark run: when, which commit, what it measured with, the copy and GEMM
    rates it measured."""
    counts = data.records.groupby("run").size() if not data.records.empty else pd.Series(dtype=int)
    tiers = data.records.groupby("run")["tier"].agg(lambda t: ", ".join(sorted(set(t.dropna())))) \
        if not data.records.empty else pd.Series(dtype=str)
    rows = []
    for run in sorted(data.runs, key=lambda r: (r.machine, r.path.name)):
        name, info, c = data.label(run.path), run.env, run.ceilings
        gpus = info.get("gpu_count") or 1
        rows.append([run.machine, tables.run_name(run.path.name, name in data.dirty), _saved(run.datetime),
                     (run.commit or "—")[:7], tiers.get(name, ""),
                     str(counts.get(name, 0)), f"{info.get('gpu', '—')}" + (f" ×{gpus}" if gpus > 1 else ""),
                     f"{info.get('driver', '—')} / {info.get('cuda', '—')}",
                     f"{info.get('torch', '—')} / {info.get('triton', '—')} / {info.get('liger_kernel', '—')} / "
                     f"{info.get('kernels', '—')}",
                     tables.copy_rate(c),
                     f"{c['gemm_bf16_flops'] / 1e12:,.0f} TFLOP/s" if c.get("gemm_bf16_flops") else "—",
                     # fp8's where the GPU runs it (0.9.0 on); its error where the probe failed
                     f"{c['gemm_fp8_flops'] / 1e12:,.0f} TFLOP/s" if c.get("gemm_fp8_flops") else
                     ("failed" if c.get("gemm_fp8_error") else "—"),
                     str(len({b.get("extra_info", {}).get("shard") for b in run.benchmarks} - {None}) or 1)])
    return tables.Table(["machine", "file", "saved (UTC)", "commit", "tier", "records", "GPU", "driver / CUDA",
                         "torch / triton / liger-kernel / kernels", "measured copy rate", "measured bf16 GEMM rate",
                         "measured fp8 GEMM rate", "processes"],
                        rows, sorted(data.label(r.path) for r in data.runs))


def structure_table(wide: pd.DataFrame) -> tables.Table:
    """Kernels per call by machine, op and variant from the newest record of each case, split-K
    kernels apart, and how many cases meet expectations.toml as it stands."""
    if "kernel_names" not in wide or wide["kernel_names"].isna().all():
        return tables.Table([], [])
    split_k = expectations.patterns()["split_k"]
    latest = tables.latest_per_case(wide)
    latest = latest[latest["kernel_names"].notna()]
    rows = []
    for (machine, op, variant), g in latest.groupby(["machine", "op", "variant"]):
        splits = [sum(bool(re.search(split_k, k)) for k in names) for names in g["kernel_names"]]
        main = sorted({int(round(n - s)) for n, s in zip(g["kernels_per_call"], splits)})
        split_at = [f"{dtype} {shape_id}" for dtype, _, shape_id in sorted(
            {(r.dtype, r.shape.get(registry.TOKENS, 0) if isinstance(r.shape, dict) else 0, r.shape_id)
             for r, s in zip(g.itertuples(), splits) if s})]
        unmet = 0
        for r in g.itertuples():
            found = registry.shape_of(op, r.shape_id)
            unmet += bool(expectations.check(op, variant, r.shape, list(r.kernel_names), r.kernels_per_call,
                                             layout=found.layout if found else None, dtype=r.dtype))
        memsets = sorted({f"{m:g}" for m in g["memsets_per_call"].dropna()})
        rows.append([machine, op, variant, "–".join(map(str, (main[0], main[-1]))) if len(main) > 1 else str(main[0]),
                     f"{len(split_at)} of {len(g)}" + (f": {', '.join(split_at)}" if split_at else ""),
                     ", ".join(memsets) or "—", f"{len(g) - unmet} of {len(g)}"])
    order = {v: k for k, v in enumerate(tables.VARIANT_ORDER)}
    op_order = {o: k for k, o in enumerate(registry.OPS)}
    rows.sort(key=lambda r: (r[0], op_order.get(r[1], len(op_order)), order.get(r[2], len(order))))
    return tables.Table(["machine", "op", "variant", "kernels per call (split-K apart)", "cases with split-K kernels",
                         "memsets per call", "cases meeting expectations.toml"], rows, sorted(set(latest["run"])))


def asv_files_table(data: Loaded) -> tables.Table:
    """Per ASV result file: its commit, the cases it holds, values recorded and failed, benchmark versions."""
    by_file: dict[Path, list[Point]] = {}
    for path, p in data.points:
        by_file.setdefault(path, []).append(p)
    rows = []
    for path, ps in sorted(by_file.items(), key=lambda kv: (kv[1][0].machine, kv[1][0].date, kv[0].name)):
        ok = [p for p in ps if p.value is not None]
        rows.append([ps[0].machine, ps[0].commit[:7],
                     dt.datetime.fromtimestamp(ps[0].date / 1000, dt.timezone.utc).strftime("%Y-%m-%d"),
                     path.name, str(len({p.param for p in ok})), str(len(ok)), str(len(ps) - len(ok)),
                     ", ".join(sorted({p.version for p in ps})),
                     ", ".join(sorted({asv_metric(p.benchmark) for p in ok}))])
    return tables.Table(["machine", "commit", "commit date", "file", "cases", "values", "failed", "benchmark version",
                         "benchmarks"], rows, sorted(data.label(f) for f in by_file))


def gate_table(data: Loaded) -> tables.Table:
    """`mlpbench check` on each commit of asv/ against the previous one it shares benchmarks with, per
    machine, as the nightly runs it (reading codegen records and between-run noise from the results)."""
    rows, files = [], set()
    for machine in data.machines:
        points = [p for _, p in data.points if p.machine == machine]
        held = {}
        for p in points:
            if p.value is not None:
                held.setdefault(p.commit, set()).add((p.benchmark, p.param, p.version))
        dated = sorted({(p.date, p.commit) for p in points if p.commit in held})
        for k, (_, head) in enumerate(dated):
            earlier = [c for _, c in dated[:k] if c != head and held[head] & held[c]]
            if not earlier:
                continue
            base = earlier[-1]
            verdicts = gate.compare(points, base, head, machine, codegen_root=data.root)
            count = Counter(v.verdict for v in verdicts)
            flagged = sorted(v.param + ("" if v.benchmark.endswith(".track_device_time")
                                        else f" ({asv_metric(v.benchmark)})")
                             for v in verdicts if v.verdict == "regression")
            rows.append([machine, head[:7], base[:7], str(len(verdicts)), str(count["regression"]),
                         str(count["improvement"]), str(sum(v.verdict.endswith("(not gated)") for v in verdicts)),
                         ", ".join(f"`{f}`" for f in flagged[:8]) + (" …" if len(flagged) > 8 else "") or "—"])
            files |= {data.label(f) for f, p in data.points if p.machine == machine and p.commit in (base, head)}
    return tables.Table(["machine", "head", "base", "compared", "regressed", "improved", "moved, not gated",
                         "regressed cases"], rows, sorted(files))


def not_timed_table(outcomes: pd.DataFrame) -> tables.Table:
    """Per machine, each case whose newest outcome is not a pass, with its reason and its run."""
    newest = outcomes.sort_values(["datetime", "run"], kind="stable").drop_duplicates(["machine", "case"], keep="last")
    d = newest[newest["outcome"] != "passed"].sort_values(["machine", "case"])
    dirty = tables.dirty_runs(d)
    rows = [[r.machine, r.case, r.outcome, r.reason, tables.run_name(r.run.rsplit("/", 1)[-1], r.run in dirty)]
            for r in d.itertuples()]
    return tables.Table(["machine", "case", "outcome", "reason", "run"], rows, sorted(set(d["run"])))
