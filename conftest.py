"""Root conftest: importing mlpbench first sets HF_HUB_OFFLINE and, without a GPU, TRITON_INTERPRET
(see mlpbench/__init__.py) before any test imports huggingface_hub or Triton."""

import mlpbench  # noqa: F401

pytest_plugins = ["mlpbench.pytest_plugin"]
