"""Write a kernel repository's loadable variant, build/torch-universal/, from its sources.

    python kernels_local/build.py --all              # every repository under kernels_local/ (scripts/setup.sh runs this)
    python kernels_local/build.py silu_mul           # write kernels_local/silu_mul/build/torch-universal/
    python kernels_local/build.py silu_mul --check   # exit 1 and list the differences if it is missing or stale
    python kernels_local/build.py path/to/repository # a repository elsewhere (a folder holding build.toml)

mlpbench does not need this: it loads the kernels from a variant it writes into a cache folder keyed by
the sources (mlpbench/kernel_build.py, which holds the build itself). It is for whoever loads a
repository by its path, `kernels.get_local_kernel(Path("kernels_local/silu_mul"))` or
`kernels benchmark ./kernels_local/silu_mul`, which look for build/<variant>/ there; build/ is not
committed (.gitignore), as in kernels-community's repositories, so scripts/setup.sh writes it, and
after an edit to torch-ext/ it is written again with this command (`--check` tells whether it is due).
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", nargs="*",
                        help="a directory name under kernels_local/ (e.g. silu_mul), or a repository's path")
    parser.add_argument("--all", action="store_true", help="every repository under kernels_local/ (a folder with build.toml)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if build/ is missing or stale")
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
        if args.check:
            diffs = kernel_build.differences(kernel_dir)
            for line in diffs:
                print(f"{out}: {line}")
            if diffs:
                print(f"run: python kernels_local/build.py {name}")
                status = 1
            continue
        kernel_build.build(kernel_dir, out)
        print(f"wrote {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
