"""Layers for `kernels.kernelize`: looked up as `<kernel module>.layers.<name>`.

`kernels` requires layer classes to be stateless: no __init__, no members beyond `forward` and the
two flags it reads, `has_backward` (Mode.TRAINING) and `can_torch_compile` (Mode.TORCH_COMPILE).
The forward runs on the module it replaces (one with `gate_proj`, `up_proj` and `down_proj`, no
biases). Where that module holds `gate_up_interleaved` (made once, when the model is loaded, by
interleave_gate_up) the forward takes the interleaved kernel, the faster one, unless that tensor is
an inference copy and a gradient is wanted for the Linear weights; then the two-weight kernel on
`gate_proj` and `up_proj` as they are. Either trains with the kernels' fused backward.

For training on interleaved weights, interleave_gate_up(model, trainable=True) makes
`gate_up_interleaved` the parameter: the optimizer steps it, its gradient is interleave(d gate,
d up), and `gate_proj.weight` and `up_proj.weight` become views of its rows (read-only to
autograd), which see the optimizer's in-place steps. Only this layer's forward trains it: a plain
`gate_proj(x)` reads the views and gives no gradient. The views are tied to the parameter's storage
as it was: after moving the model (`.to()`), copying it (`deepcopy`) or loading a state dict with
`assign=True`, call deinterleave_gate_up and interleave_gate_up again. The state dict holds
`gate_up_interleaved`, not the two Linear weights: deinterleave_gate_up gives the Linears their own
parameters back, to save or load a checkpoint of the original layout.
"""

import torch
from torch import nn

from ._dual_gemm import gate_up_act_mul, gate_up_act_mul_interleaved, interleave

INTERLEAVED = "gate_up_interleaved"  # the buffer interleave_gate_up registers


def interleave_gate_up(model: nn.Module, trainable: bool = False) -> int:
    """Give every module of `model` with `gate_proj` and `up_proj` a tensor `gate_up_interleaved`,
    their weights laid out once as interleave(gate, up) ([2·hidden, dim]): one copy of both
    weights, made now rather than per call. Returns how many modules got one.

    trainable=False: a buffer, not saved with the model; the Linear weights stay the parameters.
    Call it after the weights are loaded, and again after they change (the buffer is a copy).
    trainable=True: a parameter (requires_grad as gate_proj's weight), and gate_proj's and
    up_proj's weights become views of its even and odd rows. Call it once the model has its device
    and dtype (moving it afterwards leaves the views on the old storage), and build the optimizer
    after it."""
    done = 0
    for module in model.modules():
        gate, up = getattr(module, "gate_proj", None), getattr(module, "up_proj", None)
        if isinstance(gate, nn.Linear) and isinstance(up, nn.Linear):
            with torch.no_grad():
                w = interleave(gate.weight, up.weight)
            if isinstance(getattr(module, INTERLEAVED, None), nn.Parameter):
                _deinterleave(module)  # the Linears get their parameters back before anything else
            elif hasattr(module, INTERLEAVED):
                delattr(module, INTERLEAVED)
            if trainable:
                w = nn.Parameter(w, requires_grad=gate.weight.requires_grad or up.weight.requires_grad)
                module.register_parameter(INTERLEAVED, w)
                for linear, rows in ((gate, w.detach()[0::2]), (up, w.detach()[1::2])):
                    if "weight" in linear._parameters:
                        del linear.weight
                    linear.weight = rows
            else:
                module.register_buffer(INTERLEAVED, w, persistent=False)
            done += 1
    return done


def deinterleave_gate_up(model: nn.Module) -> int:
    """Undo interleave_gate_up: `gate_proj` and `up_proj` get their weights back as parameters (of
    the current values; requires_grad as the interleaved tensor's) and `gate_up_interleaved` goes.
    Returns how many modules had one."""
    done = 0
    for module in model.modules():
        if getattr(module, INTERLEAVED, None) is not None:
            _deinterleave(module)
            done += 1
    return done


def _deinterleave(module: nn.Module) -> None:
    w = getattr(module, INTERLEAVED)
    delattr(module, INTERLEAVED)
    if isinstance(w, nn.Parameter):
        for linear, rows in ((module.gate_proj, w[0::2]), (module.up_proj, w[1::2])):
            del linear.weight
            linear.weight = nn.Parameter(rows.detach().contiguous(), requires_grad=w.requires_grad)


def _gate_up(module: nn.Module, x: torch.Tensor, activation: str) -> torch.Tensor:
    w = getattr(module, INTERLEAVED, None)
    if w is not None and (isinstance(w, nn.Parameter) or not (
            torch.is_grad_enabled() and (module.gate_proj.weight.requires_grad or module.up_proj.weight.requires_grad))):
        return gate_up_act_mul_interleaved(x, w, activation)
    return gate_up_act_mul(x, module.gate_proj.weight, module.up_proj.weight, activation)


class GeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)): gate, up and GeLU·mul in one kernel, then
    cuBLAS's down projection. Few tokens take the unfused path (fused_pays)."""

    has_backward = True  # the forward saves gate and up; one elementwise kernel and cuBLAS's GEMMs after
    can_torch_compile = True  # a torch.library op: one node under torch.compile (on a GPU a triton_op)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(_gate_up(self, x, "gelu_tanh"))


class SwiGLUMLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)), as GeGLUMLP with SiLU."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(_gate_up(self, x, "silu"))
