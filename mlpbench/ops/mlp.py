"""The blog's GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), no biases (Gemma's MLP)."""

from __future__ import annotations

import functools

from . import FLOATS, FP8, HALF, Op, shape
from ._fp8 import torchao
from ._gated import dual_gemm, mlp_variants, mlp_workload
from ._kinds import maxautotune

LAYER = "GeGLUMLP"  # the layer name kernelize maps to our layer (kernels_local/gelu_mul/.../layers.py)
ACTIVATION = "gelu_tanh"
KERNEL_REPO = "gelu_mul"


# t = tokens (batch × sequence), d = model dim, h = MLP hidden size. Append shapes only: a changed
# id loses the history behind it.
OP = Op(
    name="mlp",
    what="GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), no biases",
    dims=("t", "d", "h"),
    bound="compute",
    rank=10,
    variants=(
        *mlp_variants(LAYER, KERNEL_REPO, "liger_kernel.transformers.geglu", "LigerGEGLUMLP", "gelu_pytorch_tanh"),
        # Its GEMM autotuning costs minutes per shape: the blog's shape and Llama-3-8B's, bf16.
        maxautotune(only_shapes=("t8192-d768-h3072", "t8192-d4096-h14336"), only_dtypes=("bf16",)),
        dual_gemm(LAYER),
        torchao(),  # fp8 only
    ),
    shapes=(
        shape(("quick",), "the blog's MLP scaled down to CPU size (same 1:4 hidden ratio)", ("fp32", "bf16"),
              t=64, d=128, h=512),
        shape(("standard", "full"), "the blog's MLP example: batch 64 × seq 128, dim 768, hidden 3072",
              (*FLOATS, FP8), t=8192, d=768, h=3072),
        shape(("standard", "full"), "Gemma-2B MLP dims (2048 / 16384) at 4096 tokens", HALF, t=4096, d=2048, h=16384),
        shape(("full",), "Gemma-7B MLP dims (3072 / 24576) at 4096 tokens", t=4096, d=3072, h=24576),
        shape(("standard", "full"), "Llama-3-8B/Mistral-7B MLP dims (4096 / 14336) at 8192 tokens", (*HALF, FP8),
              t=8192, d=4096, h=14336),
        shape(("standard", "full"), "decode: one token through Gemma-2B's MLP; host- and weight-bound", (*HALF, FP8),
              t=1, d=2048, h=16384),
        shape(("standard", "full"), "irregular: 333 tokens, hidden 3000 (not a multiple of 128)", t=333, d=768, h=3000),
        shape(("full",), "the largest MLP of the anchors: 16384 tokens at Llama-3-8B's dims (4096 / 14336)",
              t=16384, d=4096, h=14336),
        # Token sweep at the blog's dims (bf16): where compiling starts to pay on the host; at few
        # tokens a call is host-bound and a compiled module's guards can cost more than they save.
        *(shape(("standard", "full"), f"token sweep at the blog's dims: {t} tokens (overhead crossover)", ("bf16",),
                t=t, d=768, h=3072)
          for t in (1, 16, 64, 256, 1024, 2048, 4096, 16384)),
    ),
    build=functools.partial(mlp_workload, layer_name=LAYER, activation=ACTIVATION),
    changing_shapes=True,
    overhead_sweep=("d768-h3072", "bf16"),
    kernel_breakdown=True,
    step_bytes=lambda dims, es: 3 * dims["t"] * dims["h"] * es,  # gate and up read, their product written
)
