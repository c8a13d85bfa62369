"""The compile tax's figures, two source trees on one box: each tree's own setup_cache of the
CompileTime and ChangingShapes classes (probes started ahead, timed one at a time), trees alternating.

    python3 studies/suite-cost/probe_ab.py OLD_TREE NEW_TREE [--rounds 2] > probe-ab.json

Each tree is put first on PYTHONPATH, so its `mlpbench` is the one imported (in the probes too).
"""

import argparse
import json
import os
import subprocess
import sys
import time

ONE = """
import json, sys
from mlpbench import environment
environment.prepare()
from mlpbench.asv_compile import compile_classes
cls = compile_classes("standard")[sys.argv[1]]
print("RESULT " + json.dumps(cls().setup_cache()))
"""


def run(tree: str, name: str) -> dict:
    env = os.environ | {"PYTHONPATH": os.path.abspath(tree)}
    env.pop("MLPBENCH_ASV_GROUPED", None)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", ONE, name], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=400)
    wall = time.perf_counter() - t0
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    if out.returncode or not line:
        raise SystemExit(f"{tree} {name}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return {"wall_s": wall, "figures": json.loads(line[0][7:])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    rows = []
    for k in range(args.rounds):
        for name in ("CompileTime", "ChangingShapes"):
            for label, tree in (("old", args.old), ("new", args.new)):
                r = run(tree, name)
                rows.append({"round": k, "class": name, "tree": label, **r})
                print(f"round {k} {name} {label}: {r['wall_s']:.1f} s", file=sys.stderr, flush=True)
    json.dump(rows, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
