"""The GeGLU MLP's training step: forward, then backward to x and every weight (what a fine-tuning
run pays per layer, and what Liger's benchmarks report first as "full")."""

from __future__ import annotations

import functools

from . import Op, shape
from ._gated import dual_gemm, mlp_train_workload, mlp_variants
from .mlp import ACTIVATION, KERNEL_REPO, LAYER

# t = tokens, d = model dim, h = MLP hidden size. Append shapes only: a changed id loses its history.
OP = Op(
    name="mlp_train",
    what="GeGLU MLP forward then backward with a given output gradient, to x and every weight",
    dims=("t", "d", "h"),
    bound="compute",
    rank=15,
    variants=(
        *mlp_variants(LAYER, KERNEL_REPO, "liger_kernel.transformers.geglu", "LigerGEGLUMLP", "gelu_pytorch_tanh",
                      training=True),
        dual_gemm(LAYER, training=True),
    ),
    shapes=(
        shape(("quick",), "the blog's MLP scaled down to CPU size", ("fp32",), t=64, d=128, h=512),
        shape(("standard", "full"), "the blog's MLP: 8192 tokens, dim 768, hidden 3072", ("bf16",),
              t=8192, d=768, h=3072),
        shape(("standard", "full"), "Llama-3-8B MLP dims (4096 / 14336) at 8192 tokens", ("bf16",),
              t=8192, d=4096, h=14336),
        shape(("standard", "full"), "irregular: 333 tokens, hidden 3000 (not a multiple of 128)", ("bf16",),
              t=333, d=768, h=3000),
    ),
    build=functools.partial(mlp_train_workload, layer_name=LAYER, activation=ACTIVATION),
    probe_compile=False,  # the compile tax is the forward's (mlp)
    kernel_breakdown=True,
)
