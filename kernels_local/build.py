"""Write a kernel repository's loadable variant, build/torch-universal/, from its sources.

    python kernels_local/build.py --all              # every repository under kernels_local/ (scripts/setup.sh runs this)
    python kernels_local/build.py silu_mul           # write kernels_local/silu_mul/build/torch-universal/
    python kernels_local/build.py silu_mul --check   # exit 1 and list the differences if it is missing or stale
    python kernels_local/build.py path/to/repository # a repository elsewhere (a folder holding build.toml)

For a repository under kernels_local/ it first writes the files its package shares with the others
(SHARED: the launch path, _fast_launch.py), each a copy of the one source in kernels_local/common/
under a header that says so; `--check` names a copy that differs from its source. A repository is
loaded, and published, on its own, so it carries its copies rather than importing them from outside.

mlpbench does not need build/: it loads the kernels from a variant it writes into a cache folder keyed
by the sources (mlpbench/kernel_build.py, which holds the build itself). It is for whoever loads a
repository by its path, `kernels.get_local_kernel(Path("kernels_local/silu_mul"))` or
`kernels benchmark ./kernels_local/silu_mul`, which look for build/<variant>/ there; build/ is not
committed (.gitignore), as in kernels-community's repositories, so scripts/setup.sh writes it, and
after an edit to torch-ext/ or common/ it is written again with this command (`--check` tells whether
it is due).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

KERNELS_LOCAL = Path(__file__).resolve().parent

# The mlpbench beside this file, installed or not: the build logic of the same checkout.
sys.path.insert(0, str(KERNELS_LOCAL.parent))
from mlpbench import kernel_build  # noqa: E402

VARIANT = kernel_build.VARIANT
# The folder under kernels_local/ holding the one source of each shared file, and the files every
# repository under kernels_local/ carries a copy of in torch-ext/<package>/.
COMMON = "common"
SHARED = ("_fast_launch.py",)
REGENERATE = "python kernels_local/build.py --all"


def _header(name: str) -> bytes:
    # Comments only: the copy's module docstring stays its first statement.
    return (f"# Generated from kernels_local/{COMMON}/{name}: edit that file, then write this copy again with\n"
            f"#   {REGENERATE}\n").encode()


def shared_copies(kernel_dir: Path) -> dict[Path, bytes]:
    """The copies of the shared files kernel_dir's package holds: path -> content (header, then source)."""
    package = kernel_dir / "torch-ext" / kernel_build.read_config(kernel_dir)["name"].replace("-", "_")
    return {package / name: _header(name) + (KERNELS_LOCAL / COMMON / name).read_bytes() for name in SHARED}


def stale_copies(kernel_dir: Path) -> list[Path]:
    """The copies in kernel_dir that are missing or differ from what their source makes."""
    return [path for path, data in shared_copies(kernel_dir).items()
            if not path.is_file() or path.read_bytes() != data]


def write_copies(kernel_dir: Path) -> list[Path]:
    """Write kernel_dir's stale copies (only those, so that a current one keeps its mtime); return them."""
    copies = shared_copies(kernel_dir)
    stale = stale_copies(kernel_dir)
    for path in stale:
        path.write_bytes(copies[path])
    return stale


def _shown(path: Path) -> str:
    return str(path.relative_to(KERNELS_LOCAL.parent)) if path.is_relative_to(KERNELS_LOCAL.parent) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", nargs="*",
                        help="a directory name under kernels_local/ (e.g. silu_mul), or a repository's path")
    parser.add_argument("--all", action="store_true", help="every repository under kernels_local/ (a folder with build.toml)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if build/ or a shared file's copy is missing or stale")
    args = parser.parse_args(argv)
    names = list(args.kernel)
    if args.all:
        names += [p.parent.name for p in sorted(KERNELS_LOCAL.glob("*/build.toml"))]
    if not names:
        parser.error("name a kernel repository, or pass --all")
    kernel_dirs = []
    for name in names:
        kernel_dir = KERNELS_LOCAL / name
        if not (kernel_dir / "build.toml").is_file():
            kernel_dir = Path(name)
        if not (kernel_dir / "build.toml").is_file():
            parser.error(f"no build.toml in {KERNELS_LOCAL / name} or {kernel_dir}")
        kernel_dirs.append((name, kernel_dir))
    status = 0
    for name, kernel_dir in kernel_dirs:
        out = kernel_dir / "build" / VARIANT
        # A repository elsewhere (a published one, say) is standalone: its copies are its own.
        here = kernel_dir.resolve().parent == KERNELS_LOCAL.resolve()
        if args.check:
            stale = stale_copies(kernel_dir) if here else []
            for path in stale:
                print(f"{_shown(path)}: missing, or not what kernels_local/{COMMON}/{path.name} makes")
            diffs = kernel_build.differences(kernel_dir)
            for line in diffs:
                print(f"{out}: {line}")
            if stale or diffs:
                print(f"run: python kernels_local/build.py {name}")
                status = 1
            continue
        for path in write_copies(kernel_dir) if here else []:
            print(f"wrote {_shown(path)}")
        kernel_build.build(kernel_dir, out)
        print(f"wrote {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
