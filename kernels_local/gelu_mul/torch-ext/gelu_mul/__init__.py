"""gelu_mul: fused GeLU(tanh)·mul Triton kernel (forward and backward) for the `kernels` loader."""

from . import layers
from ._gelu_mul import _CONFIG_TABLE, _launch_config, gelu_mul

__all__ = ["gelu_mul", "layers"]
