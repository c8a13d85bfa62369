"""Layers for `kernels.kernelize`: looked up as `<kernel module>.layers.<name>`.

`kernels` requires layer classes to be stateless: no __init__, no members beyond `forward` and the
two flags it reads, `has_backward` (Mode.TRAINING) and `can_torch_compile` (Mode.TORCH_COMPILE).
The forward runs on the module it replaces (one with `gate_proj`, `up_proj` and `down_proj`, no
biases), so it uses that module's weights as they are: nothing is re-laid out at load time.
"""

import torch
from torch import nn

from ._dual_gemm import gate_up_act_mul


class GeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)): gate, up and GeLU·mul in one kernel, then
    cuBLAS's down projection. Few tokens take the unfused path (fused_pays)."""

    has_backward = True  # recomputes gate and up with PyTorch's GEMMs (not fused)
    can_torch_compile = True  # a torch.library op with a fake: one node under torch.compile

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gate_up_act_mul(x, self.gate_proj.weight, self.up_proj.weight, "gelu_tanh"))


class SwiGLUMLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)), as GeGLUMLP with SiLU."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gate_up_act_mul(x, self.gate_proj.weight, self.up_proj.weight, "silu"))
