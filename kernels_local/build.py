"""Write a kernel repository's loadable variant, build/torch-universal/, from its sources.

    python kernels_local/build.py silu_mul           # write kernels_local/silu_mul/build/torch-universal/
    python kernels_local/build.py silu_mul --check   # exit 1 and list the differences if it is missing or stale
    python kernels_local/build.py path/to/repository # a repository elsewhere (a folder holding build.toml)

mlpbench does not need this: it loads the kernels from a variant it writes into a cache folder keyed by
the sources (mlpbench/kernel_build.py, which holds the build itself). It is for tools that want the
build/ in the repository, such as `kernels benchmark ./kernels_local/silu_mul`; build/ is not
committed (.gitignore), as in kernels-community's repositories.
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
    parser.add_argument("kernel", help="a directory name under kernels_local/ (e.g. silu_mul), or a repository's path")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if build/ is missing or stale")
    args = parser.parse_args(argv)
    kernel_dir = KERNELS_LOCAL / args.kernel
    if not (kernel_dir / "build.toml").is_file():
        kernel_dir = Path(args.kernel)
    if not (kernel_dir / "build.toml").is_file():
        parser.error(f"no build.toml in {KERNELS_LOCAL / args.kernel} or {kernel_dir}")
    out = kernel_dir / "build" / VARIANT
    if args.check:
        diffs = kernel_build.differences(kernel_dir)
        for line in diffs:
            print(f"{out}: {line}")
        if diffs:
            print(f"run: python kernels_local/build.py {args.kernel}")
        return 1 if diffs else 0
    kernel_build.build(kernel_dir, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
