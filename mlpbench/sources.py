"""Where the Triton variants come from: our kernel repositories, and Liger (package by default, Hub on request).

Every result records the source string these functions return, so a number can be traced to the
code that produced it. Which repository or Liger op an op uses is said in its op module
(mlpbench/ops/); this module only knows how to load them.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import os
from pathlib import Path

from mlpbench import kernel_build

KERNELS_LOCAL = Path(__file__).resolve().parent.parent / "kernels_local"
LIGER_HUB_REPO = "kernels-community/liger-kernels"
LIGER_HUB_VERSION = 1  # a pinned major version: Hub code is never taken unpinned
LIGER_SOURCES = ("package", "hub")


def liger_source() -> str:
    """'package' (default, no network) or 'hub' (MLPBENCH_LIGER_SOURCE=hub, needs the Hub)."""
    src = os.environ.get("MLPBENCH_LIGER_SOURCE", "package")
    if src not in LIGER_SOURCES:
        raise ValueError(f"MLPBENCH_LIGER_SOURCE={src!r}; valid: {', '.join(LIGER_SOURCES)}")
    return src


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def kernel_repo(name: str) -> Path:
    """The folder `kernels` loads our repository `name` from: its build/torch-universal, written from
    kernels_local/<name>'s build.toml and torch-ext/ into a cache folder keyed by their content
    (nothing built is committed or shipped, so a checkout, an editable install and a wheel load alike)."""
    path = KERNELS_LOCAL / name
    if not (path / "build.toml").is_file():
        raise FileNotFoundError(f"no kernel repository {name!r} at {path} (expected a build.toml)")
    return kernel_build.materialise(path)


@functools.cache
def local_kernel(name: str):
    """A kernel repository under kernels_local/, loaded through `kernels` from its built folder (no network)."""
    import kernels

    return kernels.get_local_kernel(kernel_repo(name))


def local_kernel_source(name: str) -> str:
    return f"kernels_local/{name} via kernels {version('kernels')} get_local_kernel"


def liger_description() -> str:
    if liger_source() == "hub":
        return f"{LIGER_HUB_REPO} version={LIGER_HUB_VERSION} via kernels {version('kernels')}"
    return f"liger-kernel {version('liger-kernel')} (package)"


def kernelized(model, layer_name: str, layer_repository, device: str, training: bool = False):
    """A copy of `model` whose forward `kernels.kernelize` swapped for `layer_repository`'s layer
    (Mode.TRAINING when `training`: a layer with a backward, as a fine-tuning run asks for)."""
    from kernels import Mode, kernelize, use_kernel_mapping

    eager_forward = type(model).forward
    mapping = {layer_name: {device: layer_repository}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        out = kernelize(copy.deepcopy(model), mode=Mode.TRAINING if training else Mode.INFERENCE, device=device)
    # kernelize falls back to the original forward when no mapping matches: that would time eager.
    if getattr(out.forward, "__func__", None) is eager_forward:
        raise RuntimeError(f"kernelize kept the eager forward of {type(model).__name__} on {device!r}")
    return out


def local_layer(model, layer_name: str, repo: str, device: str, training: bool = False):
    """`model` with its forward replaced by layer `layer_name` of our repository `repo`."""
    from kernels import LocalLayerRepository

    return kernelized(model, layer_name, LocalLayerRepository(repo_path=kernel_repo(repo), layer_name=layer_name),
                      device, training)


def liger_hub_layer(model, layer_name: str, liger_layer: str):
    """`model` with its forward replaced by Liger's `liger_layer` from the Hub (pinned version)."""
    from kernels import LayerRepository

    repo = LayerRepository(repo_id=LIGER_HUB_REPO, layer_name=liger_layer, version=LIGER_HUB_VERSION)
    return kernelized(model, layer_name, repo, next(model.parameters()).device.type)
