"""A sharded run (`mlpbench run --shards N`) against single-GPU runs of the same cases, case by case.

    .venv/bin/python scripts/shard_agreement.py SHARDED.json SINGLE.json [SINGLE.json ...]

For each case measured by both, the ratio of the sharded device time to the single-GPU one (the
single run nearest in time when several measured it), summarised for all cases and split at
SMALL_CASE_S, since launch jitter dominates cases faster than that; then the largest differences.
Device time should not depend on how many GPUs of the box ran at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from mlpbench import results, tables

SMALL_CASE_S = 20e-6
AGREEMENT = 0.02


def records(paths) -> pd.DataFrame:
    df = results.pytest_records(results.pytest_runs(paths))
    return df[df["device_time_s"].notna()]


def compare(sharded: pd.DataFrame, single: pd.DataFrame) -> pd.DataFrame:
    when = pd.to_datetime(sharded["datetime"].iloc[0], utc=True, format="ISO8601")
    gap = (pd.to_datetime(single["datetime"], utc=True, format="ISO8601") - when).abs()
    nearest = single.assign(gap=gap).sort_values(["gap", "run"], kind="stable").drop_duplicates("case")
    both = sharded.merge(nearest[["case", "device_time_s", "run"]], on="case", suffixes=("", "_single"))
    return both.assign(ratio=both["device_time_s"] / both["device_time_s_single"])


def report(both: pd.DataFrame, sharded_file: str) -> str:
    big = both["device_time_s_single"] >= SMALL_CASE_S
    rows = []
    for name, mask in (("all cases", np.ones(len(both), bool)), (f"cases of {SMALL_CASE_S * 1e6:.0f} µs or more", big),
                       (f"cases under {SMALL_CASE_S * 1e6:.0f} µs", ~big)):
        r = both["ratio"][mask]
        if not r.empty:
            lo, hi = np.percentile(r, [5, 95])
            rows.append([name, str(len(r)), f"{np.median(r):.3f}", f"{lo:.3f}–{hi:.3f}",
                         f"{(abs(r - 1) <= AGREEMENT).mean():.0%}"])
    per_shard = both["shard"].value_counts().sort_index()
    worst = both[big].sort_values("ratio", key=lambda r: -abs(r - 1), kind="stable").head(5)
    return "\n\n".join([
        f"{sharded_file}: {len(both)} cases from {len(per_shard)} processes, one per GPU "
        f"({', '.join(f'shard {int(k)}: {n}' for k, n in per_shard.items())}); ratio: sharded device time "
        f"over single-GPU (runs: {', '.join(sorted(set(both['run_single'])))}).",
        tables.Table(["cases", "count", "median ratio", "5th–95th percentile", f"within ±{AGREEMENT:.0%}"], rows).markdown(),
        f"Largest differences, cases of {SMALL_CASE_S * 1e6:.0f} µs or more:",
        tables.Table(["case", "single µs", "sharded µs", "ratio"],
                     [[r.case, f"{r.device_time_s_single * 1e6:,.1f}", f"{r.device_time_s * 1e6:,.1f}", f"{r.ratio:.3f}"]
                      for r in worst.itertuples()]).markdown(),
    ])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    sharded, single = records([Path(argv[0])]), records(map(Path, argv[1:]))
    if sharded.empty or single.empty:
        print(f"shard_agreement: no device-time records in {argv[0] if sharded.empty else argv[1:]}", file=sys.stderr)
        return 2
    print(report(compare(sharded, single), Path(argv[0]).name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
