"""Environment for the gelu_mul tests; runs before any test module is imported.

Both variables are read at import time (huggingface_hub reads HF_HUB_OFFLINE,
Triton's @jit reads TRITON_INTERPRET when the kernel module is loaded), so they
must be set before anything imports huggingface_hub, kernels or the kernel.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # loading a local kernel needs no network

import torch  # noqa: E402  (does not import triton)

if not torch.cuda.is_available():
    # No GPU: run the Triton kernels on CPU tensors through the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")
