"""Write a kernel repository's loadable variant, build/torch-universal/, from its sources.

    python kernels_local/build.py silu_mul           # rewrite kernels_local/silu_mul/build/torch-universal/
    python kernels_local/build.py silu_mul --check   # exit 1 and list the differences if it is stale

For a pure Python + Triton kernel (a `[torch-noarch]` build.toml) the variant is the
package under torch-ext/<python name>/ copied as is, plus a metadata.json written from
build.toml's [general] section: what kernel-builder would produce for such a kernel,
without its toolchain.  The committed variant is what `kernels.get_local_kernel` loads,
so the repository's tests check that it matches this script's output.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

KERNELS_LOCAL = Path(__file__).resolve().parent
VARIANT = "torch-universal"
# kernels parses metadata names with this pattern (kernels._rust.KernelName).
_NAME = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
# build.toml's torch section `pyext` default: the file types that make up the package.
_DEFAULT_PYEXT = ("py", "pyi")


class BuildError(ValueError):
    """build.toml or the source tree is not something this script can build."""


def read_config(kernel_dir: Path) -> dict:
    """build.toml's [general] section, checked for what a torch-universal build needs."""
    path = kernel_dir / "build.toml"
    with path.open("rb") as f:
        config = tomllib.load(f)
    general = config.get("general", {})
    name = general.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise BuildError(f"{path}: [general] name={name!r} must match {_NAME.pattern}")
    if not isinstance(general.get("version"), int) or isinstance(general.get("version"), bool):
        raise BuildError(f"{path}: [general] version={general.get('version')!r} must be an integer")
    if not isinstance(general.get("license"), str):
        raise BuildError(f"{path}: [general] license is required (an SPDX identifier)")
    backends = general.get("backends")
    # One variant directory holds one metadata.json with one backend type.
    if not isinstance(backends, list) or len(backends) != 1:
        raise BuildError(f"{path}: [general] backends={backends!r} must name exactly one backend for {VARIANT}")
    if "torch-noarch" not in config or "torch" in config or config.get("kernel"):
        raise BuildError(f"{path}: only a [torch-noarch] kernel (Python sources, no native code) can be built here")
    return general


def _sources(package_dir: Path, pyext) -> list[Path]:
    suffixes = {"." + ext for ext in pyext}
    files = [
        p.relative_to(package_dir)
        for p in package_dir.rglob("*")
        if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts
    ]
    return sorted(files, key=lambda p: p.as_posix())


def build(kernel_dir: Path, out_dir: Path) -> None:
    """Write the torch-universal variant of the kernel repository at kernel_dir into out_dir."""
    general = read_config(kernel_dir)
    python_name = general["name"].replace("-", "_")
    package_dir = kernel_dir / "torch-ext" / python_name
    files = _sources(package_dir, _DEFAULT_PYEXT)
    if Path("__init__.py") not in files:
        raise BuildError(f"{package_dir}: no __init__.py (build.toml's name decides the package directory)")

    # The id is the module name `kernels` imports the package under, and so the
    # torch.library namespace of its ops: a digest of the sources keeps two
    # versions of one kernel apart in a process, and identical sources together.
    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.as_posix().encode() + b"\0" + (package_dir / rel).read_bytes() + b"\0")
    metadata = {
        "name": general["name"],
        "id": f"_{python_name}_{digest.hexdigest()[:10]}",
        "version": general["version"],
        "license": general["license"],
        "python-depends": list(general.get("python-depends", [])),
        "backend": {"type": general["backends"][0]},
    }

    if out_dir.exists():
        shutil.rmtree(out_dir)
    for rel in files:
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package_dir / rel, out_dir / rel)
    (out_dir / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def differences(kernel_dir: Path) -> list[str]:
    """How the committed build/torch-universal differs from a fresh build (empty when it does not)."""
    committed = kernel_dir / "build" / VARIANT
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / VARIANT
        build(kernel_dir, fresh)
        want, have = _tree(fresh), _tree(committed) if committed.is_dir() else set()
        diffs = [f"missing: {p}" for p in sorted(want - have)]
        diffs += [f"not produced by the build: {p}" for p in sorted(have - want)]
        diffs += [f"differs: {p}" for p in sorted(want & have) if not filecmp.cmp(fresh / p, committed / p, shallow=False)]
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", help="directory name under kernels_local/, e.g. silu_mul")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the committed build is stale")
    args = parser.parse_args(argv)
    kernel_dir = KERNELS_LOCAL / args.kernel
    if args.check:
        diffs = differences(kernel_dir)
        for line in diffs:
            print(f"{args.kernel}/build/{VARIANT}: {line}")
        if diffs:
            print(f"run: python kernels_local/build.py {args.kernel}")
        return 1 if diffs else 0
    build(kernel_dir, kernel_dir / "build" / VARIANT)
    print(f"wrote {kernel_dir / 'build' / VARIANT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
