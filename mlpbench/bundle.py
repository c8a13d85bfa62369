"""A study's data in one file: several JSON documents (result files, ASV folders) kept as one bundle,
and written back out as files for the commands that read files.

    python -m mlpbench.bundle pack BUNDLE.json ROOT FILE ...   # FILE's path relative to ROOT names it
    python -m mlpbench.bundle unpack BUNDLE.json DIR           # DIR/<name> for every document
    python -m mlpbench.bundle list BUNDLE.json

A bundle is {"bundle": 1, "files": {"<relative path>": <the document>}}: each document is kept as
parsed JSON, so its values are exactly the file's; unpacking writes them in JSON again (the layout of
the whitespace may differ from the file that was packed, the values do not).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path, PurePosixPath

VERSION = 1  # the bundle's layout; bump it when that changes


def read(bundle: str | Path) -> dict[str, object]:
    """The documents of a bundle, by relative path."""
    doc = json.loads(Path(bundle).read_text())
    if doc.get("bundle") != VERSION:
        raise SystemExit(f"{bundle}: bundle version {doc.get('bundle')!r}, this script knows {VERSION}")
    return doc["files"]


def _safe(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise SystemExit(f"{name!r} is not a relative path inside the bundle")
    return path.as_posix()


def pack(bundle: str, root: str, *files: str) -> None:
    docs = {_safe(Path(f).resolve().relative_to(Path(root).resolve()).as_posix()): json.loads(Path(f).read_text())
            for f in files}
    Path(bundle).write_text(json.dumps({"bundle": VERSION, "files": docs}, separators=(",", ":")) + "\n")


def unpack(bundle: str, out: str) -> None:
    for name, doc in read(bundle).items():
        path = Path(out, _safe(name))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc) + "\n")
        print(path)


def main(argv: list[str]) -> None:
    if len(argv) >= 4 and argv[0] == "pack":
        pack(*argv[1:])
    elif len(argv) == 3 and argv[0] == "unpack":
        unpack(*argv[1:])
    elif len(argv) == 2 and argv[0] == "list":
        print(*read(argv[1]), sep="\n")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
