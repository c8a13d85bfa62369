"""Tile sweep for kernels_local/gated_dual_gemm on a GPU: which launch configuration to put in its
CONFIGS table, and from how many tokens the fused kernel pays (MIN_FUSED_TOKENS).

    python3 scripts/dual_gemm_sweep.py --output studies/<name>/dual-gemm-sweep.json
    python3 scripts/dual_gemm_sweep.py --fp8 --output FILE     # the FP8 kernel's CONFIGS_FP8 (Hopper)

Every candidate is first checked against float64 (as the suite checks every case), then timed by
CUDA-graph replay with the suite's own timer (mlpbench.timing.device_time), beside the unfused
path it replaces: two cuBLAS GEMMs, and the same two GEMMs followed by PyTorch's act·mul.
Candidates that fail to compile (too much shared memory, say) are listed with their error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from mlpbench import environment

environment.prepare()  # before torch and huggingface_hub read it

import torch  # noqa: E402
import torch.nn.functional as F

from mlpbench import sources, timing

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, persistent), tried in this order
# (persistent: 0 a program per tile, 1 one per SM with flattened loops, 2 one per SM, not flattened).
CANDIDATES = (
    (128, 128, 64, 8, 8, 3, 1),
    (128, 128, 64, 8, 8, 4, 1),
    (128, 128, 64, 8, 8, 3, 0),
    (128, 128, 64, 8, 8, 3, 2),
    (128, 128, 64, 16, 8, 3, 1),
    (128, 64, 64, 8, 4, 4, 1),
    (128, 64, 64, 8, 8, 4, 1),
    (64, 128, 64, 8, 4, 4, 1),
    (128, 128, 32, 8, 8, 5, 1),
    (128, 128, 128, 8, 8, 2, 1),
    (256, 64, 64, 8, 8, 3, 1),
)
FP32_CANDIDATES = ((128, 128, 32, 8, 8, 3, 1), (128, 64, 32, 8, 4, 3, 1), (64, 64, 32, 8, 4, 3, 1))
# (tokens, dim, hidden): the standard tier's MLP shapes that decide the targets (fp32: the two it has).
SHAPES = ((8192, 768, 3072), (8192, 4096, 14336), (4096, 2048, 16384), (333, 768, 3000))
FP32_SHAPES = ((8192, 768, 3072), (333, 768, 3000))
SWEEP_TOKENS = (1, 16, 64, 256, 1024)  # at the blog's dims: where fusing starts to pay
CROSSOVER_TOKENS = (128, 256, 512, 1024, 2048, 4096)  # --crossover: the same with the kernel's CONFIGS
# --layouts: the interleaved-weight kernel (one accumulator of BLOCK_M × 2·BLOCK_N, BLOCK_N columns
# of h per tile) against the two-accumulator kernel's CONFIGS entry, at the MLP shapes of the
# standard tier and the blog's dims at few tokens; beside cuBLAS's two GEMMs, its one GEMM of the
# concatenated weights ([t, 2h]) and the down projection the MLP adds.
INTERLEAVED = (
    (128, 128, 64, 8, 8, 3, 0),
    (128, 128, 64, 8, 8, 4, 0),
    (128, 128, 64, 8, 8, 3, 2),
    (128, 128, 64, 8, 8, 3, 1),
    (256, 64, 64, 8, 8, 3, 0),
    (128, 64, 64, 8, 4, 4, 0),
    (64, 128, 64, 8, 4, 3, 0),
    (128, 128, 64, 16, 8, 3, 2),
)
LAYOUT_SHAPES = ((8192, 768, 3072), (8192, 4096, 14336), (4096, 2048, 16384), (4096, 3584, 18944))
LAYOUT_TOKENS = (256, 333, 512, 1024, 2048, 4096)
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}  # relative to max |h|


def _check(fn, x, wg, wu, dtype) -> float:
    h = fn().double()
    g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
    ref = F.gelu(g, approximate="tanh") * u
    err = ((h - ref).abs().max() / ref.abs().max()).item()
    if not err <= TOLERANCE[dtype]:
        raise AssertionError(f"max error {err:.2e} of max |h| exceeds {TOLERANCE[dtype]:.0e}")
    return err


def _time(fn) -> dict:
    t = timing.device_time(fn, [()])
    return {"median_us": t.median_s * 1e6, "samples_us": [s * 1e6 for s in t.samples_s]}


def _layouts(dg, names, dtypes, gen, record) -> None:
    impl = dg._dual_gemm
    for name in names:
        dtype = dtypes[name]
        shapes = [(s, "target") for s in LAYOUT_SHAPES] + [((t, 768, 3072), "tokens") for t in LAYOUT_TOKENS]
        for (m, k, n), why in shapes:
            x = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
            wg = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5
            wu = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5
            wd = torch.randn(k, n, device="cuda", dtype=dtype, generator=gen) / n**0.5
            started = time.perf_counter()
            w = impl.interleave(wg, wu)
            torch.cuda.synchronize()
            cat = torch.cat((wg, wu))
            h = torch.empty(m, n, device="cuda", dtype=dtype)
            flops = 2 * 2 * m * k * n
            base = dict(dtype=name, tokens=m, dim=k, hidden=n, why=why)
            record(**base, impl="interleave_weights_once", seconds=time.perf_counter() - started)
            record(**base, impl="cublas_two_gemms", **_time(lambda: (F.linear(x, wg), F.linear(x, wu))))
            record(**base, impl="cublas_one_gemm_concatenated", **_time(lambda: F.linear(x, cat)))
            record(**base, impl="cublas_down_gemm", **_time(lambda: F.linear(h, wd)))
            record(**base, impl="unfused", **_time(lambda: dg.gate_up_act_mul(x, wg, wu, fused=False)))
            tried = [("two_accumulators", None)] + [("interleaved", c) for c in
                                                    (INTERLEAVED if why == "target" else INTERLEAVED[:4])]
            for kind, cfg in tried:
                if kind == "two_accumulators":
                    fn = lambda: dg.gate_up_act_mul(x, wg, wu, fused=True)
                else:
                    def fn(cfg=cfg):
                        out = torch.empty(m, n, device="cuda", dtype=dtype)
                        impl._launch_interleaved(x, w, out, 0, cfg, None)
                        return out
                started = time.perf_counter()
                try:
                    err = _check(fn, x, wg, wu, dtype)
                    t = _time(fn)
                except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a finding
                    record(**base, impl=kind, config=list(cfg or ()), error=f"{type(exc).__name__}: {str(exc)[:300]}")
                    continue
                record(**base, impl=kind, config=list(cfg or dg.CONFIGS[dtype]), max_rel_err=err,
                       tflops=flops / (t["median_us"] * 1e-6) / 1e12, first_call_s=time.perf_counter() - started, **t)
            del x, wg, wu, wd, w, cat, h
            torch.cuda.empty_cache()


BACKWARD_SHAPES = ((8192, 768, 3072), (8192, 4096, 14336))


def _backward(dg, names, dtypes, gen, record) -> None:
    """Training's cost: forward and the gradients of x, Wg and Wu for a given dh, ours (fused forward,
    backward recomputing gate and up with cuBLAS) against eager PyTorch (which keeps gate and up from
    its forward), each checked against float64 first."""
    for name in names:
        dtype = dtypes[name]
        for m, k, n in BACKWARD_SHAPES:
            x = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen).requires_grad_()
            wg = (torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5).requires_grad_()
            wu = (torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5).requires_grad_()
            dh = torch.randn(m, n, device="cuda", dtype=dtype, generator=gen)
            impls = {
                "ours_forward_backward": lambda: torch.autograd.grad(dg.gate_up_act_mul(x, wg, wu), (x, wg, wu), dh),
                "eager_forward_backward": lambda: torch.autograd.grad(
                    F.gelu(F.linear(x, wg), approximate="tanh") * F.linear(x, wu), (x, wg, wu), dh),
            }
            x64, wg64, wu64 = (t.detach().double().requires_grad_() for t in (x, wg, wu))
            want = torch.autograd.grad(F.gelu(x64 @ wg64.T, approximate="tanh") * (x64 @ wu64.T), (x64, wg64, wu64),
                                       dh.double())
            base = dict(dtype=name, tokens=m, dim=k, hidden=n, why="backward")
            for impl, fn in impls.items():
                got = fn()
                err = max(((g.double() - w).norm() / w.norm()).item() for g, w in zip(got, want))
                if not err <= 2 * TOLERANCE[dtype]:
                    record(**base, impl=impl, error=f"gradient error {err:.2e} exceeds {2 * TOLERANCE[dtype]:.0e}")
                    continue
                record(**base, impl=impl, max_rel_err=err, **_time(fn))
            del x, wg, wu, dh, x64, wg64, wu64, want
            torch.cuda.empty_cache()


# --train: the interleaved kernel saving its accumulator for the backward (TRAIN_INTERLEAVED_CONFIGS),
# then the whole forward and backward against eager PyTorch's, at the training ops' shapes.
TRAIN_CANDIDATES = (
    (128, 128, 64, 8, 8, 2, 1),
    (128, 128, 64, 8, 8, 2, 2),
    (128, 64, 64, 8, 4, 3, 1),
    (128, 64, 64, 8, 8, 4, 1),
    (128, 128, 64, 8, 8, 3, 2),  # three stages: fit only with the saved tile stored from registers
    (128, 128, 64, 8, 8, 3, 1),  # INTERLEAVED_CONFIGS' entry, likewise
    (128, 128, 64, 8, 8, 4, 1),
)
TRAIN_SHAPES = ((8192, 768, 3072), (8192, 4096, 14336), (333, 768, 3000))


def _train(dg, names, dtypes, gen, record) -> None:
    impl = dg._dual_gemm
    for name in names:
        dtype = dtypes[name]
        for m, k, n in TRAIN_SHAPES:
            x = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
            wg = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5
            wu = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5
            w = impl.interleave(wg, wu)
            base = dict(dtype=name, tokens=m, dim=k, hidden=n, why="train")
            # The saved tile through a tensor descriptor (staged in shared memory) or stored from
            # registers; and the unfused path (one cuBLAS GEMM, then the pairs kernel) for scale.
            runs = [(f"interleaved_saving{'' if save_tma else '_from_registers'}", cfg, save_tma)
                    for cfg in TRAIN_CANDIDATES for save_tma in (True, False)]
            for impl_name, cfg, save_tma in [*runs, ("unfused_saving", None, None)]:
                saved = []

                def fn(cfg=cfg, save_tma=save_tma):
                    if cfg is None:
                        h, pre = impl._train_forward(x, (w,), "gelu_tanh", 0)
                        saved[:] = pre
                        return h
                    h = torch.empty(m, n, device="cuda", dtype=dtype)
                    saved[:] = [torch.empty(m, 2 * n, device="cuda", dtype=dtype)]
                    impl._run(impl._gate_up_interleaved_kernel, x, (w,), h, 0, cfg, None, n, saved, save_tma)
                    return h
                config = None if cfg is None else list(cfg)
                try:
                    err = _check(fn, x, wg, wu, dtype)
                    ref = (x.double() @ w.double().T)
                    pre_err = ((saved[0].double() - ref).abs().max() / ref.abs().max()).item()
                    if not pre_err <= TOLERANCE[dtype]:
                        raise AssertionError(f"saved gate|up: max error {pre_err:.2e} exceeds {TOLERANCE[dtype]:.0e}")
                    t = _time(fn)
                except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a finding
                    record(**base, impl=impl_name, config=config, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                    continue
                record(**base, impl=impl_name, config=config, max_rel_err=err,
                       tflops=2 * 2 * m * k * n / (t["median_us"] * 1e-6) / 1e12, **t)
            xg, wgr, wgg, wug = (t.detach().requires_grad_() for t in (x, w, wg, wu))
            dh = torch.randn(m, n, device="cuda", dtype=dtype, generator=gen)
            for impl_name, fn in (
                    ("ours_interleaved_forward_backward",
                     lambda: torch.autograd.grad(dg.gate_up_act_mul_interleaved(xg, wgr), (xg, wgr), dh)),
                    ("eager_forward_backward", lambda: torch.autograd.grad(
                        F.gelu(F.linear(xg, wgg), approximate="tanh") * F.linear(xg, wug), (xg, wgg, wug), dh))):
                try:
                    record(**base, impl=impl_name, **_time(fn))
                except Exception as exc:  # noqa: BLE001 - the kernel's own table may not build: a finding
                    record(**base, impl=impl_name, error=f"{type(exc).__name__}: {str(exc)[:300]}")
            del x, wg, wu, w, xg, wgr, wgg, wug, dh
            torch.cuda.empty_cache()


# --fp8: the FP8 (e4m3) kernel, gated_dual_gemm_fp8, on Hopper. Each candidate is checked against
# float64 from the dequantized operands, then timed beside the unfused FP8 path it replaces (quantize
# x, two torch._scaled_mm with row-wise scales, PyTorch's act·mul: `fp8_unfused_scaled_mm`) and bf16's
# dual GEMM at the same shape (the package's policy, two weights and interleaved). At most 8
# candidates: each compiles for three specialisations of the shapes (all multiples of 16, one token,
# 333 × 3000), which with the timing keeps the whole mode within about 200 s on an H100.
FP8_CANDIDATES = (
    (128, 128, 128, 8, 8, 3, 2),  # CONFIGS_FP8["prefill"]
    (128, 128, 128, 8, 8, 3, 1),
    (128, 128, 128, 8, 8, 3, 0),
    (128, 128, 128, 8, 8, 4, 2),  # 192 KiB of stages and 32 KiB for h's tile: may not fit
    (128, 128, 64, 8, 8, 4, 2),
    (128, 64, 128, 8, 4, 4, 2),
    (64, 128, 128, 8, 4, 4, 0),  # CONFIGS_FP8["decode"]
    (64, 64, 128, 8, 4, 4, 0),
)
FP8_SHAPES = ((8192, 768, 3072), (8192, 4096, 14336), (4096, 2048, 16384), (1, 2048, 16384), (333, 768, 3000))
# max |h - ref| / max |ref|: bf16's rounding of h and Hopper's fast FP8 accumulation (dim up to 4096)
FP8_TOLERANCE = 3e-2


def _fp8(dg, gen, record) -> None:
    for m, k, n in FP8_SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        wg = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) * (2 / k**0.5)
        wu = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) / k**0.5
        xq, xs = dg.quantize_rows_fp8(x)
        (gq, gs), (uq, us) = dg.quantize_rows_fp8(wg), dg.quantize_rows_fp8(wu)
        gs, us = gs.view(-1), us.view(-1)
        base = dict(dtype="fp8", tokens=m, dim=k, hidden=n, why="fp8")
        flops = 2 * 2 * m * k * n
        reason = dg.fp8_fallback_reason(xq, gq)
        if reason is not None:
            record(**base, impl="fp8_fused", error=f"fallback: {reason}")
        xd = xq.double() * xs.double()
        ref = F.gelu(xd @ (gq.double() * gs.double()[:, None]).T, approximate="tanh")
        ref *= xd @ (uq.double() * us.double()[:, None]).T
        del xd
        ref_max = ref.abs().max().item() or 1.0

        def check(fn) -> float:
            err = ((fn().double() - ref).abs().max() / ref_max).item()
            if not err <= FP8_TOLERANCE:
                raise AssertionError(f"max error {err:.2e} of max |h| exceeds {FP8_TOLERANCE:.0e}")
            return err

        # torch._scaled_mm wants both dimensions of its column-major operand to be multiples of 16:
        # hidden sizes that are not (3000) get weights padded once, here, and the output sliced.
        n16 = -(-n // 16) * 16
        pad = n16 - n

        def padded(w, s):
            return (torch.cat((w, w.new_zeros(pad, k))) if pad else w,
                    (torch.cat((s, s.new_ones(pad))) if pad else s).view(1, -1))

        (gqp, gsp), (uqp, usp) = padded(gq, gs), padded(uq, us)

        def two_scaled_mm(q, s):
            g = torch._scaled_mm(q, gqp.t(), scale_a=s, scale_b=gsp, out_dtype=torch.bfloat16)
            u = torch._scaled_mm(q, uqp.t(), scale_a=s, scale_b=usp, out_dtype=torch.bfloat16)
            return (g[:, :n], u[:, :n]) if pad else (g, u)

        def unfused():
            g, u = two_scaled_mm(*dg.quantize_rows_fp8(x))
            return F.gelu(g, approximate="tanh") * u

        def with_quantize():
            return dg.gated_dual_gemm_fp8(*dg.quantize_rows_fp8(x), gq, gs, uq, us)

        w = dg.interleave(wg, wu)
        runs = [("fp8_quantize_x", None, lambda: dg.quantize_rows_fp8(x), False),
                ("fp8_two_scaled_mm", None, lambda: two_scaled_mm(xq, xs), False),
                ("fp8_unfused_scaled_mm", None, unfused, True),
                ("bf16_gate_up_act_mul", None, lambda: dg.gate_up_act_mul(x, wg, wu), False),
                ("bf16_gate_up_act_mul_interleaved", None, lambda: dg.gate_up_act_mul_interleaved(x, w), False)]
        if reason is None:
            runs += [("fp8_fused", cfg, lambda cfg=cfg: dg.gated_dual_gemm_fp8(xq, xs, gq, gs, uq, us, _config=cfg),
                      True) for cfg in FP8_CANDIDATES]
            runs += [("fp8_table", dg.fp8_config(m), lambda: dg.gated_dual_gemm_fp8(xq, xs, gq, gs, uq, us), True),
                     ("fp8_table_with_quantize", dg.fp8_config(m), with_quantize, True)]
        for impl, cfg, fn, checked in runs:
            extra = {"config": list(cfg)} if cfg else {}
            if impl.startswith("fp8_") and pad and "scaled_mm" in impl:
                extra["padded_hidden"] = n16
            started = time.perf_counter()
            try:
                if checked:
                    extra["max_rel_err"] = check(fn)
                t = _time(fn)
            except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a finding
                record(**base, impl=impl, **extra, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                continue
            record(**base, impl=impl, **extra, tflops=flops / (t["median_us"] * 1e-6) / 1e12,
                   first_call_s=time.perf_counter() - started, **t)
        del x, wg, wu, xq, xs, gq, gs, uq, us, ref, gqp, gsp, uqp, usp, w
        torch.cuda.empty_cache()


def _fp8_best(rows) -> None:
    """One `best` line per FP8 shape: the fastest candidate, beside the table's entry and the baselines."""
    for m, k, n in FP8_SHAPES:
        at = {r["impl"] if r["impl"] != "fp8_fused" else ("fp8_fused", tuple(r["config"])): r for r in rows
              if (r["dtype"], r["tokens"], r["dim"], r["hidden"]) == ("fp8", m, k, n) and "median_us" in r}
        fused = [r for key, r in at.items() if isinstance(key, tuple)]
        if not fused:
            print(f"best ('fp8', {m}, {k}, {n}): no FP8 candidate ran (see the rows' errors)")
            continue
        r = min(fused, key=lambda r: r["median_us"])

        def us(name):
            return f"{at[name]['median_us']:.1f} us" if name in at else "n/a"

        print(f"best ('fp8', {m}, {k}, {n}): {r['config']} fp8_fused {r['median_us']:.1f} us ({r['tflops']:.0f} TFLOP/s, "
              f"max err {r['max_rel_err']:.1e}); table {at.get('fp8_table', {}).get('config')} {us('fp8_table')}, "
              f"with quantize {us('fp8_table_with_quantize')}; unfused FP8 (quantize, 2 _scaled_mm, act·mul) "
              f"{us('fp8_unfused_scaled_mm')}; bf16 dual GEMM {us('bf16_gate_up_act_mul')}, "
              f"interleaved {us('bf16_gate_up_act_mul_interleaved')}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "fp16", "fp32"])
    ap.add_argument("--crossover", action="store_true",
                    help="only the token sweep, with the kernel's own CONFIGS: where fusing starts to pay")
    ap.add_argument("--layouts", action="store_true",
                    help="the interleaved-weight kernel against the two-accumulator one (bf16, fp16)")
    ap.add_argument("--backward", action="store_true",
                    help="forward + backward of act(x·Wgᵀ)·(x·Wuᵀ): ours (backward by recomputation) against eager")
    ap.add_argument("--train", action="store_true",
                    help="the interleaved kernel saving gate and up for training, and forward + backward against eager")
    ap.add_argument("--fp8", action="store_true",
                    help="the FP8 (e4m3) kernel's candidates against two torch._scaled_mm and bf16's dual GEMM (Hopper)")
    a = ap.parse_args(argv)
    dg = sources.local_kernel("gated_dual_gemm")
    ours = sources.local_kernel("gelu_mul")
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)

    def record(**row):
        rows.append(row)
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()
                          if k != "samples_us"}), flush=True)

    if a.fp8:
        _fp8(dg, gen, record)
        a.dtypes = []
    if a.layouts:
        _layouts(dg, [n for n in a.dtypes if n != "fp32"], dtypes, gen, record)
        a.dtypes = []
    if a.train:
        _train(dg, [n for n in a.dtypes if n != "fp32"], dtypes, gen, record)
        a.dtypes = []
    if a.backward:
        _backward(dg, [n for n in a.dtypes if n != "fp32"], dtypes, gen, record)
        a.dtypes = []
    for name in a.dtypes:
        dtype = dtypes[name]
        if a.crossover:
            shapes = [((t, 768, 3072), "crossover") for t in CROSSOVER_TOKENS]
        else:
            shapes = ([(s, "target") for s in FP32_SHAPES] if name == "fp32" else
                      [(s, "target") for s in SHAPES] + [((t, 768, 3072), "tokens") for t in SWEEP_TOKENS])
        for (m, k, n), why in shapes:
            x = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
            wg = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5
            wu = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / k**0.5
            flops = 2 * 2 * m * k * n
            base = dict(dtype=name, tokens=m, dim=k, hidden=n, why=why)
            record(**base, impl="cublas_two_gemms", **_time(lambda: (F.linear(x, wg), F.linear(x, wu))))
            # the kernel's own fallback: the two cuBLAS GEMMs and its act·mul kernel
            record(**base, impl="unfused", **_time(lambda: dg.gate_up_act_mul(x, wg, wu, fused=False)))
            record(**base, impl="cublas_two_gemms+ours_gelu_mul",
                   **_time(lambda: ours.gelu_mul(F.linear(x, wg), F.linear(x, wu))))
            # Every candidate with descriptors at the target shapes (bf16; the first three for fp16, the
            # fp32 ones for fp32), and the first with pointer loads too; one at the token sweep's shapes.
            first = FP32_CANDIDATES[0] if name == "fp32" else CANDIDATES[0]
            if a.crossover:
                tried = [(None, None)]  # the kernel's CONFIGS for this dtype, descriptors when aligned
            elif name == "fp32":
                tried = [(c, True) for c in FP32_CANDIDATES]
            elif why == "target":
                tried = [(c, True) for c in (CANDIDATES if name == "bf16" else CANDIDATES[:3])]
            else:
                tried = [(first, True)]
            if not a.crossover:
                tried.append((first, False))
            for cfg, tma in tried:
                fn = lambda cfg=cfg, tma=tma: dg.gate_up_act_mul(x, wg, wu, fused=True, _config=cfg, _tma=tma)
                started = time.perf_counter()
                try:
                    err = _check(fn, x, wg, wu, dtype)
                    t = _time(fn)
                except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a finding
                    record(**base, impl="fused", config=list(cfg or ()), tma=tma,
                           error=f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                record(**base, impl="fused", config=list(cfg) if cfg else list(dg.CONFIGS[dtype]), tma=tma, max_rel_err=err,
                       tflops=flops / (t["median_us"] * 1e-6) / 1e12,
                       first_call_s=time.perf_counter() - started, **t)
            del x, wg, wu
            torch.cuda.empty_cache()
    a.output.parent.mkdir(parents=True, exist_ok=True)
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": __import__("triton").__version__, "method": "mlpbench.timing.device_time (CUDA-graph replay)",
           "rows": rows}
    a.output.write_text(json.dumps(doc, indent=1))
    best = {}
    for r in rows:
        if r.get("impl") in ("fused", "interleaved", "two_accumulators") and "median_us" in r:
            key = (r["dtype"], r["tokens"], r["dim"], r["hidden"])
            if key not in best or r["median_us"] < best[key]["median_us"]:
                best[key] = r
    for key, r in best.items():
        if not any(x["impl"] == "cublas_two_gemms" and (x["dtype"], x["tokens"], x["dim"], x["hidden"]) == key
                   for x in rows):
            continue
        cublas = next(x for x in rows if (x["dtype"], x["tokens"], x["dim"], x["hidden"]) == key
                      and x["impl"] == "cublas_two_gemms")
        print(f"best {key}: {r['config']} {r['impl']} tma={r.get('tma')} {r['median_us']:.1f} us ({r['tflops']:.0f} TFLOP/s), "
              f"cuBLAS two GEMMs {cublas['median_us']:.1f} us")
    if a.fp8:
        _fp8_best(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
