"""How well the gate separates real slowdowns from noise, measured on real device-time samples.

    python -m mlpbench.judging.detection results/pytest/h200/*.json [--trials 50] [--output FILE.md]
    python -m mlpbench.judging.detection --aa results/asv results/asv-aa COMMIT [--trials 50]

For every case with device samples, each trial splits its samples at random into a base half and
a head half, multiplies the head half by 1 + s (a planted slowdown s; s = 0 gives the false-alarm
rate), and asks `gate.judge` for a verdict with its default, noise-derived threshold. Results are
grouped by the case's median device time, because short kernels are noisier.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import gate
from .. import results

SLOWDOWNS = (0.0, 0.03, 0.05, 0.10)
BUCKETS = ((0, 5e-6, "< 5 µs"), (5e-6, 20e-6, "5–20 µs"), (20e-6, np.inf, "≥ 20 µs"))


def trials(samples: dict[str, list[float]], n_trials: int = 50, slowdowns=SLOWDOWNS, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for case, s in samples.items():
        s = np.asarray(s)
        median = float(np.median(s))
        bucket = next(name for lo, hi, name in BUCKETS if lo <= median < hi)
        for slowdown in slowdowns:
            for t in range(n_trials):
                perm = rng.permutation(len(s))
                base, head = s[perm[: len(s) // 2]], s[perm[len(s) // 2:]] * (1 + slowdown)
                rows.append(_trial(case, bucket, slowdown, base, head))
    return pd.DataFrame(rows)


def _trial(case: str, bucket: str, slowdown: float, base, head) -> dict:
    v = gate.judge(gate.Point("m", "b", 0, "track_device_time", case, "", float(np.median(base)), tuple(base)),
                   gate.Point("m", "h", 0, "track_device_time", case, "", float(np.median(head)), tuple(head)))
    return {"case": case, "bucket": bucket, "slowdown": slowdown, "flagged": v.verdict == "regression",
            "threshold": v.threshold}


def between_runs(base: dict[str, list[float]], head: dict[str, list[float]], n_trials: int = 50,
                 slowdowns=SLOWDOWNS, seed: int = 0) -> pd.DataFrame:
    """Trials across two runs of the same code (an A/A pair): base samples from one run, head samples
    from the other times 1 + s, each trial a bootstrap resample of both. Unlike `trials`, this sees
    the spread between runs (a recompile, another process) that one run's samples cannot show."""
    rng = np.random.default_rng(seed)
    rows = []
    for case in sorted(base.keys() & head.keys()):
        b, h = np.asarray(base[case]), np.asarray(head[case])
        bucket = next(name for lo, hi, name in BUCKETS if lo <= float(np.median(b)) < hi)
        for slowdown in slowdowns:
            for _ in range(n_trials):
                rows.append(_trial(case, bucket, slowdown, rng.choice(b, len(b)), rng.choice(h, len(h)) * (1 + slowdown)))
    return pd.DataFrame(rows)


def asv_device_samples(results_dir: Path, commit: str) -> dict[str, list[float]]:
    """Device samples per case of one commit in an ASV results folder."""
    points = gate.load(Path(results_dir))
    full = gate.resolve(points, commit)
    return {p.param: list(p.samples) for p in points
            if p.commit == full and p.benchmark.endswith(".track_device_time") and p.samples}


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Flag rate per size bucket and planted slowdown (the 0% column is the false-alarm rate)."""
    rate = df.pivot_table(index="bucket", columns="slowdown", values="flagged", aggfunc="mean")
    rate.columns = [f"{c:.0%} planted" for c in rate.columns]
    rate.insert(0, "cases", df.groupby("bucket")["case"].nunique())
    rate.insert(1, "median threshold", df.groupby("bucket")["threshold"].median().map("{:.1%}".format))
    order = [name for _, _, name in BUCKETS if name in rate.index]
    return rate.loc[order]


def worst_cases(df: pd.DataFrame, slowdown: float = 0.05, bucket: str = "≥ 20 µs", n: int = 10) -> pd.DataFrame:
    g = df[(df["slowdown"] == slowdown) & (df["bucket"] == bucket)]
    per_case = g.groupby("case").agg(detected=("flagged", "mean"), threshold=("threshold", "median"))
    return per_case.sort_values("detected").head(n)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mlpbench.judging.detection")
    p.add_argument("files", nargs="*", type=Path, help="pytest-benchmark JSON files (split-half trials)")
    p.add_argument("--aa", nargs=3, metavar=("BASE_DIR", "HEAD_DIR", "COMMIT"),
                   help="between-run trials on two ASV runs of COMMIT, kept in two results folders")
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--drop-first", type=int, default=0, help="leave out each case's first N samples")
    p.add_argument("--output", type=Path)
    a = p.parse_args(argv)
    if a.aa:
        base_dir, head_dir, commit = a.aa
        df = between_runs(asv_device_samples(base_dir, commit), asv_device_samples(head_dir, commit), a.trials)
    else:
        df = trials(results.device_samples(a.files, a.drop_first), a.trials)
    table = summary(df)
    text = table.to_string() + "\n\nleast detected at 5%, ≥ 20 µs:\n" + worst_cases(df).to_string()
    print(text)
    if a.output:
        a.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
