"""Layers for `kernels.kernelize`: looked up as `<kernel module>.layers.<name>`.

`kernels` requires layer classes to be stateless: no __init__, no members
beyond `forward` and the two flags it reads, `has_backward` (Mode.TRAINING)
and `can_torch_compile` (Mode.TORCH_COMPILE).  The forward runs on the module
it replaces, so it uses that module's attributes.
"""

import torch
from torch import nn

from ._gelu_mul import gelu_mul


class GeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)) with the fused gelu_mul kernel.

    Replaces the forward of a module that has `gate_proj`, `up_proj` and `down_proj`.
    """

    # gelu_mul is differentiable (its own fused backward kernel) ...
    has_backward = True
    # ... and a torch.library op, so torch.compile traces it as one node, without a
    # graph break (on a GPU a triton_op: Inductor's code launches the kernel itself).
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gelu_mul(self.gate_proj(x), self.up_proj(x)))
