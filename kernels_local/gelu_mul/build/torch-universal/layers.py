"""Layers for `kernels.kernelize`: looked up as `<kernel module>.layers.<name>`.

`kernels` requires layer classes to be stateless: no __init__, no members
beyond `forward` (and the `has_backward` / `can_torch_compile` flags).  The
forward runs on the module it replaces, so it uses that module's attributes.
"""

import torch
from torch import nn

from ._gelu_mul import gelu_mul


class GeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)) with the fused gelu_mul kernel.

    Replaces the forward of a module that has `gate_proj`, `up_proj` and `down_proj`.
    """

    has_backward = True
    # Not validated under torch.compile; kernelize falls back to the original
    # forward for Mode.TORCH_COMPILE.
    can_torch_compile = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gelu_mul(self.gate_proj(x), self.up_proj(x)))
