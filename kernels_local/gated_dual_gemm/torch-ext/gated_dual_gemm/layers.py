"""Layers for `kernels.kernelize`: looked up as `<kernel module>.layers.<name>`.

`kernels` requires layer classes to be stateless: no __init__, no members beyond `forward` and the
two flags it reads, `has_backward` (Mode.TRAINING) and `can_torch_compile` (Mode.TORCH_COMPILE).
The forward runs on the module it replaces (one with `gate_proj`, `up_proj` and `down_proj`, no
biases). Where that module holds `gate_up_interleaved` (made once, when the model is loaded, by
interleave_gate_up) and no gradient is wanted for its weights, the forward takes the interleaved
kernel, the faster one; otherwise the two-weight kernel on `gate_proj` and `up_proj` as they are.
"""

import torch
from torch import nn

from ._dual_gemm import gate_up_act_mul, gate_up_act_mul_interleaved, interleave

INTERLEAVED = "gate_up_interleaved"  # the buffer interleave_gate_up registers


def interleave_gate_up(model: nn.Module) -> int:
    """Give every module of `model` with `gate_proj` and `up_proj` a buffer `gate_up_interleaved`,
    their weights laid out once as interleave(gate, up) ([2·hidden, dim]): one copy of both
    weights, made now rather than per call. Call it after the weights are loaded, and again after
    they change (the buffer is a copy). The Linear weights stay: training (and autograd) uses them.
    Returns how many modules got one."""
    done = 0
    for module in model.modules():
        gate, up = getattr(module, "gate_proj", None), getattr(module, "up_proj", None)
        if isinstance(gate, nn.Linear) and isinstance(up, nn.Linear):
            with torch.no_grad():
                module.register_buffer(INTERLEAVED, interleave(gate.weight, up.weight), persistent=False)
            done += 1
    return done


def _gate_up(module: nn.Module, x: torch.Tensor, activation: str) -> torch.Tensor:
    w = getattr(module, INTERLEAVED, None)
    wants_grad = torch.is_grad_enabled() and (module.gate_proj.weight.requires_grad or module.up_proj.weight.requires_grad)
    if w is not None and not wants_grad:
        return gate_up_act_mul_interleaved(x, w, activation)
    return gate_up_act_mul(x, module.gate_proj.weight, module.up_proj.weight, activation)


class GeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)): gate, up and GeLU·mul in one kernel, then
    cuBLAS's down projection. Few tokens take the unfused path (fused_pays)."""

    has_backward = True  # recomputes gate and up with PyTorch's GEMMs (not fused)
    can_torch_compile = True  # a torch.library op: one node under torch.compile (on a GPU a triton_op)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(_gate_up(self, x, "gelu_tanh"))


class SwiGLUMLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)), as GeGLUMLP with SiLU."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(_gate_up(self, x, "silu"))
