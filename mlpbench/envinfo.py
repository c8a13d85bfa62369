"""The environment a result was measured in: GPU, driver, CUDA and library versions, and the box.

Every result carries this, and ASV gets it as machine/environment parameters, so a series splits
when any of it changes instead of mixing numbers from different stacks. The box (`box_id`) is not a
series key: device time of one GPU model agrees across boxes, host time does not, so the gate
compares host time between runs of one box only (mlpbench/judging/gate.py) and reads the box from each result.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess

import torch

PACKAGES = ("torch", "triton", "liger-kernel", "kernels")
BOX_UNKNOWN = 0  # box_id of a box that nothing identifies: never equal to another box for the gate
# Where a box's machine-id lives (systemd, then D-Bus). Containers and VMs made from one image often
# have an empty one, or the image's.
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


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


def _gpu_uuids() -> list[str]:
    """Every GPU's UUID, from nvidia-smi: one per physical GPU, and the same in every process of the
    box (nvidia-smi ignores CUDA_VISIBLE_DEVICES, so the shards of a run agree). [] without one."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=uuid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(line.strip() for line in out.splitlines() if line.strip().startswith("GPU-"))


def _machine_id() -> str:
    for path in MACHINE_ID_FILES:
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text:
            return text
    return ""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def box_identity(gpus: list[str], machine_id: str, hostname: str, cpu: str, cores: int | None) -> int:
    """The box id of these facts about a box: an integer below 2**52 (so ASV, which stores floats,
    keeps it exactly), or BOX_UNKNOWN when none of them tells this box from others.

    A GPU box is known by its GPUs' UUIDs: hostnames and machine-ids of VMs and containers made from
    one image are shared by many boxes, and a container's hostname changes with each start on the
    same box. A box without GPUs is known by its machine-id and hostname together; without a
    machine-id, by nothing. The CPU model and core count are mixed in either way: a box moved to
    other CPUs, or given fewer cores, is another box for host time."""
    if gpus:
        what = ["gpus=" + ",".join(sorted(gpus))]
    elif machine_id:
        what = [f"machine-id={machine_id}", f"host={hostname}"]
    else:
        return BOX_UNKNOWN
    what += [f"cpu={cpu}", f"cores={cores}"]
    digest = int(hashlib.sha256("\n".join(what).encode()).hexdigest()[:13], 16)
    return digest or 1  # 0 is BOX_UNKNOWN


@functools.cache
def box_id() -> int:
    """This box's id (box_identity of its GPUs, machine-id, hostname and CPU); BOX_UNKNOWN when nothing identifies it."""
    return box_identity(_gpu_uuids(), _machine_id(), platform.node(), _cpu_model(), os.cpu_count())


@functools.cache
def environment() -> dict:
    info = {
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "box_id": box_id(),
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


# Tokens of a GPU's marketing name that say how much memory it has, not which chip and board it is:
# "NVIDIA H100 80GB HBM3" is the SXM H100 every such board shares, so it files as "h100", while the
# PCIe and NVL boards keep their suffix (their memory bandwidth and power cap differ).
_MEMORY_TOKEN = re.compile(r"^(\d+GB|HBM\d*E?)$", re.IGNORECASE)


def gpu_slug(gpu: str) -> str:
    """The machine name of a GPU model: "NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100",
    "NVIDIA H100 PCIe" -> "h100-pcie", "NVIDIA A100-SXM4-80GB" -> "a100-sxm4"."""
    words = re.split(r"[^A-Za-z0-9]+", gpu.replace("NVIDIA ", ""))
    kept = [w for w in words if w and not _MEMORY_TOKEN.match(w)]
    return "-".join(kept).lower() or "gpu"


def machine_slug() -> str:
    """A short, filesystem-safe machine name: the GPU model (gpu_slug), or 'cpu-<arch>'."""
    env = environment()
    if env["device"] == "cuda":
        return gpu_slug(env["gpu"])
    return re.sub(r"[^A-Za-z0-9]+", "-", f"cpu-{platform.machine()}").strip("-").lower()
