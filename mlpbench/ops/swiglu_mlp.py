"""The SwiGLU MLP of Llama, Mistral and Qwen: down(silu(gate(x)) * up(x)), no biases."""

from __future__ import annotations

import functools

from . import FP8, HALF, Op, shape
from ._fp8 import torchao
from ._gated import dual_gemm, mlp_variants, mlp_workload
from ._kinds import LIGER_SWIGLU_CPU_REASON

LAYER = "SwiGLUMLP"  # the layer name kernelize maps to our layer (kernels_local/silu_mul/.../layers.py)
ACTIVATION = "silu"
KERNEL_REPO = "silu_mul"


# t = tokens, d = model dim, h = MLP hidden size. Append shapes only: a changed id loses its history.
OP = Op(
    name="swiglu_mlp",
    what="SwiGLU MLP: down(silu(gate(x)) * up(x)), no biases",
    dims=("t", "d", "h"),
    bound="compute",
    rank=20,
    variants=(
        *mlp_variants(LAYER, KERNEL_REPO, "liger_kernel.transformers.swiglu", "LigerSwiGLUMLP", "silu",
                      cpu_reason=LIGER_SWIGLU_CPU_REASON),
        dual_gemm(LAYER),
        torchao(),  # fp8 only
    ),
    shapes=(
        # fp32 only: each compiled case costs 10–40 s of CI on a CPU.
        shape(("quick",), "a SwiGLU MLP at CPU size (Llama's 1:3.5 hidden ratio)", ("fp32",), t=64, d=128, h=448),
        shape(("standard", "full"), "Llama-3-8B and Mistral-7B MLP dims (both 4096 / 14336) at 8192 tokens",
              (*HALF, FP8), t=8192, d=4096, h=14336),
        shape(("standard", "full"), "Qwen2.5-7B MLP dims (3584 / 18944) at 4096 tokens", HALF, t=4096, d=3584, h=18944),
        shape(("standard", "full"), "decode: one token through Llama-3-8B's MLP; host- and weight-bound", (*HALF, FP8),
              t=1, d=4096, h=14336),
        shape(("standard", "full"), "irregular: 333 tokens, hidden 3000 (not a multiple of 128)", t=333, d=768, h=3000),
        # bf16 beside fp8, so the fp8 cases have a bf16 case at their shape to be read against
        shape(("standard", "full"), "the blog's MLP shape (8192 tokens, dim 768, hidden 3072), in fp8 and bf16",
              ("bf16", FP8), t=8192, d=768, h=3072),
    ),
    build=functools.partial(mlp_workload, layer_name=LAYER, activation=ACTIVATION),
    # Its compile tax is the GeGLU MLP's: the same graph with SiLU in place of GeLU.
    probe_compile=False,
    kernel_breakdown=True,
    step_bytes=lambda dims, es: 3 * dims["t"] * dims["h"] * es,  # gate and up read, their product written
)
