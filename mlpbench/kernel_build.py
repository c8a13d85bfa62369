"""A kernel repository's loadable variant, build/torch-universal/, written from its sources.

For a pure Python + Triton kernel (a `[torch-noarch]` build.toml) the variant is the package under
torch-ext/<python name>/ copied as is, plus a metadata.json written from build.toml's [general]
section: what kernel-builder would produce for such a kernel, without its toolchain.

No build/ is committed (kernels-community commits none): `materialise` writes the variant into a
cache folder named by a digest of its content, and mlpbench.sources hands that folder to
`kernels.get_local_kernel`; `python kernels_local/build.py <name>` writes one into the repository
for whoever wants it there. This module needs only the standard library.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

VARIANT = "torch-universal"
# kernels parses metadata names with this pattern (kernels._rust.KernelName).
_NAME = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
# build.toml's torch section `pyext` default: the file types that make up the package.
_DEFAULT_PYEXT = ("py", "pyi")
# Hex digits of the content digest in a cache folder's name.
_KEY_LENGTH = 16


class BuildError(ValueError):
    """build.toml or the source tree is not something this module can build."""


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


def variant_files(kernel_dir: Path) -> dict[str, bytes]:
    """The torch-universal variant of the kernel repository at kernel_dir: relative path -> content."""
    general = read_config(kernel_dir)
    python_name = general["name"].replace("-", "_")
    package_dir = kernel_dir / "torch-ext" / python_name
    files = _sources(package_dir, _DEFAULT_PYEXT)
    if Path("__init__.py") not in files:
        raise BuildError(f"{package_dir}: no __init__.py (build.toml's name decides the package directory)")
    content = {rel.as_posix(): (package_dir / rel).read_bytes() for rel in files}

    # The id is the module name `kernels` imports the package under, and so the
    # torch.library namespace of its ops: a digest of the sources keeps two
    # versions of one kernel apart in a process, and identical sources together.
    digest = hashlib.sha256()
    for rel, data in content.items():
        digest.update(rel.encode() + b"\0" + data + b"\0")
    metadata = {
        "name": general["name"],
        "id": f"_{python_name}_{digest.hexdigest()[:10]}",
        "version": general["version"],
        "license": general["license"],
        "python-depends": list(general.get("python-depends", [])),
        "backend": {"type": general["backends"][0]},
    }
    content["metadata.json"] = (json.dumps(metadata, indent=2) + "\n").encode()
    return content


def _write(files: dict[str, bytes], out_dir: Path) -> None:
    for rel, data in files.items():
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (out_dir / rel).write_bytes(data)


def build(kernel_dir: Path, out_dir: Path) -> None:
    """Write the torch-universal variant of the kernel repository at kernel_dir into out_dir."""
    files = variant_files(kernel_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    _write(files, out_dir)


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _differences(want: dict[str, bytes], variant_dir: Path) -> list[str]:
    have = _tree(variant_dir) if variant_dir.is_dir() else set()
    diffs = [f"missing: {p}" for p in sorted(set(want) - have)]
    diffs += [f"not produced by the build: {p}" for p in sorted(have - set(want))]
    diffs += [f"differs: {p}" for p in sorted(set(want) & have) if (variant_dir / p).read_bytes() != want[p]]
    return diffs


def differences(kernel_dir: Path, variant_dir: Path | None = None) -> list[str]:
    """How variant_dir (default: the repository's own build/torch-universal) differs from a fresh build."""
    return _differences(variant_files(kernel_dir), variant_dir or kernel_dir / "build" / VARIANT)


def _key(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for rel, data in sorted(files.items()):
        digest.update(rel.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:_KEY_LENGTH]


def cache_key(kernel_dir: Path) -> str:
    """A digest of the variant's content: it changes with any source or metadata it is built from."""
    return _key(variant_files(kernel_dir))


def cache_dirs() -> list[Path]:
    """Where materialised variants go, in order of preference: the user's cache, then a private temp folder."""
    uid = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    # One level under the shared temp folder: a parent another user could create first would let them
    # swap what is below it between our check and the import.
    dirs = [Path(tempfile.gettempdir()) / f"mlpbench-{uid}-kernels"]
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    try:  # The XDG spec says to ignore a relative XDG_CACHE_HOME.
        dirs.insert(0, (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "mlpbench" / "kernels")
    except RuntimeError:  # no home folder (Path.home() found none)
        pass
    return dirs


def _private(root: Path) -> None:
    """Make root, refusing one that another user owns or can write: its code would be imported."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if hasattr(os, "getuid"):
        st = root.lstat()  # a symlink is refused: its target is not ours to vouch for
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PermissionError(f"{root} is a link, or owned or writable by another user")


def _publish(files: dict[str, bytes], repo: Path) -> None:
    """Write the variant under repo/build/ so that a reader sees no folder or a complete one."""
    root = repo.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{repo.name}.", dir=root))
    try:
        _write(files, tmp / "build" / VARIANT)
        try:
            os.rename(tmp, repo)
        except OSError:  # there already: another process's copy, or one that was edited
            if not _differences(files, repo / "build" / VARIANT):
                return
            stale = Path(tempfile.mkdtemp(prefix=f".{repo.name}.stale.", dir=root))
            os.rename(repo, stale / "old")
            os.rename(tmp, repo)
            shutil.rmtree(stale, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def materialise(kernel_dir: Path, cache_dir: Path | None = None) -> Path:
    """A kernel repository folder holding kernel_dir's build/torch-universal, for `kernels.get_local_kernel`.

    It is <cache>/<kernel dir name>-<cache_key>/, written once and reused while its content matches;
    cache_dir defaults to cache_dirs(), the first one that can be written.
    """
    files = variant_files(kernel_dir)
    name = f"{kernel_dir.resolve().name}-{_key(files)}"
    error: OSError | None = None
    for root in [cache_dir] if cache_dir is not None else cache_dirs():
        repo = root / name
        try:
            _private(root)
            # Reused only while byte-identical: a cached copy edited by hand is written again.
            if _differences(files, repo / "build" / VARIANT):
                _publish(files, repo)
            return repo
        except OSError as e:  # a read-only or foreign cache folder: try the next one
            error = e
    raise error
