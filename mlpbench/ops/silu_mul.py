"""SiLU·mul, the SwiGLU MLP's elementwise step: silu(gate) * up on two [tokens, hidden] tensors."""

from __future__ import annotations

import functools

from . import Op, shape
from ._gated import liger_function, our_function, step_workload
from ._kinds import LIGER_SWIGLU_CPU_REASON, compiled, eager, liger, ours

ACTIVATION = "silu"
KERNEL_REPO = "silu_mul"
LIGER_OP = ("liger_kernel.ops.swiglu", "LigerSiLUMulFunction")  # Liger's autograd function


# t = tokens, h = MLP hidden size: the [t, h] intermediates of the SwiGLU shapes. Append shapes only.
OP = Op(
    name="silu_mul",
    what="silu(gate) * up on two [tokens, hidden] tensors (forward)",
    dims=("t", "h"),
    bound="memory",
    rank=50,
    variants=(
        eager(" (silu kernel, then mul kernel)"),
        compiled(),
        liger(liger_function(*LIGER_OP), LIGER_OP[1], LIGER_OP[0],
              cpu_reason=LIGER_SWIGLU_CPU_REASON),
        ours(our_function(KERNEL_REPO, "silu_mul"), KERNEL_REPO),
    ),
    shapes=(
        shape(("quick",), "the quick SwiGLU MLP's intermediate, CPU-sized", ("fp32",), t=64, h=448),
        shape(("standard", "full"), "irregular: 333 × 3000 (not a multiple of 128)", t=333, h=3000),
        shape(("standard", "full"), "Llama-3-8B / Mistral-7B intermediate at 8192 tokens (705 MB in bf16)",
              t=8192, h=14336),
        shape(("standard", "full"), "Qwen2.5-7B intermediate at 4096 tokens", t=4096, h=18944),
        shape(("standard", "full"), "decode: one token, Llama-3-8B hidden; launch-bound", t=1, h=14336),
    ),
    build=functools.partial(step_workload, activation=ACTIVATION),
    probe_compile=False,  # the same Inductor pointwise kernel as gelu_mul's, whose compile is timed
)
