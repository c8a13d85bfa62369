"""Register this box with ASV so that GPU, driver, CUDA and library versions split its series.

ASV copies every key of a machine's entry in ~/.asv-machine.json into each result's `params`, and
draws one series per distinct params: a driver or torch upgrade then starts a new line in the
report instead of showing up as a step in the old one.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from .envinfo import environment, machine_slug

# The environment keys that become ASV machine params.
SPLIT_KEYS = ("gpu", "driver", "cuda", "torch", "triton", "liger_kernel", "kernels")


def machine_file() -> Path:
    return Path(os.path.expanduser("~")) / ".asv-machine.json"


def machine_entry(name: str | None = None) -> dict:
    env = environment()
    try:
        ram = str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        ram = "unknown"
    return {
        "machine": name or machine_slug(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": env["cpu"],
        "num_cpu": str(os.cpu_count()),
        "ram": ram,
        **{k: str(env[k]) for k in SPLIT_KEYS},
    }


def register(name: str | None = None, path: Path | None = None) -> dict:
    """Write (or refresh) this machine's entry in ASV's machine file; return the entry."""
    path = path or machine_file()
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc.setdefault("version", 1)
    entry = machine_entry(name)
    doc[entry["machine"]] = entry
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=4, sort_keys=True))
    tmp.replace(path)
    return entry
