"""`mlpbench skips`: why each ASV benchmark is n/a on this machine, without measuring anything."""

from __future__ import annotations

import itertools
import re

from .. import registry
from .suite import classes


def skip_reasons(tiers=registry.TIERS, bench: str | None = None):
    """(ASV's name of a benchmark with its parameters, why its `setup` skips it on this machine or
    None) for every benchmark of the tiers' families that `bench` (ASV's --bench: a regex searched in
    that name) selects. It calls each class's own `setup` on what its cache would hold (its
    `dry_cache`), so what only measuring shows (a compile that generates no Triton kernel to
    fingerprint) is not listed."""
    rx = re.compile(bench) if bench else None
    for tier in tiers:
        for cls_name, cls in classes(tier).items():
            cache = cls.dry_cache()
            methods = sorted(m for m in vars(cls) if m.startswith(("track_", "time_")))
            for values in itertools.product(*cls.params):
                label = ", ".join(repr(v) for v in values)
                benches = [f"{tier}.{cls_name}.{m}({label})" for m in methods]
                benches = [b for b in benches if rx is None or rx.search(b)]
                if not benches:
                    continue
                try:
                    cls.setup(cls(), cache, *values)
                    reason = None
                except NotImplementedError as exc:
                    reason = str(exc)
                for b in benches:
                    yield b, reason
