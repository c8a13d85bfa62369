"""The GeGLU MLP in its model: transformers' GemmaForCausalLM at Gemma-7B's layer dims, a few layers."""

from __future__ import annotations

import functools

from . import Op, shape
from ._model import Geometry, Model, variants, workload

MODEL = Model(
    module="transformers.models.gemma.modeling_gemma", config_class="GemmaConfig",
    model_class="GemmaForCausalLM", mlp_class="GemmaMLP",
    layer="GeGLUMLP", repo="gelu_mul",  # as the mlp op's `ours` and `dualgemm`
    config=(("hidden_act", "gelu_pytorch_tanh"), ("rope_theta", 10000.0), ("rms_norm_eps", 1e-6),
            ("max_position_embeddings", 8192), ("tie_word_embeddings", True)),
    geometry=(
        # Gemma-7B: 16 heads of 256 (more than d / heads), as many KV heads. Vocab 8192 instead of
        # 256000: the MLP is the subject, and at 256000 the (tied) lm_head would hold more weights
        # than two layers' MLPs; at 8192 it is a twentieth of them.
        (3072, Geometry(heads=16, kv_heads=16, head_dim=256, vocab=8192)),
        (64, Geometry(heads=4, kv_heads=4, head_dim=32, vocab=256)),  # CPU-sized, heads wider than d / heads
    ),
)

PREFILL = "t2048-d3072-h24576-l2"
DECODE = "t1-d3072-h24576-l2"

# t = tokens (batch 1), d = model dim, h = MLP hidden size, l = layers; heads and vocab come with d
# (MODEL.geometry). Append shapes only: a changed id loses its history.
OP = Op(
    name="gemma_model",
    what="transformers' GemmaForCausalLM (GeGLU MLPs), random weights, no KV cache: logits of every token",
    dims=("t", "d", "h", "l"),
    bound="compute",
    rank=70,
    # Compiled variants at the GPU shapes only: a model's compile costs the CPU test command too much.
    variants=variants(MODEL, compiled_shapes=(PREFILL, DECODE)),
    shapes=(
        shape(("quick",), "a two-layer Gemma at CPU size (Gemma's 1:8 MLP ratio, heads wider than d / heads), "
              "16 tokens: checks the kernelized model against float64 in CI", ("fp32", "bf16"),
              t=16, d=64, h=512, l=2),
        # bf16 only: how the model is served; fp32 would time GEMMs nobody serves it with, and
        # each dtype costs every compiled variant another model compile.
        shape(("standard", "full"), "prefill: 2048 tokens through two layers of Gemma-7B (3072 / 24576, 16 heads "
              "of 256, gelu_pytorch_tanh); two layers keep each compile to a two-layer graph, and the MLP's share of "
              "the model is a layer's", ("bf16",), t=2048, d=3072, h=24576, l=2),
        shape(("standard", "full"), "decode-sized: one token through the same two layers (no KV cache); weight- and "
              "host-bound, where a graph break or a slow launch shows", ("bf16",), t=1, d=3072, h=24576, l=2),
    ),
    build=functools.partial(workload, model=MODEL),
    probe_compile=False,  # a model's cold compile costs minutes of the compile benchmarks; the MLP's is timed
)
