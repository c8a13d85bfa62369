"""The SwiGLU MLP in its model: transformers' LlamaForCausalLM at Llama-3-8B's layer dims, a few layers."""

from __future__ import annotations

import functools

from . import Op, shape
from ._model import Geometry, Model, variants, workload

MODEL = Model(
    module="transformers.models.llama.modeling_llama", config_class="LlamaConfig",
    model_class="LlamaForCausalLM", mlp_class="LlamaMLP",
    layer="SwiGLUMLP", repo="silu_mul",  # as the swiglu_mlp op's `ours` and `dualgemm`
    config=(("hidden_act", "silu"), ("rope_theta", 500000.0), ("rms_norm_eps", 1e-5),
            ("max_position_embeddings", 8192), ("tie_word_embeddings", False)),
    geometry=(
        # Llama-3-8B: 32 heads of 128, 8 KV heads. Vocab 8192 instead of 128256: the MLP is the
        # subject, and at 128256 the lm_head would hold (and multiply by) more weights than two
        # layers' MLPs; at 8192 it is under a tenth of them.
        (4096, Geometry(heads=32, kv_heads=8, head_dim=128, vocab=8192)),
        (64, Geometry(heads=4, kv_heads=2, head_dim=16, vocab=256)),  # CPU-sized, GQA kept
    ),
)

PREFILL = "t2048-d4096-h14336-l2"
DECODE = "t1-d4096-h14336-l2"

# t = tokens (batch 1), d = model dim, h = MLP hidden size, l = layers; heads and vocab come with d
# (MODEL.geometry). Append shapes only: a changed id loses its history.
OP = Op(
    name="llama_model",
    what="transformers' LlamaForCausalLM (SwiGLU MLPs), random weights, no KV cache: logits of every token",
    dims=("t", "d", "h", "l"),
    bound="compute",
    rank=60,
    # Compiled variants at the GPU shapes only: a model's compile costs the CPU test command too much.
    variants=variants(MODEL, compiled_shapes=(PREFILL, DECODE)),
    shapes=(
        shape(("quick",), "a two-layer Llama at CPU size (Llama-3's 1:3.5 MLP ratio, grouped KV heads), "
              "16 tokens: checks the kernelized model against float64 in CI", ("fp32", "bf16"),
              t=16, d=64, h=224, l=2),
        # bf16 only: how the model is served; fp32 would time GEMMs nobody serves it with, and
        # each dtype costs every compiled variant another model compile.
        shape(("standard", "full"), "prefill: 2048 tokens through two layers of Llama-3-8B (4096 / 14336, 32 "
              "heads, 8 KV heads, rope_theta 500000); two layers keep each compile to a two-layer graph, and the "
              "MLP's share of the model is a layer's", ("bf16",), t=2048, d=4096, h=14336, l=2),
        shape(("standard", "full"), "decode-sized: one token through the same two layers (no KV cache); weight- and "
              "host-bound, where a graph break or a slow launch shows", ("bf16",), t=1, d=4096, h=14336, l=2),
    ),
    build=functools.partial(workload, model=MODEL),
    probe_compile=False,  # a model's cold compile costs minutes of the compile benchmarks; the MLP's is timed
)
