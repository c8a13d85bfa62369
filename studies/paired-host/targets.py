"""What an eager loop pays for our kernels, judged against its targets in paired runs.

    python studies/paired-host/targets.py RUN.json ...

Each RUN is a document of `mlpbench run --paired` on a GPU. Back-to-back host time is compared as the
paired ratio each case records against its op's eager case of the same dtype and shape
(`host_time_back_to_back_vs_eager`, rounds of the two interleaved in one process). A ratio between two
other variants is the quotient of their paired ratios. Where a case has no paired ratio, the ratio of
the two cases' back-to-back medians is used and the row says `unpaired`.

Every target is read at every shape of the op that the runs hold, in each run; it is met when every run
meets it (a verdict must hold on each box), and the median over runs stands beside it:
- `gelu_mul/ours`, `silu_mul/ours`: at or below the faster of `compiled` and `liger`;
  moonshot: at or below `eager`, and below 25 µs at one token;
- `gelu_mul_train/ours`: at or below `liger`;
- `mlp` and `swiglu_mlp`, `ours` and `dualgemm`: at or below `compiled` at 8192 tokens, with back-to-back
  host time within 1.10× of their own device time there; within 1.25× of `eager` at one token;
- `llama_model`, `gemma_model`: `ourscompiled` and `dualgemmcompiled` within 1.05× of `compiled` at one
  token and below it at a prefill; `ours` and `dualgemm` within 1.05× of `eager` at one token.
Device time's ratio for the same pair stands beside each host ratio: where both variants' host time
waits on the GPU, a host ratio at parity is a device ratio at parity.

A run that misses a bound misses it beyond its noise only where the quotient's bootstrap interval (the
pairs' ratios of both variants resampled, NOISE_LEVEL two-sided) lies wholly above the bound. Where the
interval reaches the bound the run cannot tell the two apart: a row no run misses beyond its noise but
some run misses at all reads "parity within noise", counted apart from met and missed.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlpbench import results  # noqa: E402

ELEMENTWISE = ("gelu_mul", "silu_mul")
MLPS = ("mlp", "swiglu_mlp")
MODELS = ("llama_model", "gemma_model")
LARGE = 8192  # tokens: "every shape of 8192 tokens"
ONE_TOKEN_US = 25.0  # the moonshot's bound on one-token host time
OWN_DEVICE = 1.10  # the MLPs' back-to-back host time over their own device time, at 8192 tokens
NOISE_LEVEL = 0.90  # the bootstrap interval's coverage, two-sided: a miss beyond noise is a 5% one-sided call
RESAMPLES = 2000


@dataclass(frozen=True)
class Target:
    op: str
    variant: str
    against: tuple[str, ...]  # the faster of these (their smaller ratio) is the bar
    limit: float  # ratio to eager's bar at or below which the target holds
    tokens: str  # "all", "one", "large" or "prefill"
    what: str
    strict: bool = False  # below, not at or below
    moonshot: bool = False  # counted apart from the targets required


def targets() -> list[Target]:
    out = []
    for op in ELEMENTWISE:
        out += [Target(op, "ours", ("compiled", "liger"), 1.0, "all", "≤ faster of compiled and liger"),
                Target(op, "ours", ("eager",), 1.0, "all", "moonshot: ≤ eager", moonshot=True)]
    out.append(Target("gelu_mul_train", "ours", ("liger",), 1.0, "all", "≤ liger"))
    for op in MLPS:
        for v in ("ours", "dualgemm"):
            out += [Target(op, v, ("compiled",), 1.0, "large", "≤ compiled at 8192 tokens"),
                    Target(op, v, ("eager",), 1.25, "one", "≤ 1.25× eager at one token")]
    for op in MODELS:
        for v in ("ourscompiled", "dualgemmcompiled"):
            out += [Target(op, v, ("compiled",), 1.05, "one", "≤ 1.05× compiled at one token"),
                    Target(op, v, ("compiled",), 1.0, "prefill", "< compiled at prefill", strict=True)]
        for v in ("ours", "dualgemm"):
            out.append(Target(op, v, ("eager",), 1.05, "one", "≤ 1.05× eager at one token"))
    return out


def tokens(op: str, shape: str) -> int:
    """The shape's token count, from the registry's dims (mlpbench.results)."""
    n = results.tokens(results.shape_dims(op, shape))
    if n is None:
        raise SystemExit(f"targets.py: {op} has no shape {shape!r} in this checkout's registry")
    return n


def takes(t: Target, shape: str) -> bool:
    n = tokens(t.op, shape)
    return {"all": True, "one": n == 1, "large": n >= LARGE, "prefill": n > 1}[t.tokens]


def host_vs_eager(run: dict, op: str, variant: str, dtype: str, shape: str) -> tuple[float | None, bool]:
    """(this case's back-to-back host time over eager's, paired?) in one run; (None, False) if absent."""
    me = run.get(f"{op}/{variant}/{dtype}/{shape}")
    if me is None or not me.get("host_time_back_to_back_s"):
        return None, False
    if variant == "eager":
        return 1.0, True
    if me.get("host_time_back_to_back_vs_eager"):
        return me["host_time_back_to_back_vs_eager"], True
    eager = run.get(f"{op}/eager/{dtype}/{shape}")
    if eager is None or not eager.get("host_time_back_to_back_s"):
        return None, False
    return me["host_time_back_to_back_s"] / eager["host_time_back_to_back_s"], False


def pair_ratios(run: dict, op: str, variant: str, dtype: str, shape: str) -> list[float] | None:
    """The case's ratio to eager in each pair of its paired rounds; [1.0] for eager itself; None unpaired."""
    if variant == "eager":
        return [1.0]
    return (run.get(f"{op}/{variant}/{dtype}/{shape}") or {}).get("host_time_back_to_back_vs_eager_samples") or None


def lower_bound(mine: list[float], bar: list[float], seed: int = 0) -> float:
    """The lower end of the bootstrap interval (NOISE_LEVEL, two-sided) of median(mine) / median(bar)."""
    rng = random.Random(seed)
    quotients = sorted(statistics.median(rng.choices(mine, k=len(mine))) / statistics.median(rng.choices(bar, k=len(bar)))
                       for _ in range(RESAMPLES))
    return quotients[int((1 - NOISE_LEVEL) / 2 * RESAMPLES)]


def device(run: dict, op: str, variant: str, dtype: str, shape: str) -> float | None:
    return (run.get(f"{op}/{variant}/{dtype}/{shape}") or {}).get("device_time_s")


def judge(t: Target, runs: list[dict], dtype: str, shape: str) -> dict | None:
    """One row: the target's ratio in each run (None where a side is missing), the median, the device
    ratio's median, whether every ratio was paired, whether each run met the target, and whether each run
    that missed it missed it beyond its noise (lower_bound; unpaired runs have no noise to tell by)."""
    host, dev, paired, beyond = [], [], True, []
    for run in runs:
        mine, p_mine = host_vs_eager(run, t.op, t.variant, dtype, shape)
        bars = [(host_vs_eager(run, t.op, v, dtype, shape), v) for v in t.against]
        bars = [(r, p, v) for (r, p), v in bars if r is not None]
        if mine is None or not bars:
            host.append(None)
            continue
        bar, p_bar, best = min(bars)
        host.append(mine / bar)
        paired &= p_mine and p_bar
        s_mine, s_bar = pair_ratios(run, t.op, t.variant, dtype, shape), pair_ratios(run, t.op, best, dtype, shape)
        low = lower_bound(s_mine, s_bar) if s_mine and s_bar else mine / bar
        beyond.append(low >= t.limit if t.strict else low > t.limit)
        d_mine, d_bar = device(run, t.op, t.variant, dtype, shape), device(run, t.op, best, dtype, shape)
        if d_mine and d_bar:
            dev.append(d_mine / d_bar)
    seen = [x for x in host if x is not None]
    if not seen:
        return None
    return {"host": host, "median": statistics.median(seen), "device": statistics.median(dev) if dev else None,
            "paired": paired, "runs_met": [x < t.limit if t.strict else x <= t.limit for x in seen],
            "runs_beyond_noise": beyond}


def own_device(runs: list[dict], op: str, variant: str, dtype: str, shape: str) -> list[float | None]:
    """Back-to-back host time over the case's own device time, per run."""
    out = []
    for run in runs:
        r = run.get(f"{op}/{variant}/{dtype}/{shape}") or {}
        out.append(r["host_time_back_to_back_s"] / r["device_time_s"]
                   if r.get("host_time_back_to_back_s") and r.get("device_time_s") else None)
    return out


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def verdict(runs_met: list[bool], runs_beyond_noise: list[bool] | None = None) -> str:
    """Met when every run that measured it met it: a verdict must hold on each box, not on average. A miss
    that no run can tell from its noise (runs_beyond_noise, where known) is parity within noise."""
    if all(runs_met):
        return "met"
    if runs_beyond_noise is not None and not any(runs_beyond_noise):
        return f"parity within noise ({sum(runs_met)} of {len(runs_met)} runs met)"
    return f"**missed** ({sum(runs_met)} of {len(runs_met)} runs met)"


def load(path: str) -> dict:
    return {b["extra_info"]["case"]: b["extra_info"] for b in json.load(open(path))["benchmarks"]
            if "case" in b.get("extra_info", {})}


def report(files: list[str]) -> str:
    runs = [load(f) for f in files]
    shapes = sorted({tuple(c.split("/")[i] for i in (0, 2, 3)) for run in runs for c in run},
                    key=lambda s: (s[0], s[1], tokens(s[0], s[2]), s[2]))
    cols = " | ".join(f"run {k}" for k in range(1, len(runs) + 1))
    lines = ["# Back-to-back host time against the targets, paired runs", "",
             "Generated by `python studies/paired-host/targets.py " + " ".join(files) + "`; regenerate it, never "
             "edit it. Host: this variant's back-to-back host time over the bar's (the faster of the variants "
             "named), from paired ratios against eager in one process; met when every run meets it. "
             "Device: the same quotient of device times (graph replay), median over runs.", "",
             f"| case | target | {cols} | host median | device median | verdict |",
             "| --- | --- | " + " | ".join("---" for _ in runs) + " | --- | --- | --- |"]
    counts = {False: [0, 0, 0], True: [0, 0, 0]}  # by moonshot: [met, missed, parity within noise]
    for t in targets():
        for op, dtype, shape in shapes:
            if op != t.op or not takes(t, shape):
                continue
            row = judge(t, runs, dtype, shape)
            if row is None:
                continue
            said = verdict(row["runs_met"], row["runs_beyond_noise"])
            counts[t.moonshot][0 if said == "met" else 2 if said.startswith("parity") else 1] += 1
            said += "" if row["paired"] else " (unpaired)"
            lines.append(f"| {op}/{t.variant}/{dtype}/{shape} | {t.what} | "
                         + " | ".join(_fmt(x) for x in row["host"])
                         + f" | {_fmt(row['median'])} | {_fmt(row['device'])} | {said} |")
    lines += ["", f"## Back-to-back host time over the case's own device time, at 8192 tokens (target ≤ {OWN_DEVICE:.2f})", "",
              f"| case | {cols} | median | verdict |", "| --- | " + " | ".join("---" for _ in runs) + " | --- | --- |"]
    for op, dtype, shape in shapes:
        if op not in MLPS or tokens(op, shape) < LARGE:
            continue
        for v in ("ours", "dualgemm"):
            ratios = own_device(runs, op, v, dtype, shape)
            seen = [x for x in ratios if x is not None]
            if seen:
                met = [x <= OWN_DEVICE for x in seen]
                counts[False][0 if all(met) else 1] += 1
                lines.append(f"| {op}/{v}/{dtype}/{shape} | " + " | ".join(_fmt(x) for x in ratios)
                             + f" | {_fmt(statistics.median(seen))} | {verdict(met)} |")
    lines += ["", f"## One-token host time of our elementwise kernels (moonshot: below {ONE_TOKEN_US:.0f} µs)", "",
              f"| case | {cols} | median µs | verdict |", "| --- | " + " | ".join("---" for _ in runs) + " | --- | --- |"]
    for op, dtype, shape in shapes:
        if op in ELEMENTWISE and tokens(op, shape) == 1:
            us = [(run.get(f"{op}/ours/{dtype}/{shape}") or {}).get("host_time_back_to_back_s") for run in runs]
            us = [None if x is None else x * 1e6 for x in us]
            seen = [x for x in us if x is not None]
            if seen:
                met = [x < ONE_TOKEN_US for x in seen]
                counts[True][0 if all(met) else 1] += 1
                lines.append(f"| {op}/ours/{dtype}/{shape} | " + " | ".join("—" if x is None else f"{x:.1f}" for x in us)
                             + f" | {statistics.median(seen):.1f} | {verdict(met)} |")
    (met, missed, noise), (moon_met, moon_missed, moon_noise) = counts[False], counts[True]
    lines += ["", f"Required (all tables): {met} met, {missed} missed, {noise} at parity within noise. "
              f"Moonshot: {moon_met} met, {moon_missed} missed, {moon_noise} at parity within noise."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    missing = [f for f in sys.argv[1:] if not Path(f).is_file()]
    if missing:
        sys.exit(f"targets.py: no such run file: {', '.join(missing)}")
    sys.stdout.write(report(sys.argv[1:]))
