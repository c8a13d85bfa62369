"""The interleaved dual GEMM's inference call from two source trees, in one process, alternating.

    git archive 84e6238 kernels_local/gated_dual_gemm/torch-ext/gated_dual_gemm | tar -x -C /tmp/old
    python studies/train-step/ab_inference.py \
        /tmp/old/kernels_local/gated_dual_gemm/torch-ext/gated_dual_gemm \
        kernels_local/gated_dual_gemm/torch-ext/gated_dual_gemm OUTPUT

Each tree is copied under a package name of its own (so their custom ops do not collide), then
timed by graph replay (mlpbench.timing.device_time), four times each, the order swapped every
round. Output: the difference between the two outputs, and every median.
"""
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from mlpbench import timing

SHAPES = ((8192, 4096, 14336), (8192, 768, 3072), (4096, 3584, 18944))  # (tokens, dim, hidden), bf16


def load(tree: str, name: str, into: Path):
    shutil.copytree(tree, into / name)
    return importlib.import_module(name)


def main(old_tree: str, new_tree: str, output: str) -> None:
    tmp = Path(tempfile.mkdtemp())
    sys.path.insert(0, str(tmp))
    mods = {"old": load(old_tree, "gdg_old", tmp), "new": load(new_tree, "gdg_new", tmp)}
    with open(output, "w") as out:
        def say(line):
            print(line, flush=True)
            out.write(line + "\n")

        for m, k, n in SHAPES:
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
            wg = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5
            wu = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5
            w = mods["new"]._dual_gemm.interleave(wg, wu)
            fns = {name: (lambda mod=mod: mod.gate_up_act_mul_interleaved(x, w)) for name, mod in mods.items()}
            diff = (fns["old"]().float() - fns["new"]().float()).abs().max().item()
            say(f"shape {m}x{k}x{n}: max |old-new| {diff:.3e}")
            medians = {"old": [], "new": []}
            for rep in range(4):
                for name in ("old", "new") if rep % 2 == 0 else ("new", "old"):
                    medians[name].append(timing.device_time(fns[name], [()]).median_s * 1e6)
            for name, v in medians.items():
                say(f"  {name}: " + " ".join(f"{u:.1f}" for u in v) + f"  median {sorted(v)[len(v) // 2]:.1f} us")
            del x, wg, wu, w
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(*sys.argv[1:4])
