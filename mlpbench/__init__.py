"""mlpbench: benchmarks of a transformer MLP's building blocks on GPUs (see README.md).

Importing the package sets two process-wide defaults, before anything imports huggingface_hub or
Triton (both read them once, at import):

- HF_HUB_OFFLINE=1: nothing reaches the network unless the user asks (MLPBENCH_HUB=1 leaves the
  Hub reachable; an explicit HF_HUB_OFFLINE is respected either way).
- TRITON_INTERPRET=1 when no GPU is present, so Triton kernels can be checked on a CPU.

torch is optional at this level: the benchmarks need it, the result readers and the asset fetcher do not.
"""

import os

# torch.cuda.is_available() through NVML does not initialise CUDA, so processes forked later
# (ASV forks one per benchmark) can still use the GPU.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

if os.environ.get("MLPBENCH_HUB") != "1":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch  # noqa: E402  (after the environment defaults above; torch imports neither library)
except ImportError:
    # Tools that need no torch (`python -m mlpbench.asv_offline fetch`, reading results) still import
    # this package; without torch there is no Triton to interpret either.
    torch = None

if torch is not None and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

__version__ = "0.1.0"
