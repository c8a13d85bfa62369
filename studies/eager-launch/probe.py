"""What an eager loop pays per call: back-to-back host time and device time of chosen cases, each
built, checked against float64 and timed by the suite's own functions (mlpbench.runner, timing),
plus where the host time goes (cProfile of back-to-back calls) and whether a call synchronises.

    python studies/eager-launch/probe.py OUT.json [CASE_ID ...]
"""

import cProfile
import io
import json
import pstats
import statistics
import sys
import time
import warnings

from mlpbench import environment

environment.prepare()  # before torch and huggingface_hub read it

import torch  # noqa: E402

from mlpbench import registry, runner, timing

DEFAULT = [
    *(f"gelu_mul/{v}/bf16/{s}" for s in ("t1-h16384", "t8192-h3072", "t8192-h3072-merged")
      for v in ("eager", "compiled", "liger", "ours")),
    *(f"silu_mul/{v}/bf16/t1-h14336" for v in ("eager", "compiled", "liger", "ours")),
    *(f"gelu_mul_train/{v}/bf16/t8192-h3072" for v in ("eager", "liger", "ours")),
    *(f"mlp/{v}/bf16/{s}" for s in ("t8192-d768-h3072", "t1-d768-h3072")
      for v in ("eager", "compiled", "liger", "ours", "dualgemm")),
    *(f"swiglu_mlp/{v}/bf16/{s}" for s in ("t8192-d4096-h14336", "t1-d4096-h14336")
      for v in ("eager", "compiled", "ours", "dualgemm")),
]


def syncs(fn, inputs) -> int:
    """Warnings torch raises for synchronising calls during one call of fn."""
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(*inputs)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return len(caught)


def profile(fn, input_sets, calls=200) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for k in range(calls):
        fn(*input_sets[k % len(input_sets)])
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    return out.getvalue()


def parts(rows):
    """Where a one-token MLP's back-to-back host time goes: the whole layer, its three Linear calls
    alone, and each elementwise step alone on that layer's own gate and up outputs."""
    from mlpbench.ops._gated import act_mul

    for variant in ("eager", "ours", "dualgemm"):
        p = runner.prepare(registry.case_by_id(f"mlp/{variant}/bf16/t1-d768-h3072"), "cuda")
        model, (x,) = p.workload.fn, p.input_sets[0]
        g, u = model.gate_proj(x), model.up_proj(x)
        h = g * u
        step = act_mul("gelu_tanh")
        pieces = {"layer": lambda: model(x),
                  "three linears": lambda: (model.gate_proj(x), model.up_proj(x), model.down_proj(h)),
                  "eager gelu then mul": lambda: step(g, u)}
        if variant == "ours":
            from mlpbench import sources
            fused = sources.local_kernel("gelu_mul").gelu_mul
            pieces["our gelu_mul"] = lambda: fused(g, u)
        if variant == "dualgemm":
            from mlpbench import sources
            dual = sources.local_kernel("gated_dual_gemm")
            w = model.gate_up_interleaved
            pieces["gate_up_act_mul_interleaved"] = lambda: dual.gate_up_act_mul_interleaved(x, w)
        for name, fn in pieces.items():
            b2b = timing.back_to_back_host_times(lambda: fn(), [()])
            rows.append({"part": f"mlp/{variant} t1: {name}", "b2b_us": statistics.median(b2b) * 1e6})
            print(f"mlp/{variant} t1: {name:32s} b2b {rows[-1]['b2b_us']:8.1f}", flush=True)


def main(path, ids):
    rows = []
    for case_id in ids or DEFAULT:
        t0 = time.perf_counter()
        case = registry.case_by_id(case_id)
        reason = runner.skip_reason(case, "cuda")
        if reason:
            rows.append({"case": case_id, "skipped": reason})
            continue
        p = runner.prepare(case, "cuda")
        retries = torch.cuda.memory_stats().get("num_alloc_retries", 0)
        b2b = timing.back_to_back_host_times(p.workload.fn, p.input_sets)
        dev = timing.device_time(p.workload.fn, p.input_sets)
        row = {"case": case_id, "device_us": dev.median_s * 1e6, "b2b_us": statistics.median(b2b) * 1e6,
               "b2b_samples_us": [s * 1e6 for s in b2b], "alloc_retries": torch.cuda.memory_stats().get(
                   "num_alloc_retries", 0) - retries, "sync_warnings": syncs(p.workload.fn, p.input_sets[0]),
               "max_rel_err": p.max_rel_err, "wall_s": time.perf_counter() - t0}
        if case.variant in ("ours", "dualgemm") and case.shape.as_dict()["t"] in (1, 8192):
            row["profile"] = profile(p.workload.fn, p.input_sets)
        rows.append(row)
        print(f"{case_id:45s} device {row['device_us']:9.1f}  b2b {row['b2b_us']:9.1f}  syncs {row['sync_warnings']}"
              f"  retries {row['alloc_retries']}", flush=True)
        del p
        runner.release_memory()
    if not ids:
        with torch.no_grad():
            parts(rows)
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
