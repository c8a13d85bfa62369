"""Root conftest: before any test imports huggingface_hub or Triton, importing mlpbench sets
HF_HUB_OFFLINE (mlpbench/__init__.py), and without a GPU Triton's interpreter is switched on (as
mlpbench/workloads.py does when a case is built), so Triton kernels can be checked on a CPU."""

import os

import mlpbench  # noqa: F401
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest_plugins = ["mlpbench.pytest_plugin"]
