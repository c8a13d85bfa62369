"""GeLU·mul forward then backward with a given output gradient: the fused step in training."""

from __future__ import annotations

from . import Op, shape
from ._gated import train_workload
from .gelu_mul import ACTIVATION, VARIANTS


def build(case, device, make):
    # Liger's backward writes the gradients into the saved gate/up buffers (in place): after the
    # first timed call the inputs hold gradients. Timing of this memory-bound step does not depend
    # on the values; correctness is checked on fresh inputs before any timing.
    note = {"note": "liger backward overwrites its inputs"} if case.variant == "liger" else {}
    return train_workload(case, device, make, ACTIVATION, note)


OP = Op(
    name="gelu_mul_train",
    what="gelu_tanh(gate) * up, forward then backward with a given output gradient",
    dims=("t", "h"),
    bound="memory",
    rank=40,
    variants=VARIANTS,
    shapes=(
        shape(("quick",), "irregular 333 × 3000, CPU-sized", ("fp32",), t=333, h=3000),
        shape(("standard", "full"), "the blog's shape 8192 × 3072", t=8192, h=3072),
        shape(("standard", "full"), "Llama-3-8B intermediate at 8192 tokens", ("bf16",), t=8192, h=14336),
        shape(("standard", "full"), "irregular 1823 × 781, the Triton tutorial's odd shape", t=1823, h=781),
    ),
    build=build,
)
