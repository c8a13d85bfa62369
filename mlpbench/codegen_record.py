"""The codegen record as the gate reads it: its fingerprint, where records are kept
(results/codegen/<fingerprint>.json, content-addressed) and what changed between two, in words.
mlpbench/codegen.py makes the records; this module needs neither torch nor Inductor."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

FINGERPRINT_BITS = 52  # ASV keeps values as float64: integers below 2**53 stay exact


def fingerprint(record: dict) -> int:
    """One integer for everything recorded about the generated code (ASV can store it exactly)."""
    text = json.dumps(record, sort_keys=True, default=str)
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) >> (256 - FINGERPRINT_BITS)


# Per kernel, what decides its speed: the fingerprint covers these, not where a pick was read from.
DECIDES = ("name", "source_sha256", "config", "candidates", "coordinate_descent")


def store(codegen: dict, results: Path) -> Path:
    """Write `codegen` to results/codegen/<fingerprint>.json (content-addressed: writing twice is harmless)."""
    from .atomic import write_json

    path = Path(results) / "codegen" / f"{codegen['fingerprint']}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, codegen)
    return path


def load(fp: int | float, results: Path) -> dict | None:
    path = Path(results) / "codegen" / f"{int(fp)}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def differences(base: dict | None, head: dict | None) -> list[str]:
    """What changed in the generated code between two records, in words, e.g.
    "triton_poi_fused_gelu_mul_0: XBLOCK 512 instead of 1024"."""
    if base is None or head is None:
        return ["the generated code changed (its record is not in results/codegen/)"]
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
