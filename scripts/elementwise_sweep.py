"""Launch-table sweep for our elementwise kernels (kernels_local/gelu_mul, kernels_local/silu_mul) on a
GPU: which (bytes per program, num_warps) rows to put in each one's _CONFIG_TABLE, per element size.

    python3 scripts/elementwise_sweep.py --output sweep.json [--rounds 3]

Each candidate replaces the kernel's whole table for the duration of its measurement and is called
as a model calls it (the public function, eager: the planned launch path). Every candidate is first
checked against float64, then timed by CUDA-graph replay with the suite's own timer
(mlpbench.timing.device_time), beside the bars the suite's targets use: the compiled act·mul
(torch.compile, Inductor's default mode) and Liger's kernel. Rounds visit the implementations in a
rotated order and each round's ratios to compiled are taken within the round, so a drift of the
clocks during the sweep moves every implementation alike. `best` lines name, per op, dtype and shape,
the candidate with the lowest median ratio to compiled.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

from mlpbench import environment

environment.prepare()  # before torch and huggingface_hub read it

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mlpbench import sources, timing  # noqa: E402

# (bytes per program and tensor, num_warps): 8 and 16 bytes a thread at three block sizes each
CANDIDATES = ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16))
OPS = {  # op -> (kernel repository, its module, liger's module and function, activation, (tokens, hidden) shapes)
    "gelu_mul": ("gelu_mul", "_gelu_mul", ("liger_kernel.ops.geglu", "LigerGELUMulFunction"),
                 lambda g: F.gelu(g, approximate="tanh"), ((8192, 3072), (4096, 16384), (8192, 14336), (333, 3000))),
    "silu_mul": ("silu_mul", "_silu_mul", ("liger_kernel.ops.swiglu", "LigerSiLUMulFunction"),
                 F.silu, ((8192, 14336), (4096, 18944), (333, 3000))),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1e-2}  # the suite's, of max |error| over max |reference|


def _table(module: str, block_bytes: int, num_warps: int) -> tuple:
    """A one-row _CONFIG_TABLE of `module` ('_gelu_mul' or '_silu_mul') serving every element size."""
    if module == "_gelu_mul":
        return ((None, float("inf"), block_bytes, num_warps),)
    return ((None, block_bytes, num_warps),)


class Candidate:
    """Our kernel with its table replaced while called; its plans are dropped on entry and exit, since
    a plan keeps the launch configuration it was made with."""

    def __init__(self, impl, module: str, fn, config):
        self.impl, self.fn = impl, fn
        self.table = _table(module, *config)

    def __call__(self, gate, up):
        return self.fn(gate, up)

    def __enter__(self):
        self.saved = self.impl._CONFIG_TABLE
        self.impl._CONFIG_TABLE = self.table
        self.impl._FORWARD_PLANS.clear()
        return self

    def __exit__(self, *exc):
        self.impl._CONFIG_TABLE = self.saved
        self.impl._FORWARD_PLANS.clear()


def _check(fn, gate, up, act) -> float:
    out = fn(gate, up).double()
    ref = act(gate.double()) * up.double()
    err = ((out - ref).abs().max() / ref.abs().max()).item()
    if not err <= TOLERANCE[gate.dtype]:
        raise AssertionError(f"max error {err:.2e} of max |reference| exceeds {TOLERANCE[gate.dtype]:.0e}")
    return err


def _inputs(t: int, h: int, dtype, gen) -> list[tuple]:
    sets = timing.input_sets_needed(3 * t * h * torch.finfo(dtype).bits // 8, "cuda")
    return [(torch.randn(t, h, device="cuda", dtype=dtype, generator=gen),
             (torch.rand(t, h, device="cuda", generator=gen) - 0.5).to(dtype)) for _ in range(sets)]


def sweep(rounds: int, record) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    for op, (repo, module, liger, act, shapes) in OPS.items():
        kernel = sources.local_kernel(repo)
        impl = importlib.import_module(kernel.__name__ + "." + module)
        ours = getattr(kernel, op)
        compiled = torch.compile(lambda g, u, act=act: act(g) * u, dynamic=False)
        bars = {"compiled": compiled}
        try:
            bars["liger"] = getattr(importlib.import_module(liger[0]), liger[1]).apply
        except ImportError as exc:
            print(f"{op}: no liger bar ({exc})")
        for name, dtype in DTYPES.items():
            for t, h in shapes:
                base = dict(op=op, dtype=name, tokens=t, hidden=h)
                inputs = _inputs(t, h, dtype, gen)
                torch._dynamo.reset()
                impls = {k: (contextlib.nullcontext(), f) for k, f in bars.items()}
                for b, w in CANDIDATES:
                    c = Candidate(impl, module, ours, (b, w))
                    impls[f"ours {b}B/{w}w"] = (c, c)
                ok = {}
                for label, (ctx, fn) in impls.items():
                    started = time.perf_counter()
                    try:
                        with ctx:
                            err = _check(fn, *inputs[0], act)
                        ok[label] = (ctx, fn)
                        record(**base, impl=label, max_rel_err=err, first_call_s=time.perf_counter() - started)
                    except Exception as exc:  # noqa: BLE001 - a candidate that fails is a finding, not the end
                        record(**base, impl=label, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                per_round = {label: [] for label in ok}
                labels = list(ok)
                for r in range(rounds):
                    order = labels[r % len(labels):] + labels[:r % len(labels)]
                    for label in order:
                        ctx, fn = ok[label]
                        with ctx:
                            per_round[label].append(timing.device_time(fn, inputs).median_s)
                for label, times in per_round.items():
                    ratios = [a / c for a, c in zip(times, per_round["compiled"])]
                    record(**base, impl=label, rounds_us=[x * 1e6 for x in times],
                           median_us=statistics.median(times) * 1e6, vs_compiled=statistics.median(ratios),
                           vs_compiled_range=[min(ratios), max(ratios)])
                mine = {k: statistics.median([a / c for a, c in zip(v, per_round["compiled"])])
                        for k, v in per_round.items() if k.startswith("ours")}
                if mine:
                    best = min(mine, key=mine.get)
                    print(f"best {op} {name} t{t}-h{h}: {best} at {mine[best]:.4f} of compiled"
                          + "".join(f"; {k} {v:.4f}" for k, v in sorted(mine.items(), key=lambda kv: kv[1])[1:4]),
                          flush=True)
                del inputs
                torch.cuda.empty_cache()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, required=True, help="where the JSON of every measurement goes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every implementation (default 3)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("elementwise_sweep.py: needs a CUDA GPU (it times kernels); none is visible", file=sys.stderr)
        return 2
    rows = []

    def record(**row):
        rows.append(row)
        args.output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                           "candidates": CANDIDATES, "rows": rows}, indent=1))

    started = time.perf_counter()
    sweep(args.rounds, record)
    print(f"sweep wall {time.perf_counter() - started:.0f} s; {len(rows)} rows in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
