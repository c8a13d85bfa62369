"""The process-wide settings that torch, Triton and huggingface_hub read from the environment.

Importing mlpbench sets none of them: the entry points call these functions, the CLI (`main`), the
pytest plugin (`pytest_configure`) and the repository's conftest.py, benchmarks/__init__.py (ASV's
processes), and the scripts that build cases. An explicit value in the environment always wins.
"""

from __future__ import annotations

import os


def prepare() -> None:
    """Set, before anything imports torch or huggingface_hub (this imports neither):

    - PYTORCH_NVML_BASED_CUDA_CHECK=1: torch.cuda.is_available() asks NVML and leaves CUDA
      uninitialised, so processes forked later (ASV forks one per benchmark) can still use the GPU;
    - HF_HUB_OFFLINE=1, read once when huggingface_hub is imported: nothing reaches the network
      unless MLPBENCH_HUB=1 asks for the Hub.
    """
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    if os.environ.get("MLPBENCH_HUB") != "1":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def interpret_triton_without_gpu() -> None:
    """Set TRITON_INTERPRET=1 where torch sees no GPU, so Triton kernels are checked on a CPU.

    Triton reads it when a kernel is decorated, so call this before any kernel module (ours,
    Liger's) is imported; runner.skip_reason reads it too. It imports torch: call prepare() first.
    """
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
