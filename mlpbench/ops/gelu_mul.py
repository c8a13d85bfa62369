"""GeLU·mul, the GeGLU MLP's elementwise step: gelu_tanh(gate) * up on two [tokens, hidden] tensors."""

from __future__ import annotations

import functools

from . import Op, shape
from ._gated import liger_function, our_function, step_workload
from ._kinds import compiled, eager, liger, maxautotune, ours

ACTIVATION = "gelu_tanh"
KERNEL_REPO = "gelu_mul"
LIGER_OP = ("liger_kernel.ops.geglu", "LigerGELUMulFunction")  # Liger's autograd function


# Shared with gelu_mul_train.
VARIANTS = (
    eager(" (gelu kernel, then mul kernel)"),
    compiled(),
    liger(liger_function(*LIGER_OP), LIGER_OP[1], LIGER_OP[0]),
    ours(our_function(KERNEL_REPO, "gelu_mul"), KERNEL_REPO),
)


# t = tokens, h = MLP hidden size: the [t, h] intermediates of the MLP shapes. Append shapes only.
OP = Op(
    name="gelu_mul",
    what="gelu_tanh(gate) * up on two [tokens, hidden] tensors (forward)",
    dims=("t", "h"),
    bound="memory",
    rank=30,
    variants=(*VARIANTS, maxautotune(only_shapes=("t8192-h3072", "t8192-h14336"), only_dtypes=("bf16",))),
    shapes=(
        shape(("quick", "standard", "full"), "irregular: 333 × 3000, no power-of-two block divides it", t=333, h=3000),
        shape(("standard", "full"), "the blog's fused-kernel shape: 8192 × 3072 (151 MB in bf16)", t=8192, h=3072),
        shape(("standard", "full"), "Gemma-2B intermediate at 4096 tokens", t=4096, h=16384),
        shape(("full",), "Gemma-7B intermediate at 4096 tokens", t=4096, h=24576),
        shape(("standard", "full"), "Llama-3-8B intermediate at 8192 tokens", t=8192, h=14336),
        shape(("standard", "full"), "decode: one token, Gemma-2B hidden; launch-bound", t=1, h=16384),
        shape(("full",), "16384 × 14336, the largest anchor shape", t=16384, h=14336),
        # gate and up as the two halves of one [t, 2h] tensor (row stride 2h): what a merged gate|up
        # projection writes (vLLM, several Hugging Face models). Against the contiguous shapes above.
        shape(("standard", "full"), "the blog's shape, gate and up the halves of a merged [8192, 6144] projection",
              t=8192, h=3072, layout="merged"),
        shape(("standard", "full"), "Llama-3-8B intermediate at 8192 tokens, halves of a merged projection",
              t=8192, h=14336, layout="merged"),
    ),
    build=functools.partial(step_workload, activation=ACTIVATION),
)
