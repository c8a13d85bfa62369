"""The SwiGLU MLP's training step (Llama, Mistral, Qwen): forward, then backward to x and every weight."""

from __future__ import annotations

import functools

from . import Op, shape
from ._gated import dual_gemm, mlp_train_workload, mlp_variants
from ._kinds import LIGER_SWIGLU_CPU_REASON
from .swiglu_mlp import ACTIVATION, KERNEL_REPO, LAYER

# t = tokens, d = model dim, h = MLP hidden size. Append shapes only: a changed id loses its history.
OP = Op(
    name="swiglu_mlp_train",
    what="SwiGLU MLP forward then backward with a given output gradient, to x and every weight",
    dims=("t", "d", "h"),
    bound="compute",
    rank=25,
    variants=(
        *mlp_variants(LAYER, KERNEL_REPO, "liger_kernel.transformers.swiglu", "LigerSwiGLUMLP", "silu",
                      training=True, cpu_reason=LIGER_SWIGLU_CPU_REASON),
        dual_gemm(LAYER, training=True),
    ),
    shapes=(
        shape(("quick",), "a SwiGLU MLP at CPU size (Llama's 1:3.5 hidden ratio)", ("fp32",), t=64, d=128, h=448),
        shape(("standard", "full"), "the blog's MLP dims with SwiGLU: 8192 tokens, dim 768, hidden 3072", ("bf16",),
              t=8192, d=768, h=3072),
        shape(("standard", "full"), "Llama-3-8B and Mistral-7B MLP dims (4096 / 14336) at 8192 tokens", ("bf16",),
              t=8192, d=4096, h=14336),
        shape(("standard", "full"), "irregular: 333 tokens, hidden 3000 (not a multiple of 128)", ("bf16",),
              t=333, d=768, h=3000),
    ),
    build=functools.partial(mlp_train_workload, layer_name=LAYER, activation=ACTIVATION),
    probe_compile=False,
    kernel_breakdown=True,
)
