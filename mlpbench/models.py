"""The GeGLU MLP exactly as the blog writes it, and nothing else.

The class is registered with `kernels` under the layer name "GeGLUMLP", so `kernels.kernelize`
can swap its forward for a hub or local kernel's layer (our `ours` variant, see `sources.py`).
Without kernelize it is plain eager PyTorch: the `eager` and `compiled` variants use it as is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from kernels import use_kernel_forward_from_hub
from torch import nn


def gelu_mul_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gelu_tanh(gate) * up: the unfused step (two kernels in eager mode)."""
    return F.gelu(gate, approximate="tanh") * up


@use_kernel_forward_from_hub("GeGLUMLP")
class GeGLUMLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gelu_mul_reference(self.gate_proj(x), self.up_proj(x)))
