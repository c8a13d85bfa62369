"""Write result files so that a reader sees the old file or the whole new one, never a part.

A run killed mid-write (SIGKILL, a full disk, a crashed driver) leaves at most a hidden temporary
file next to the results, which no loader reads; two runs writing into one folder never share a
temporary name. A script's generated section inside a hand-written page (a study's README) is
written the same way, between two marker lines (`write_section`).
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


def write_json(path: Path, data, compact: bool = False) -> None:
    """`compact`: no indentation or spaces, for a run's results document, which is large and read by
    programs (and every checkout carries each one committed); the rest stay indented for review."""
    tmp = temp_path(path)
    tmp.write_text(json.dumps(data, sort_keys=True, **({"separators": (",", ":")} if compact else {"indent": 1})))
    publish(tmp, path)


def section_markers(name: str) -> tuple[str, str]:
    """The two lines that enclose the section `name` (a script) generates inside a hand-written page."""
    return (f"<!-- {name}: generated below, regenerate it, never edit it -->",
            f"<!-- {name}: generated above, regenerate it, never edit it -->")


def _section(path: Path, name: str) -> tuple[list[str], int, int]:
    begin, end = section_markers(name)
    try:
        lines = Path(path).read_text().splitlines(keepends=True)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    starts = [i for i, line in enumerate(lines) if line.rstrip("\n") == begin]
    ends = [i for i, line in enumerate(lines) if line.rstrip("\n") == end]
    if len(starts) != 1 or len(ends) != 1 or starts[0] > ends[0]:
        raise ValueError(f"{path}: no section for {name} to replace: it needs the line {begin!r} and, "
                         f"after it, the line {end!r}, each once")
    return lines, starts[0], ends[0]


def read_section(path: Path, name: str) -> str:
    """The text between `name`'s markers in `path`, without the blank lines around it; ValueError
    naming the file when the markers are missing."""
    lines, start, end = _section(path, name)
    return "".join(lines[start + 1:end]).strip("\n") + "\n"


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the text between `name`'s markers in `path` with `text` (a blank line on either side),
    keeping the rest of the file as it is; ValueError naming the file when the markers are missing."""
    lines, start, end = _section(path, name)
    tmp = temp_path(Path(path))
    tmp.write_text("".join(lines[:start + 1]) + "\n" + text.strip("\n") + "\n\n" + "".join(lines[end:]))
    publish(tmp, Path(path))
