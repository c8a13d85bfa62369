"""The guesses of `expectations.toml` (how many kernels a call launches, which ones) and the check
of what a profiler pass saw against them. Pure data and matching: no torch, no GPU."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

EXPECTATIONS = Path(__file__).with_name("expectations.toml")


def patterns(path: Path = EXPECTATIONS) -> dict[str, str]:
    """expectations.toml's named kernel-name patterns (gemm, split_k, ...)."""
    return tomllib.loads(path.read_text()).get("patterns", {})


def load_expectations(path: Path = EXPECTATIONS) -> list[dict]:
    doc = tomllib.loads(path.read_text())
    patterns = doc.get("patterns", {})
    out = []
    for e in doc["expect"]:
        e = dict(e)
        e["split_k"] = patterns.get("split_k")
        e["match"] = [patterns.get(m, m) for m in e.get("match", [])]
        e["count"] = {patterns.get(k, k): n for k, n in e.get("count", {}).items()}
        out.append(e)
    return out


def applies(expectation: dict, op: str, variant: str, shape: dict, layout: str | None = None,
            dtype: str | None = None) -> bool:
    return (
        expectation["op"] == op
        and expectation["variant"] == variant
        and ("dtypes" not in expectation or dtype in expectation["dtypes"])
        and shape.get("t", 0) >= expectation.get("min_tokens", 0)
        and shape.get("t", 0) < expectation.get("max_tokens", float("inf"))
        and expectation.get("layout") == layout
    )


def check(op: str, variant: str, shape: dict, kernel_names: list[str], kernels_per_call: float,
          expectations: list[dict] | None = None, layout: str | None = None, dtype: str | None = None) -> list[str]:
    """Mismatches between what a call launched and what `expectations.toml` says it should, for
    inputs of `layout` (Shape.layout; None: contiguous) and `dtype` (for expectations that name dtypes)."""
    problems = []
    for e in expectations if expectations is not None else load_expectations():
        if not applies(e, op, variant, shape, layout, dtype):
            continue
        # A GEMM that cuBLAS split along K brings a kernel of its own: counted apart (see the file).
        split = [k for k in kernel_names if e.get("split_k") and re.search(e["split_k"], k)]
        main = [k for k in kernel_names if k not in split]
        launched = kernels_per_call - len(split)
        if launched != e["kernels"]:
            extra = f" (not counting {len(split)} split-K kernels)" if split else ""
            problems.append(f"{op}/{variant}: expected {e['kernels']} kernels per call ({e['why']}), "
                            f"saw {launched:g}{extra}: {kernel_names}")
        for pattern in e["match"]:
            if not any(re.search(pattern, n) for n in main):
                problems.append(f"{op}/{variant}: expected a kernel matching /{pattern}/ ({e['why']}), "
                                f"saw {kernel_names}")
        for pattern, n in e["count"].items():
            seen = sum(bool(re.search(pattern, k)) for k in main)
            if seen != n:
                problems.append(f"{op}/{variant}: expected {n} kernels matching /{pattern}/, saw {seen}: {kernel_names}")
    return problems
