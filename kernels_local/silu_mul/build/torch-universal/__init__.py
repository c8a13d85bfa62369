"""silu_mul: fused silu(gate)·up Triton kernel (SwiGLU's elementwise step), forward and backward, for the `kernels` loader."""

from . import layers
from ._silu_mul import silu_mul

__all__ = ["silu_mul", "layers"]
