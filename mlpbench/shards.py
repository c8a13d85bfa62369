"""Several GPUs on one box: one pytest process per GPU, each seeing only its own, results merged.

pytest-benchmark switches itself off under pytest-xdist, so `pytest -n` cannot shard a benchmark
run. Instead `mlpbench run --shards N` starts N plain pytest processes with `--shard k/N` (every
N-th case of the registry order, starting at k) and CUDA_VISIBLE_DEVICES=k, then merges their
pytest-benchmark JSON into one file. Each record says which shard and GPU measured it; comparisons
are only fair between records of the same GPU, which the shard field makes visible.
"""

from __future__ import annotations

import json
from pathlib import Path


def parse(spec: str) -> tuple[int, int]:
    """'k/N' → (k, N), with 0 <= k < N."""
    try:
        k, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard {spec!r}: expected K/N, e.g. 0/2") from None
    if not 0 <= k < n:
        raise ValueError(f"--shard {spec!r}: need 0 <= K < N")
    return k, n


def pick(cases: list, spec: str | None) -> list:
    if not spec:
        return cases
    k, n = parse(spec)
    return cases[k::n]


def merge(paths: list[Path]) -> dict:
    """One pytest-benchmark document from the shards' documents (their order is the shard index)."""
    docs = [json.loads(p.read_text()) for p in paths]
    merged = dict(docs[0])
    merged["benchmarks"] = []
    merged["machine_info"] = dict(docs[0]["machine_info"])
    merged["machine_info"]["mlpbench_shards"] = [d["machine_info"].get("mlpbench", {}) for d in docs]
    for k, doc in enumerate(docs):
        for b in doc["benchmarks"]:
            b = dict(b)
            b["extra_info"] = dict(b.get("extra_info", {}), shard=k)
            merged["benchmarks"].append(b)
    return merged


def merge_outcomes(paths: list[Path]) -> dict:
    out = []
    for k, p in enumerate(paths):
        if p.exists():
            out += [dict(o, shard=k) for o in json.loads(p.read_text())["outcomes"]]
    return {"outcomes": out}
