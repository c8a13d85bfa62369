"""What the model ops share: a Hugging Face causal LM built from a config (random weights from a
fixed seed, nothing downloaded), its gated MLPs kernelized with our layers, and the workload that
gates its logits on the same model in float64.

The subject is the MLP inside its model: the attention, norms, rotary embedding and lm_head stay
transformers' own in every variant, so a difference between variants is the MLP's (and how
torch.compile treats it among the rest). transformers is optional (the `model` extra): every
variant requires it, so without it each case skips with the reason. Nothing here imports torch or
transformers at import (see mlpbench/ops/__init__.py).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from . import Variant
from ._gated import DUAL_GEMM_REPO

TRANSFORMERS = "transformers"  # the module every variant requires (the skip names its package)

# Relative error of the logits allowed per dtype, in place of workloads.TOLERANCE (one op's output).
# In 16 bits a model rounds at every projection, norm and residual add of every layer and again at
# the lm_head, so the original model's own logits sit further from float64 than one op's output:
# the bf16 bound is set well above that error and well below a wrong activation's (tests check
# both). fp16 keeps three more mantissa bits than bf16; fp32 keeps one op's bound.
LOGITS_TOLERANCE = {"fp32": 1e-4, "bf16": 4e-2, "fp16": 5e-3}


@dataclass(frozen=True)
class Geometry:
    """What a shape's dims (t tokens, d model dim, h MLP hidden, l layers) leave out."""

    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


@dataclass(frozen=True)
class Model:
    """One architecture: transformers' module and classes, the config fields every shape shares,
    the geometry per model dim, and the layer name and repository our kernels give its MLP."""

    module: str  # transformers' modeling module, e.g. "transformers.models.llama.modeling_llama"
    config_class: str
    model_class: str
    mlp_class: str  # the MLP whose forward kernelize replaces (reads gate_proj, up_proj, down_proj)
    layer: str  # our layer's name in kernels_local/<repo>/.../layers.py (and in the dual GEMM's)
    repo: str  # our act·mul kernel repository
    config: tuple[tuple[str, object], ...]  # fixed config fields (rope_theta, eps, activation, ...)
    geometry: tuple[tuple[int, Geometry], ...]  # by model dim d

    def geometry_of(self, dims: dict) -> Geometry:
        return dict(self.geometry)[dims["d"]]

    def config_for(self, dims: dict):
        """transformers' config for the shape `dims` (t, d, h, l)."""
        g = self.geometry_of(dims)
        cls = getattr(importlib.import_module(self.module), self.config_class)
        # initializer_range 1/√d: the projections' outputs have unit scale at every model dim, so the
        # activation works in its bend at the CPU size too (at transformers' default 0.02 and d = 64,
        # the gate is so small that SiLU and GeLU nearly agree and a wrong one hides in the logits).
        return cls(hidden_size=dims["d"], intermediate_size=dims["h"], num_hidden_layers=dims["l"],
                   num_attention_heads=g.heads, num_key_value_heads=g.kv_heads, head_dim=g.head_dim,
                   vocab_size=g.vocab, attn_implementation="sdpa", use_cache=False,
                   initializer_range=dims["d"] ** -0.5, **dict(self.config))

    def classes(self):
        """(the causal LM class, the MLP class), imported now."""
        module = importlib.import_module(self.module)
        return getattr(module, self.model_class), getattr(module, self.mlp_class)

    def preload(self) -> None:
        importlib.import_module(self.module)


def _versions() -> str:
    import torch

    from .. import sources

    return f"torch {torch.__version__}, transformers {sources.version('transformers')}"


@functools.cache
def _kernelizable(mlp_class, layer: str):
    """A subclass of transformers' `mlp_class` that `kernels.kernelize` maps to our `layer`.

    transformers' LlamaMLP and GemmaMLP carry no `use_kernel_forward_from_hub` (5.24 checked), so
    kernelize would pass them by. Marking transformers' own class (kernels'
    replace_kernel_forward_from_hub) would change it for the whole process, every later model
    included; the kernelized copy's MLPs get this subclass instead, which changes nothing else.
    """
    from kernels import replace_kernel_forward_from_hub

    sub = type(layer, (mlp_class,), {"__module__": __name__})
    replace_kernel_forward_from_hub(sub, layer)
    return sub


def kernelized(lm, model: Model, layer: str, repo: str, device: str, for_compile: bool = False):
    """A copy of the causal LM `lm` whose every MLP runs layer `layer` of kernels_local/`repo`,
    through kernels.kernelize; nothing but the MLPs is touched. `for_compile`: kernelize for
    torch.compile (Mode.TORCH_COMPILE, which a layer must declare it supports)."""
    import copy

    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_mapping

    from .. import sources

    _, mlp_class = model.classes()
    out = copy.deepcopy(lm)
    sub = _kernelizable(mlp_class, layer)
    mlps = [m for m in out.modules() if isinstance(m, mlp_class)]
    mode = Mode.INFERENCE | Mode.TORCH_COMPILE if for_compile else Mode.INFERENCE
    repository = LocalLayerRepository(repo_path=sources.kernel_repo(repo), layer_name=layer)
    # Our mapping alone, and each MLP kernelized by itself: the norms and the rotary embedding,
    # which transformers marks for kernels of the Hub, keep their own forward.
    with use_kernel_mapping({layer: {device: repository}}, inherit_mapping=False):
        for mlp in mlps:
            mlp.__class__ = sub
            kernelize(mlp, mode=mode, device=device)
    # kernelize falls back to the original forward when no mapping or mode matches: that would time eager.
    kept = [m for m in mlps if getattr(m.forward, "__func__", sub.forward) is sub.forward]
    if not mlps or kept:
        raise RuntimeError(f"kernelize replaced {len(mlps) - len(kept)} of the {len(mlps)} "
                           f"{mlp_class.__name__} forwards with {layer} of kernels_local/{repo} on {device!r}")
    return out


def _compile(module, dynamic: bool):
    import torch

    # A fresh Dynamo per case, as _kinds.compiled does: transformers' forwards are code objects
    # shared by every case of the op. fullgraph: a graph break fails the case instead of timing
    # a model split into pieces.
    torch._dynamo.reset()
    return torch.compile(module, dynamic=dynamic, fullgraph=True)


def _compiled_source(source: str) -> str:
    return f"{source} + torch.compile (Inductor, fullgraph=True)"


def _ours_make(model: Model, repo: str, layer: str, interleave: bool, compile_: bool):
    def make(lm, device, dynamic: bool = False, **_):
        from .. import sources

        out = kernelized(lm, model, layer, repo, device, for_compile=compile_)
        if interleave:
            # once, at load time, outside any timing (as the dualgemm variants of the MLP ops)
            sources.local_kernel(repo).interleave_gate_up(out)
        source = f"{_versions()}; MLPs: {sources.local_kernel_source(repo)}"
        return (_compile(out, dynamic), _compiled_source(source)) if compile_ else (out, source)

    return make


def variants(model: Model, compiled_shapes: tuple[str, ...]) -> tuple[Variant, ...]:
    """The model ops' variants: the original eager and compiled, and the model kernelized with our
    act·mul layer (`ours`) or our dual GEMM layer (`dualgemm`), each eager and compiled.

    The compiled variants (role compiler: torch.compile'd, so built hermetically and gated with the
    compiler floor) are measured at `compiled_shapes` only: each compile of a model costs tens of
    seconds, on a CPU more than the test command can give (tests/test_registry.py counts them)."""
    need = dict(requires=TRANSFORMERS)
    cls = model.model_class

    def original(compile_):
        def make(lm, device, dynamic: bool = False, **_):
            source = f"{_versions()} {cls}"
            return (_compile(lm, dynamic), _compiled_source(source)) if compile_ else (lm, source)

        return make

    def kernel(name, role, repo, what, interleave=False, compile_=False, **where):
        from .. import sources

        return Variant(name, role, _ours_make(model, repo, model.layer, interleave, compile_),
                       origin=f"transformers' {cls}, its MLPs kernelized with kernels_local/{repo} ({what}, "
                              "loaded with `kernels`)" + (", then torch.compile, Inductor default mode" if compile_ else ""),
                       triton=True, preload=lambda: (model.preload(), sources.local_kernel(repo)), **need, **where)

    dual = "our Triton dual GEMM with the act·mul epilogue, gate and up weights interleaved at load time"
    return (
        Variant("eager", "baseline", original(False), origin=f"transformers' {cls}, PyTorch eager",
                preload=model.preload, **need),
        Variant("compiled", "compiler", original(True), only_shapes=compiled_shapes, preload=model.preload,
                origin=f"torch.compile of transformers' {cls}, Inductor default mode, fullgraph", **need),
        kernel("ours", "ours", model.repo, "our Triton act·mul kernel"),
        kernel("dualgemm", "ours", DUAL_GEMM_REPO, dual, interleave=True),
        kernel("ourscompiled", "compiler", model.repo, "our Triton act·mul kernel", compile_=True,
               only_shapes=compiled_shapes),
        kernel("dualgemmcompiled", "compiler", DUAL_GEMM_REPO, dual, interleave=True, compile_=True,
               only_shapes=compiled_shapes),
    )


def counts(model: Model, dims: dict) -> dict:
    """Parameters by part, for FLOPs and bytes: per layer (attention, MLP, norms) and the lm_head."""
    g = model.geometry_of(dims)
    d, h = dims["d"], dims["h"]
    q, kv = g.heads * g.head_dim, g.kv_heads * g.head_dim
    return {"attention": d * q + 2 * d * kv + q * d, "mlp": 3 * d * h, "norms": 2 * d, "head": d * g.vocab,
            "q": q, "vocab": g.vocab}


def workload(case, device, make, model: Model):
    """The causal LM at case's shape: batch 1, t tokens, no KV cache; out: the logits of every token."""
    import copy

    import torch

    from .. import workloads as w

    dims = case.shape.as_dict()
    t, d, layers = dims["t"], dims["d"], dims["l"]
    dtype = w.TORCH_DTYPES[case.dtype]
    lm_class, _ = model.classes()
    config = model.config_for(dims)
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the device: CPU init of large weights takes seconds
        lm = lm_class(config)
    lm = lm.to(dtype=dtype).eval().requires_grad_(False)
    made, source = make(lm)
    if isinstance(made, torch.nn.Module):
        made.requires_grad_(False)

    def fn(ids):
        return made(input_ids=ids, use_cache=False).logits

    def reference(inp):
        # The same weights upcast, built here and freed after: a resident float64 copy would hold
        # four times the model's memory through every timing of the case.
        ref = copy.deepcopy(lm).to(torch.float64)
        with torch.no_grad():
            out = ref(input_ids=inp[0], use_cache=False).logits
        del ref
        return (out,)

    n = counts(model, dims)
    causal_pairs = t * (t + 1) // 2  # query-key pairs a causal attention computes
    es = w.element_size(case)
    return w.Workload(
        case, fn,
        make_inputs=lambda seed: (torch.randint(0, n["vocab"], (1, t), generator=w.generator(seed, device),
                                                device=device),),
        reference=reference,
        # the GEMMs: per layer the projections, QKᵀ and PV over causal pairs, the MLP; then the lm_head.
        # Norms, rotary and softmax are left out (a few FLOPs per element).
        flops=layers * (2 * t * (n["attention"] + n["mlp"]) + 2 * 2 * causal_pairs * n["q"]) + 2 * t * n["head"],
        # every weight read once (the lm_head's too; t rows of the embedding), ids read, logits written;
        # activations and K/V are not counted because a perfectly fused model would not write them.
        bytes=es * (layers * (n["attention"] + n["mlp"] + n["norms"]) + d + n["head"] + t * d + t * n["vocab"]) + 8 * t,
        source=source,
        tolerance=LOGITS_TOLERANCE[case.dtype],
    )
