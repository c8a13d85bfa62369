"""gated_dual_gemm: a gated MLP's gate and up projections in one Triton kernel with act(gate)·up in
its epilogue (GeGLU and SwiGLU), for the `kernels` loader; and its FP8 (e4m3) inference path for
Hopper (quantize_rows_fp8, gated_dual_gemm_fp8)."""

from . import layers
from ._dual_gemm import (ACTIVATIONS, CONFIGS, INTERLEAVED_CONFIGS, MIN_FUSED_TOKENS, TRAIN_INTERLEAVED_CONFIGS,
                         fused_pays, gate_up_act_mul, gate_up_act_mul_interleaved, interleave)
from ._fp8 import (CONFIGS_FP8, FP8_DECODE_TOKENS, FP8_MAX, FP8_TINY, fp8_config, fp8_fallback_reason,
                   gated_dual_gemm_fp8, quantize_rows_fp8, quantize_rows_fp8_reference)
from .layers import deinterleave_gate_up, interleave_gate_up

__all__ = ["gate_up_act_mul", "gate_up_act_mul_interleaved", "interleave", "interleave_gate_up", "deinterleave_gate_up", "fused_pays",
           "layers", "ACTIVATIONS", "CONFIGS", "INTERLEAVED_CONFIGS", "TRAIN_INTERLEAVED_CONFIGS",
           "MIN_FUSED_TOKENS", "quantize_rows_fp8", "quantize_rows_fp8_reference", "gated_dual_gemm_fp8",
           "fp8_fallback_reason", "fp8_config", "CONFIGS_FP8", "FP8_DECODE_TOKENS", "FP8_MAX", "FP8_TINY"]
