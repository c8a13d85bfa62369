"""mlpbench: benchmarks of a transformer MLP's building blocks on GPUs (see README.md).

Importing the package sets two process-wide defaults, before anything imports torch or
huggingface_hub (both read them once, at import):

- PYTORCH_NVML_BASED_CUDA_CHECK=1: torch.cuda.is_available() asks NVML and leaves CUDA
  uninitialised, so processes forked later (ASV forks one per benchmark) can still use the GPU.
- HF_HUB_OFFLINE=1: nothing reaches the network unless the user asks (MLPBENCH_HUB=1 leaves the
  Hub reachable; an explicit HF_HUB_OFFLINE is respected either way).

It imports nothing else: reading results (`mlpbench check`, `mlpbench report`) needs no torch.
Triton's interpreter is switched on for CPU-only machines where cases are built (workloads.py).
"""

import os

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

if os.environ.get("MLPBENCH_HUB") != "1":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

__version__ = "0.1.0"
