"""gated_dual_gemm: a gated MLP's gate and up projections in one Triton kernel with act(gate)·up in
its epilogue (GeGLU and SwiGLU), for the `kernels` loader."""

from . import layers
from ._dual_gemm import (ACTIVATIONS, CONFIGS, INTERLEAVED_CONFIGS, MIN_FUSED_TOKENS, TRAIN_INTERLEAVED_CONFIGS,
                         fused_pays, gate_up_act_mul, gate_up_act_mul_interleaved, interleave)
from .layers import deinterleave_gate_up, interleave_gate_up

__all__ = ["gate_up_act_mul", "gate_up_act_mul_interleaved", "interleave", "interleave_gate_up", "deinterleave_gate_up", "fused_pays",
           "layers", "ACTIVATIONS", "CONFIGS", "INTERLEAVED_CONFIGS", "TRAIN_INTERLEAVED_CONFIGS",
           "MIN_FUSED_TOKENS"]
