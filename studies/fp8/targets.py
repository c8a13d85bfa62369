"""The FP8 MLP's targets, judged in runs of `mlpbench run` on one Hopper machine.

    python studies/fp8/targets.py RUN.json ...

Each RUN is a results document (results/pytest/<machine>/...). In each run, at the blog's shape
(t8192-d768-h3072) and Llama-3-8B's (t8192-d4096-h14336), for `mlp` and `swiglu_mlp`:
- `ours/fp8` device time at or below the faster of `compiled/fp8` and `torchao/fp8` (where
  torchao was timed; a row says which bars the run holds);
- `ours/fp8` device time at or below 0.65× of `compiled/bf16` of the same run (moonshot: 0.55×);
and at one token, `ours/fp8` back-to-back host time within 1.25× of `eager/fp8` (the paired ratio
where the run is paired, else the ratio of the two medians, marked `unpaired`).
A ratio is only ever taken within one run: a verdict never compares two runs or two machines. A
target is met when every run that holds its cases meets it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("paired_host_targets", _here.parent / "paired-host" / "targets.py")
paired = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # a dataclass looks its module up
_spec.loader.exec_module(paired)

OPS = ("mlp", "swiglu_mlp")
LARGE_SHAPES = ("t8192-d768-h3072", "t8192-d4096-h14336")
VS_BF16 = 0.65
VS_BF16_MOONSHOT = 0.55
ONE_TOKEN = 1.25


def _fmt(x):
    return "—" if x is None else f"{x:.3f}"


def _verdict(values, limit):
    held = [v for v in values if v is not None]
    if not held:
        return "not measured"
    met = sum(v <= limit for v in held)
    return "met" if met == len(held) else f"**missed** ({met} of {len(held)} runs met)"


def rows(runs: list[dict]) -> list[tuple[str, str, list, str]]:
    """(case, target, per-run ratio or None, verdict) for every target a run holds cases of."""
    out = []
    for op in OPS:
        for shape in LARGE_SHAPES:
            mine = [paired.device(r, op, "ours", "fp8", shape) for r in runs]
            if not any(mine):
                continue
            peers, names = [], []
            for r, m in zip(runs, mine):
                bars = {v: paired.device(r, op, v, "fp8", shape) for v in ("compiled", "torchao")}
                bars = {v: t for v, t in bars.items() if t}
                peers.append(m / min(bars.values()) if m and bars else None)
                names.append("+".join(sorted(bars)) or "none")
            case = f"{op}/ours/fp8/{shape}"
            out.append((case, f"≤ faster of {' / '.join(dict.fromkeys(names))} (fp8)", peers, _verdict(peers, 1.0)))
            bf16 = [m / b if m and b else None
                    for r, m in zip(runs, mine) for b in [paired.device(r, op, "compiled", "bf16", shape)]]
            out.append((case, f"≤ {VS_BF16}× compiled/bf16", bf16, _verdict(bf16, VS_BF16)))
            out.append((case, f"moonshot: ≤ {VS_BF16_MOONSHOT}× compiled/bf16", bf16, _verdict(bf16, VS_BF16_MOONSHOT)))
        one = sorted({c.split("/")[3] for r in runs for c in r
                      if c.startswith(f"{op}/ours/fp8/") and paired.tokens(op, c.split("/")[3]) == 1})
        for shape in one:
            got = [paired.host_vs_eager(r, op, "ours", "fp8", shape) for r in runs]
            values = [v for v, _ in got]
            what = f"host ≤ {ONE_TOKEN}× eager/fp8 at one token"
            if any(v is not None and not p for v, p in got):
                what += " (unpaired)"
            out.append((f"{op}/ours/fp8/{shape}", what, values, _verdict(values, ONE_TOKEN)))
    return out


def report(files: list[str]) -> str:
    runs = [paired.load(f) for f in files]
    head = "| case | target | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " | verdict |"
    lines = [head, "|" + " --- |" * (len(runs) + 3)]
    found = rows(runs)
    for case, what, values, verdict in found:
        lines.append(f"| {case} | {what} | " + " | ".join(map(_fmt, values)) + f" | {verdict} |")
    if not found:
        raise SystemExit("fp8 targets.py: no run holds an mlp or swiglu_mlp ours/fp8 case")
    runs_line = "\n".join(f"- run {i + 1}: {f}" for i, f in enumerate(files))
    return runs_line + "\n\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    missing = [f for f in sys.argv[1:] if not Path(f).is_file()]
    if missing:
        sys.exit(f"targets.py: no such run file: {', '.join(missing)}")
    print(report(sys.argv[1:]), end="")
