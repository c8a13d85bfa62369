"""Where the Triton variants come from: our kernel repository, and Liger (package by default, Hub on request).

Every result records the source string these functions return, so a number can be traced to the
code that produced it.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import os
from pathlib import Path

import torch
from torch import nn

KERNEL_REPO = Path(__file__).resolve().parent.parent / "kernels_local" / "gelu_mul"
LIGER_HUB_REPO = "kernels-community/liger-kernels"
LIGER_HUB_VERSION = 1  # a pinned major version: Hub code is never taken unpinned
LIGER_SOURCES = ("package", "hub")


def liger_source() -> str:
    """'package' (default, no network) or 'hub' (MLPBENCH_LIGER_SOURCE=hub, needs the Hub)."""
    src = os.environ.get("MLPBENCH_LIGER_SOURCE", "package")
    if src not in LIGER_SOURCES:
        raise ValueError(f"MLPBENCH_LIGER_SOURCE={src!r}; valid: {', '.join(LIGER_SOURCES)}")
    return src


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def ours():
    """Our gelu_mul kernel repository, loaded through `kernels` from the local folder (no network)."""
    import kernels

    return kernels.get_local_kernel(KERNEL_REPO)


def ours_source() -> str:
    return f"kernels_local/gelu_mul via kernels {_version('kernels')} get_local_kernel"


def liger_description() -> str:
    if liger_source() == "hub":
        return f"{LIGER_HUB_REPO} version={LIGER_HUB_VERSION} via kernels {_version('kernels')}"
    return f"liger-kernel {_version('liger-kernel')} (package)"


def liger_gelu_mul():
    """Liger's GeLU·mul autograd op (forward kernel `_geglu_tanh_forward_kernel`)."""
    if liger_source() == "hub":
        raise NotImplementedError(
            "the Hub source is used for the liger mlp layer only; gelu_mul/liger needs the package"
        )
    from liger_kernel.ops.geglu import LigerGELUMulFunction

    return LigerGELUMulFunction.apply


def _kernelized(model: nn.Module, layer_repository, device: str) -> nn.Module:
    from kernels import Mode, kernelize, use_kernel_mapping

    mapping = {"GeGLUMLP": {device: layer_repository}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        return kernelize(model, mode=Mode.INFERENCE, device=device)


def ours_mlp(eager: nn.Module, device: str) -> nn.Module:
    """A copy of the eager GeGLU MLP whose forward `kernels.kernelize` swapped for our layer."""
    from kernels import LocalLayerRepository

    repo = LocalLayerRepository(repo_path=KERNEL_REPO, layer_name="GeGLUMLP")
    model = _kernelized(copy.deepcopy(eager), repo, device)
    # kernelize falls back to the original forward when no mapping matches: that would time eager.
    if getattr(model.forward, "__func__", None) is type(eager).forward:
        raise RuntimeError(f"kernelize kept the eager forward of {type(eager).__name__} on {device!r}")
    return model


def liger_mlp(eager: nn.Module, dim: int, hidden: int) -> nn.Module:
    """Liger's GeGLU MLP with the eager module's weights (shared storage, not a copy)."""
    if liger_source() == "hub":
        from kernels import LayerRepository

        repo = LayerRepository(repo_id=LIGER_HUB_REPO, layer_name="LigerGEGLUMLP", version=LIGER_HUB_VERSION)
        return _kernelized(copy.deepcopy(eager), repo, eager.gate_proj.weight.device.type)
    from types import SimpleNamespace

    from liger_kernel.transformers.geglu import LigerGEGLUMLP

    cfg = SimpleNamespace(hidden_size=dim, intermediate_size=hidden, hidden_act="gelu_pytorch_tanh")
    with torch.device("meta"):  # its own weights are replaced below: don't spend time initialising them
        liger = LigerGEGLUMLP(cfg)
    for name in ("gate_proj", "up_proj", "down_proj"):
        getattr(liger, name).weight = getattr(eager, name).weight
    return liger
