"""mlpbench: benchmarks of a transformer MLP's building blocks on GPUs (see README.md).

Importing the package imports nothing and changes no environment variable: reading results
(`mlpbench check`, `mlpbench report`) needs no torch, and the process-wide settings that torch,
Triton and huggingface_hub read are set by the entry points (mlpbench/environment.py).
"""

__version__ = "0.8.0"
