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

The versions a result is filed under are read by the environment's own interpreter, which its
benchmark processes are, just before they run: in an environment ASV made, ASV's own process may
import another torch than the one measuring. A torch other than the one the environment's name
promises stops the run (`check_environment_name`, in the plugin and in every benchmark process).
The `python` key is the interpreter's version, not its path, so one box is one series wherever the
checkout lies.
"""

from __future__ import annotations

import json
import os
import platform
import re
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
    from ..envinfo import environment, machine_slug

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


class EnvironmentMismatch(RuntimeError):
    """The environment's name promises one torch and another one was imported."""


def promised_torch(env_name: str) -> str | None:
    """The torch version an ASV environment's name carries (`virtualenv-py3.11-torch2.13.0`), or None."""
    m = re.search(r"(?:^|-)torch([0-9][^-]*)(?:-|$)", env_name or "")
    return m.group(1) if m else None


def check_environment_name(env_name: str | None, torch_version: str) -> None:
    """Raise EnvironmentMismatch when `env_name` names a torch release other than `torch_version`
    (a local label such as +cpu is the build of that release, not another one)."""
    promised = promised_torch(env_name or "")
    if promised and promised.split("+")[0] != torch_version.split("+")[0]:
        raise EnvironmentMismatch(
            f"ASV environment {env_name!r} promises torch {promised}, but torch {torch_version} was imported: "
            "its results would be filed under the wrong torch. Remove the environment (asv.conf.json's "
            "env_dir) and run again.")


def running_versions() -> dict:
    """The series keys as this interpreter imports them, and its Python version (major.minor)."""
    import torch

    from ..envinfo import environment

    check_environment_name(os.environ.get("ASV_ENV_NAME"), torch.__version__)
    env = environment()
    return {k: str(env[k]) for k in SPLIT_KEYS} | {"python": ".".join(platform.python_version_tuple()[:2])}


_RUNNING_VERSIONS = "import json; from mlpbench.asv.machine import running_versions as v; print(json.dumps(v()))"


def _environment_versions(env) -> dict:
    """`running_versions()` asked of an ASV environment's interpreter; raises EnvironmentMismatch."""
    try:
        out = env.run(["-c", _RUNNING_VERSIONS], env=os.environ | env._global_env_vars)
    except Exception as exc:  # noqa: BLE001 - ASV's ProcessError carries the child's stderr
        if "EnvironmentMismatch" in str(exc):
            raise EnvironmentMismatch(str(exc).strip().splitlines()[-1]) from None
        raise RuntimeError(f"could not read the versions in environment {env.name}: {exc}") from None
    return json.loads(out.strip().splitlines()[-1])


def _write(path: Path, doc: dict) -> None:
    # Written whole and renamed in: a process reading the file never sees half of it.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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

    from ..envinfo import machine_slug

    cls = asv_machine.Machine
    if getattr(cls, "_mlpbench", False):
        return

    # ASV rewrites the machine file on every load, in place: with several `asv run`s at once (one per
    # GPU) a reader could see it half written. Written whole and renamed in instead.
    def save(c, machine_name, machine_info, _path=None):
        path = Path(_path or c.get_machine_file_path())
        doc = json.loads(path.read_text()) if path.is_file() else {}
        _write(path, doc | {machine_name: machine_info, "version": c.api_version})

    asv_machine.MachineCollection.save = classmethod(save)
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

    from asv import util
    from asv.commands import run as run_command

    stock_run_benchmarks = run_command.run_benchmarks

    def run_benchmarks(benchmarks, env, results=None, **kwargs):
        if results is not None:
            try:
                results._params.update(_environment_versions(env))
            except EnvironmentMismatch as exc:
                raise util.UserError(str(exc)) from None
        return stock_run_benchmarks(benchmarks, env, results=results, **kwargs)

    run_command.run_benchmarks = run_benchmarks
    cls._mlpbench = True
