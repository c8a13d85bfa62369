"""The codegen record as the gate reads it: its fingerprint, where records are kept and what changed
between two, in words. mlpbench/compile/codegen.py makes the records; this module needs neither torch nor
Inductor.

Every record of a results root lives in one file, results/codegen.json: {"version": 1, "records":
{"<fingerprint>": record}}. A record is keyed by its fingerprint (content-addressed), so files are
merged, never overwritten: a fingerprint already present keeps the record it has.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import os
from pathlib import Path

FINGERPRINT_BITS = 52  # ASV keeps values as float64: integers below 2**53 stay exact
FILE = "codegen.json"  # under the results root, beside asv/
# The file's layout: 1 = {"version", "records": {fingerprint as a decimal string: record}}. Bump it
# when the layout changes, so that an older reader refuses the file rather than misread it.
VERSION = 1


def fingerprint(record: dict) -> int:
    """One integer for everything recorded about the generated code (ASV can store it exactly)."""
    text = json.dumps(record, sort_keys=True, default=str)
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) >> (256 - FINGERPRINT_BITS)


# Per kernel, what decides its speed: the fingerprint covers these, not where a pick was read from.
DECIDES = ("name", "source_sha256", "config", "candidates", "coordinate_descent")


def path_for(results: Path) -> Path:
    return Path(results) / FILE


def parse(text: str, where: str) -> dict[str, dict]:
    """The records of a codegen.json's text, by fingerprint; ValueError naming `where` when the text is
    not such a file (not JSON, another version)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("records"), dict):
        version = doc.get("version") if isinstance(doc, dict) else None
        raise ValueError(f"{where}: codegen file version {version!r}, this reader knows {VERSION}")
    return doc["records"]


def dumps(records: dict[str, dict]) -> str:
    """The text of a codegen.json holding `records` (one layout for every writer, so equal record sets
    make equal files)."""
    return json.dumps({"version": VERSION, "records": records}, indent=1, sort_keys=True)


@functools.lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, size: int) -> dict[str, dict]:
    # keyed by the file's stamp: the gate looks up two records per verdict, the file is read once
    return parse(Path(path).read_text(), path)


def read_all(results: Path) -> dict[str, dict]:
    """Every record under the results root `results`, by fingerprint; {} where it has no codegen.json.
    ValueError for a file this reader cannot read."""
    path = path_for(results)
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    return dict(_read(str(path), st.st_mtime_ns, st.st_size))


def merge(kept: dict[str, dict], new: dict[str, dict]) -> dict[str, dict]:
    """`kept` with every record of `new` whose fingerprint it lacks: a fingerprint already kept keeps
    its record (both describe the same generated code)."""
    return {**new, **kept}


@contextlib.contextmanager
def _locked(folder: Path):
    """Hold an exclusive lock on `folder` while a store reads, merges and writes the file: benchmark
    processes of parallel ASV runs store into one results root at once."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one writer at a time is then the caller's to keep
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def store(codegen: dict, results: Path) -> Path:
    """Add `codegen` to results/codegen.json under its fingerprint (content-addressed: storing twice is
    harmless), merged with the records there, written atomically. Returns the file's path."""
    from ..atomic import publish, temp_path

    path = path_for(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = str(int(codegen["fingerprint"]))
    with _locked(path.parent):
        records = parse(path.read_text(), str(path)) if path.exists() else {}  # as it is now, not cached
        if key not in records:
            tmp = temp_path(path)
            tmp.write_text(dumps(merge(records, {key: codegen})))
            publish(tmp, path)
    return path


def load(fp: int | float, results: Path) -> dict | None:
    """The record of fingerprint `fp` under the results root `results`; None where there is none or the
    file cannot be read (the gate then says the record is missing)."""
    try:
        found = read_all(results).get(str(int(fp)))
        return copy.deepcopy(found)  # the cached file stays as read
    except (OSError, ValueError):
        return None


def differences(base: dict | None, head: dict | None) -> list[str]:
    """What changed in the generated code between two records, in words, e.g.
    "triton_poi_fused_gelu_mul_0: XBLOCK 512 instead of 1024"."""
    if base is None or head is None:
        return [f"the generated code changed (its record is not in results/{FILE})"]
    out = []
    b = {k["name"]: k for k in base.get("kernels", [])}
    h = {k["name"]: k for k in head.get("kernels", [])}
    for name in sorted(set(h) - set(b)):
        out.append(f"new kernel {name}")
    for name in sorted(set(b) - set(h)):
        out.append(f"kernel {name} gone")
    for name in sorted(set(b) & set(h)):
        kb, kh = b[name], h[name]
        cb, ch = kb.get("config") or {}, kh.get("config") or {}
        changed = [f"{key} {ch.get(key)} instead of {cb.get(key)}" for key in sorted(set(cb) | set(ch))
                   if cb.get(key) != ch.get(key)]
        if changed:
            out.append(f"{name}: Inductor chose " + ", ".join(changed))
        if kb.get("source_sha256") != kh.get("source_sha256"):
            out.append(f"{name}: its Triton source changed")
    sb, sh = base.get("settings", {}), head.get("settings", {})
    out += [f"Inductor setting {k}: {sh.get(k)!r} instead of {sb.get(k)!r}" for k in sorted(set(sb) | set(sh))
            if sb.get(k) != sh.get(k)]
    return out or ["the generated code's record differs in a detail (size hints or cache state)"]
