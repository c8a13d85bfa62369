"""The environment a result was measured in: GPU, driver, CUDA and library versions.

Every result carries this, and ASV gets it as machine/environment parameters, so a series splits
when any of it changes instead of mixing numbers from different stacks.
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import re
import shutil
import subprocess

import torch

PACKAGES = ("torch", "triton", "liger-kernel", "kernels")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _driver_version() -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return "unknown"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


@functools.cache
def environment() -> dict:
    info = {
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        **{pkg.replace("-", "_"): _version(pkg) for pkg in PACKAGES},
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info |= {
            "gpu": props.name,
            "gpu_count": torch.cuda.device_count(),
            "gpu_memory_bytes": props.total_memory,
            "gpu_sm_count": props.multi_processor_count,
            "driver": _driver_version(),
            "cuda": torch.version.cuda or "unknown",
        }
    else:
        info |= {"gpu": "none", "driver": "none", "cuda": "none"}
    return info


def machine_slug() -> str:
    """A short, filesystem-safe machine name: the GPU model, or 'cpu-<arch>'."""
    env = environment()
    name = env["gpu"] if env["device"] == "cuda" else f"cpu-{platform.machine()}"
    return re.sub(r"[^A-Za-z0-9]+", "-", name.replace("NVIDIA ", "")).strip("-").lower()
