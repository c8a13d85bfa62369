"""What the gated ops have in common: act(gate) * up, alone or inside an MLP.

GeGLU (act = gelu_tanh) and SwiGLU (act = silu) differ only in the activation, so their op modules
give an activation and get back the eager function, the MLP module, and workload builders. Imports
of torch happen when a case is built, never at import (see mlpbench/ops/__init__.py).
"""

from __future__ import annotations

import functools


@functools.cache
def act_mul(activation: str):
    """The unfused step act(gate) * up (two kernels in eager mode); the same function on float64
    inputs is the reference. `activation`: 'gelu_tanh' or 'silu'."""
    import torch.nn.functional as F

    if activation == "gelu_tanh":
        def gelu_mul(gate, up):
            return F.gelu(gate, approximate="tanh") * up

        return gelu_mul
    if activation == "silu":
        def silu_mul(gate, up):
            return F.silu(gate) * up

        return silu_mul
    raise ValueError(f"activation {activation!r}: valid are 'gelu_tanh', 'silu'")


@functools.cache
def mlp_class(layer_name: str, activation: str):
    """down(act(gate(x)) * up(x)), no biases, as Hugging Face models write it; registered with
    `kernels` under `layer_name`, so `kernels.kernelize` can swap its forward for a kernel's layer.
    Without kernelize it is plain eager PyTorch (the eager and compiled variants)."""
    from kernels import use_kernel_forward_from_hub
    from torch import nn

    step = act_mul(activation)

    class GatedMLP(nn.Module):
        def __init__(self, dim: int, hidden: int):
            super().__init__()
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.down_proj(step(self.gate_proj(x), self.up_proj(x)))

    GatedMLP.__name__ = GatedMLP.__qualname__ = layer_name
    return use_kernel_forward_from_hub(layer_name)(GatedMLP)


def liger_layer(module: str, name: str, hidden_act: str):
    """make(model, device) for a Liger MLP layer (`module`.`name`, configured with `hidden_act`)
    sharing the eager model's weights (the same storage, not a copy)."""
    def make(model, device):
        import importlib
        from types import SimpleNamespace

        import torch

        dim, hidden = model.gate_proj.in_features, model.gate_proj.out_features
        cfg = SimpleNamespace(hidden_size=dim, intermediate_size=hidden, hidden_act=hidden_act)
        with torch.device("meta"):  # its own weights are replaced below: don't spend time initialising them
            layer = getattr(importlib.import_module(module), name)(cfg)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            getattr(layer, proj).weight = getattr(model, proj).weight
        return layer

    return make


def our_layer(layer_name: str, repo: str, training: bool = False):
    """make(model, device) for the eager model kernelized with layer `layer_name` of kernels_local/`repo`
    (in Mode.TRAINING when `training`)."""
    def make(model, device):
        from .. import sources

        return sources.local_layer(model, layer_name, repo, device, training)

    return make


def liger_function(module: str, name: str):
    """make(base, device) for a Liger autograd function (`module`.`name`), called as `name.apply`."""
    def make(base, device):
        import importlib

        return getattr(importlib.import_module(module), name).apply

    return make


def our_function(repo: str, name: str):
    """make(base, device) for function `name` of our kernel repository kernels_local/`repo`."""
    def make(base, device):
        from .. import sources

        return getattr(sources.local_kernel(repo), name)

    return make


DUAL_GEMM_REPO = "gated_dual_gemm"  # gate and up GEMMs in one kernel, act·mul in its epilogue


def mlp_variants(layer: str, repo: str, liger_module: str, liger_class: str, liger_act: str, training: bool = False,
                 **liger_options):
    """The variants every gated MLP has: eager, compiled, Liger's layer (`liger_module`.`liger_class`
    configured with hidden_act `liger_act`, the eager weights shared) and ours (the eager model
    kernelized with layer `layer` of kernels_local/`repo`: cuBLAS GEMMs and our act·mul kernel).
    `training`: for the training step, kernelized in Mode.TRAINING, and compiled on a GPU only (a
    forward and backward compile costs CI minutes on a CPU)."""
    from . import _fp8
    from ._kinds import compiled, eager, liger, ours

    return (
        eager(),
        compiled(only_tiers=("standard", "full")) if training else compiled(),
        liger(liger_layer(liger_module, liger_class, liger_act), liger_class, liger_module,
              hub_layer=(layer, liger_class), **liger_options),
        ours(our_layer(layer, repo, training), repo,
             fp8=None if training else (_fp8.our_mlp(DUAL_GEMM_REPO), DUAL_GEMM_REPO)),
    )


def dual_gemm(layer: str, training: bool = False):
    """The eager model kernelized with layer `layer` of kernels_local/gated_dual_gemm, its gate and
    up weights interleaved once at load time (the repository's interleave_gate_up, outside any
    timing, as a model does it once when it loads): gate, up and act·mul in one kernel,
    then cuBLAS's down GEMM. Last in its op's variants (appended after the others, so the ASV
    variant axis only grew). `training`: kernelized in Mode.TRAINING, the interleaved weights the
    trained parameter (interleave_gate_up(trainable=True))."""
    from ._kinds import ours

    kernelize = our_layer(layer, DUAL_GEMM_REPO, training)

    def make(model, device):
        from .. import sources

        layer_model = kernelize(model, device)
        sources.local_kernel(DUAL_GEMM_REPO).interleave_gate_up(layer_model, trainable=training)
        return layer_model

    return ours(make, DUAL_GEMM_REPO, name="dualgemm",
                what="our Triton dual GEMM with the act·mul epilogue, gate and up weights interleaved at load time")


def mlp_workload(case, device, make, layer_name: str, activation: str):
    """The gated MLP at case's [t, d] input and hidden size h: three GEMMs and act·mul (in fp8:
    mlpbench/ops/_fp8.py)."""
    import torch
    import torch.nn.functional as F

    from .. import workloads as w
    from . import FP8, _fp8

    if case.dtype == FP8:
        return _fp8.mlp_workload(case, device, make, layer_name, activation)

    t, d, h = (case.shape.as_dict()[k] for k in ("t", "d", "h"))
    dtype = w.TORCH_DTYPES[case.dtype]
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the device: CPU init of large weights takes seconds
        eager = mlp_class(layer_name, activation)(d, h).to(dtype=dtype).requires_grad_(False)
    fn, source = make(eager)
    if isinstance(fn, torch.nn.Module):
        fn.requires_grad_(False)
    wg, wu, wd = (getattr(eager, n).weight.double() for n in ("gate_proj", "up_proj", "down_proj"))
    step = act_mul(activation)

    def reference(inp):
        x = inp[0].double()
        return (F.linear(step(F.linear(x, wg), F.linear(x, wu)), wd),)

    es = w.element_size(case)
    return w.Workload(
        case, fn,
        make_inputs=lambda seed: (w.randn((t, d), dtype, device, w.generator(seed, device)),),
        reference=reference,
        flops=3 * 2 * t * d * h,  # three GEMMs; the elementwise step's few FLOPs per element are left out
        # x read, three weights read, y written; the [t, h] intermediates are not counted because a
        # perfectly fused MLP would not need to write them.
        bytes=es * (2 * t * d + 3 * d * h),
        source=source,
    )


MERGED = "merged"  # a shape layout: gate and up are the two halves of one [t, 2h] tensor


def gate_and_up(case, device, gen, requires_grad: bool = False):
    """The two [t, h] inputs of a gated step: gate drawn with twice up's scale (GeLU and SiLU bend
    over [-4, 4]), separate tensors or, for the merged layout, the halves of one [t, 2h] tensor
    (row stride 2h, last dimension contiguous) as a fused gate|up projection writes them."""
    from .. import workloads as w

    t, h = (case.shape.as_dict()[k] for k in ("t", "h"))
    dtype, g = w.TORCH_DTYPES[case.dtype], gen
    if case.shape.layout == MERGED:
        both = w.randn((t, 2 * h), dtype, device, g)
        both[:, :h].mul_(2.0)
        both.requires_grad_(requires_grad)
        return both[:, :h], both[:, h:]
    if case.shape.layout:
        raise ValueError(f"{case.id}: layout {case.shape.layout!r} is not one this op knows ({MERGED!r})")
    return (w.randn((t, h), dtype, device, g, scale=2.0, requires_grad=requires_grad),
            w.randn((t, h), dtype, device, g, requires_grad=requires_grad))


def step_workload(case, device, make, activation: str):
    """act(gate) * up on two [t, h] tensors, forward: memory-bound, rated in GB/s."""
    from .. import workloads as w

    t, h = (case.shape.as_dict()[k] for k in ("t", "h"))
    impl, source = make(act_mul(activation))
    step = act_mul(activation)

    def make_inputs(seed):
        return gate_and_up(case, device, w.generator(seed, device))

    return w.Workload(
        case, impl,
        make_inputs=make_inputs,
        reference=lambda inp: (step(inp[0].detach().double(), inp[1].detach().double()),),
        flops=0,  # memory-bound: read as GB/s, not FLOP/s
        bytes=3 * t * h * w.element_size(case),  # gate and up read once, out written once
        source=source,
    )


def train_workload(case, device, make, activation: str, extra: dict | None = None):
    """act(gate) * up forward, then backward with a given output gradient."""
    import torch

    from .. import workloads as w

    t, h = (case.shape.as_dict()[k] for k in ("t", "h"))
    dtype = w.TORCH_DTYPES[case.dtype]
    impl, source = make(act_mul(activation))
    step = act_mul(activation)

    def make_inputs(seed):
        g = w.generator(seed, device)
        gate, up = gate_and_up(case, device, g, requires_grad=True)
        return gate, up, w.randn((t, h), dtype, device, g)

    def fn(gate, up, grad_out):
        out = impl(gate, up)
        d_gate, d_up = torch.autograd.grad(out, (gate, up), grad_out)
        return out, d_gate, d_up

    def reference(inp):
        g = inp[0].detach().double().requires_grad_(True)
        u = inp[1].detach().double().requires_grad_(True)
        out = step(g, u)
        d_gate, d_up = torch.autograd.grad(out, (g, u), inp[2].double())
        return out.detach(), d_gate, d_up

    return w.Workload(
        case, fn,
        make_inputs=make_inputs,
        reference=reference,
        flops=0,
        # forward: gate, up read, out written; backward: grad_out, gate, up read, two grads written
        bytes=8 * t * h * w.element_size(case),
        source=source,
        extra=extra or {},
    )


INTERLEAVED = "gate_up_interleaved"  # the dual GEMM repository's interleaved gate|up weights


def _trained(module):
    """(the weights a training step differentiates, grads -> (d gate, d up, d down)): the three
    Linear weights, or the interleaved gate|up parameter and down's (its gradient's even and odd
    rows are gate's and up's, as views)."""
    import torch

    w = getattr(module, INTERLEAVED, None)
    if isinstance(w, torch.nn.Parameter):
        return (w, module.down_proj.weight), lambda g: (g[0][0::2], g[0][1::2], g[1])
    return tuple(getattr(module, n).weight for n in ("gate_proj", "up_proj", "down_proj")), tuple


def mlp_train_workload(case, device, make, layer_name: str, activation: str):
    """The gated MLP's training step at case's [t, d] input: forward, then backward with a given
    output gradient, to x and every weight (the weights require grad, as in fine-tuning)."""
    import torch
    import torch.nn.functional as F

    from .. import workloads as w

    t, d, h = (case.shape.as_dict()[k] for k in ("t", "d", "h"))
    dtype = w.TORCH_DTYPES[case.dtype]
    torch.manual_seed(0)
    with torch.device(device):
        eager = mlp_class(layer_name, activation)(d, h).to(dtype=dtype)
    w64 = [getattr(eager, n).weight.detach().double() for n in ("gate_proj", "up_proj", "down_proj")]
    fn, source = make(eager)
    weights, unpack = _trained(fn)
    step = act_mul(activation)

    def train_step(x, grad_out):
        out = fn(x)
        dx, *dw = torch.autograd.grad(out, (x, *weights), grad_out)
        return (out, dx, *unpack(dw))

    def reference(inp):
        x = inp[0].detach().double().requires_grad_(True)
        wg, wu, wd = (v.clone().requires_grad_(True) for v in w64)
        out = F.linear(step(F.linear(x, wg), F.linear(x, wu)), wd)
        return (out.detach(), *torch.autograd.grad(out, (x, wg, wu, wd), inp[1].double()))

    def make_inputs(seed):
        g = w.generator(seed, device)
        return w.randn((t, d), dtype, device, g, requires_grad=True), w.randn((t, d), dtype, device, g)

    es = w.element_size(case)
    return w.Workload(
        case, train_step,
        make_inputs=make_inputs,
        reference=reference,
        flops=3 * 3 * 2 * t * d * h,  # three GEMMs forward, six backward (x's and each weight's gradient)
        # forward: x and three weights read, y written; backward: the output gradient read, x's and
        # the three weights' gradients written. The [t, h] intermediates are not counted.
        bytes=es * (4 * t * d + 6 * d * h),
        source=source,
        # Gradients go through one more rounded GEMM than the output (the kernels' tests allow the same).
        tolerance=2 * w.TOLERANCE[case.dtype],
    )
