"""Environment for the silu_mul tests; runs before any test module is imported.

Both variables are read once, at import (huggingface_hub reads HF_HUB_OFFLINE,
Triton's @jit reads TRITON_INTERPRET when the kernel module is loaded), so they
are set before anything imports huggingface_hub, kernels or the kernel.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # loading a local kernel needs no network

import torch  # noqa: E402  (does not import triton)

if not torch.cuda.is_available():
    # No GPU: run the Triton kernels on CPU tensors through the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def kernel():
    """The repository's build/torch-universal, loaded as users load it."""
    import kernels

    from mlpbench.sources import kernel_repo

    # No build/ is committed: mlpbench writes it from torch-ext/ into a cache folder keyed by the sources.
    return kernels.get_local_kernel(kernel_repo(REPO.name))
