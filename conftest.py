"""Root conftest: the process-wide settings (mlpbench/environment.py) before any test imports torch,
huggingface_hub or a Triton kernel, so tests reach no network and check Triton kernels on a CPU."""

from mlpbench import environment

environment.prepare()
environment.interpret_triton_without_gpu()

pytest_plugins = ["mlpbench.pytest_plugin"]
