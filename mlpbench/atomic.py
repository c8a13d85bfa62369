"""Write result files so that a reader sees the old file or the whole new one, never a part.

A run killed mid-write (SIGKILL, a full disk, a crashed driver) leaves at most a hidden temporary
file next to the results, which no loader reads; two runs writing into one folder never share a
temporary name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def temp_path(final: Path) -> Path:
    """A hidden, per-process temporary name in `final`'s folder (same filesystem, so rename is atomic)."""
    return final.with_name(f".{final.name}.{os.getpid()}.tmp")


def publish(tmp: Path, final: Path) -> None:
    """Make `tmp` durable, then atomically give it `final`'s name."""
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)


def write_json(path: Path, data) -> None:
    tmp = temp_path(path)
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    publish(tmp, path)
