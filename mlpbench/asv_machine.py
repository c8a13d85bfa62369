"""One name and one series per box: this machine's ASV entry, and the ASV plugin that uses it.

ASV copies every key of a machine's entry in ~/.asv-machine.json into each result's parameters and
draws one series per distinct set of them. The entry therefore holds what changes device time: the
GPU model, driver, CUDA, torch, triton, liger-kernel and kernels versions (SPLIT_KEYS), so an upgrade
starts a new line instead of drawing a step in the old one. On a GPU box ASV's own host fields
(cpu, num_cpu, ram) are set to "any": device time does not depend on the host's cores or memory,
and two hosts of the same GPU (16 and 32 cores, say) must make one line, not two. On a CPU box the
host is what is measured, so they hold the real values. The name is the GPU model ("h200"), or
"cpu-<arch>".

As an ASV plugin (asv.conf.json's "plugins"), `setup()` makes ASV's own commands use this entry:
`asv machine --yes` writes it, `asv run` without `--machine` finds it under the same name, and a
run refreshes its SPLIT_KEYS from the environment, so a registered box never records under stale
versions.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

# The environment keys that become ASV series keys.
SPLIT_KEYS = ("gpu", "driver", "cuda", "torch", "triton", "liger_kernel", "kernels")
HOST_FIELDS = ("cpu", "num_cpu", "ram")
ANY_HOST = "any"
_DESCRIPTIONS = {
    "gpu": "GPU model (device time depends on it)",
    "driver": "NVIDIA driver version",
    "cuda": "CUDA version torch was built with",
    "torch": "torch version", "triton": "triton version",
    "liger_kernel": "liger-kernel version", "kernels": "kernels version",
}


def machine_file() -> Path:
    return Path(os.path.expanduser("~")) / ".asv-machine.json"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_entry(name: str | None = None) -> dict:
    from .envinfo import environment, machine_slug

    env = environment()
    if env["device"] == "cuda":
        host = dict.fromkeys(HOST_FIELDS, ANY_HOST)
    else:
        try:
            ram = str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            ram = "unknown"
        host = {"cpu": _cpu_model(), "num_cpu": str(os.cpu_count()), "ram": ram}
    return {
        "machine": name or machine_slug(),
        "os": platform.system(),  # not the kernel release: it changes with every host update
        "arch": platform.machine(),
        **host,
        **{k: str(env[k]) for k in SPLIT_KEYS},
    }


def _write(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=4, sort_keys=True))
    tmp.replace(path)


def register(name: str | None = None, path: Path | None = None, overrides: dict | None = None) -> dict:
    """Write (or refresh) this machine's entry in ASV's machine file; return the entry."""
    path = path or machine_file()
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc.setdefault("version", 1)
    entry = machine_entry(name) | (overrides or {})
    doc[entry["machine"]] = entry
    _write(path, doc)
    return entry


def setup() -> None:
    """ASV plugin hook (called when asv.conf.json lists this module): ASV's machine commands use
    `machine_entry`. ASV builds `asv machine`'s argument defaults before plugins load, so values
    equal to ASV's stock defaults count as not given."""
    from asv import machine as asv_machine
    from asv.commands import machine as machine_command

    from .envinfo import machine_slug

    cls = asv_machine.Machine
    if getattr(cls, "_mlpbench", False):
        return
    stock_defaults = cls.get_defaults
    known = {name for name, _ in cls.fields}
    cls.fields = cls.fields + [(k, _DESCRIPTIONS[k]) for k in SPLIT_KEYS if k not in known]
    cls.get_defaults = staticmethod(machine_entry)
    cls.get_unique_machine_name = classmethod(lambda c: machine_slug())
    stock_load = cls.load.__func__

    def load(c, *args, **kwargs):
        self = stock_load(c, *args, **kwargs)
        if self.machine == machine_slug():
            fresh = {k: v for k, v in machine_entry(self.machine).items() if k in SPLIT_KEYS + HOST_FIELDS}
            if any(self.__dict__.get(k) != v for k, v in fresh.items()):
                self.__dict__.update(fresh)
                asv_machine.MachineCollection.save(self.machine, self.__dict__, _path=kwargs.get("_path"))
        return self

    cls.load = classmethod(load)
    stock_run = machine_command.Machine.run.__func__

    def run(c, **kwargs):
        stock = stock_defaults()
        given = {k: v for k, v in kwargs.items() if k in stock and v != stock[k]}
        if kwargs.get("yes"):
            entry = register(given.get("machine"), overrides=given)
            print(f"asv machine: {entry['machine']} registered in {machine_file()}: "
                  + ", ".join(f"{k}={entry[k]}" for k in ("os", "arch", *HOST_FIELDS, *SPLIT_KEYS)))
            return None
        return stock_run(c, **(kwargs | {k: v for k, v in machine_entry().items() if k not in given}))

    machine_command.Machine.run = classmethod(run)
    cls._mlpbench = True
