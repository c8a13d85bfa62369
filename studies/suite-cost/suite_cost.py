"""The suite's own cost: three probes, each run on a GPU box from the repository root.

    python3 studies/suite-cost/suite_cost.py fork
        How long one ASV benchmark process costs: fork and exit from a server in the state ASV's
        forkserver is in (torch imported, then the benchmark modules discovered, which preloads on a
        GPU), and a child that does what asv_runner's does for a track benchmark (find it, set its
        cache, run its setup).

    python3 studies/suite-cost/suite_cost.py probe-ab OLD_TREE NEW_TREE [--rounds 2] > rows.json
        The compile tax's figures, two source trees on one box: each tree's own setup_cache of the
        CompileTime and ChangingShapes classes (probes started ahead, timed one at a time), trees
        alternating. Each tree is put first on PYTHONPATH, so its `mlpbench` is the one imported (in
        the probes too).

    python3 studies/suite-cost/suite_cost.py round-spread RUN.json [--round-s 0.05]
        How far apart the rounds of back-to-back host time lie, by the length of a round, in one run
        file. Per case: its rounds' range (max - min) over their median, and its round's length,
        reconstructed the way the run sized it (calls per round from the synchronised single-call
        host time, at least 10, at most 200, with the round length the run used, `--round-s`). Cases
        are grouped by round length.

They ran as three scripts (fork.py, probe_ab.py, round_spread.py), whose code this one holds unchanged.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def fork_probe() -> None:
    from mlpbench import environment

    environment.prepare()
    root = os.path.abspath("benchmarks")
    sys.path.insert(0, os.path.dirname(root))
    t0 = time.time()
    import torch
    def forks(label, child=None, n=20):
        ts = []
        for _ in range(n):
            r, w = os.pipe()
            t = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                steps = []
                try:
                    if child: steps = child()
                finally:
                    os.write(w, json.dumps(steps).encode()); os._exit(0)
            os.close(w)
            data = b""
            while True:
                chunk = os.read(r, 65536)
                if not chunk: break
                data += chunk
            os.waitpid(pid, 0)
            ts.append((time.perf_counter() - t, json.loads(data or b"[]")))
        tot = sorted(x[0] for x in ts)[n // 2]
        print(f"{label}: median {tot*1e3:.1f} ms per fork; steps of one: {ts[n//2][1]}", flush=True)
    forks("bare torch")
    torch.cuda.is_available(); forks("after cuda.is_available")
    from asv_runner.discovery import disc_benchmarks, get_benchmark_from_name
    t = time.time(); names = [b.name for b in disc_benchmarks(root, ignore_import_errors=True)]; print(f"discovery {time.time()-t:.1f} s, {len(names)} benchmarks", flush=True)
    import gc; print("gc counts", gc.get_count(), "frozen", gc.get_freeze_count(), flush=True)
    forks("after discovery (preload)")
    import itertools, benchmarks.standard as std
    combos = list(itertools.product(*std.SiluMulHost.params)); idx = combos.index(("eager", "bf16", "t1-h14336"))
    cache = {"silu_mul/eager/bf16/t1-h14336": {"box_id": 1.0}}
    def child():
        s = []; t = time.perf_counter()
        b = get_benchmark_from_name(root, f"standard.SiluMulHost.track_box_id-{idx}"); s.append(("get", time.perf_counter() - t))
        b.set_cache(cache); skip = b.do_setup(); s.append(("setup", time.perf_counter() - t, skip))
        return s
    forks("child like asv's (get_benchmark + setup)", child)
    import resource; print("maxrss MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


ONE = """
import json, sys
from mlpbench import environment
environment.prepare()
from mlpbench.asv.compile import compile_classes
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


def probe_ab(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    rows = []
    for k in range(args.rounds):
        for name in ("CompileTime", "ChangingShapes"):
            for label, tree in (("old", args.old), ("new", args.new)):
                r = run(tree, name)
                rows.append({"round": k, "class": name, "tree": label, **r})
                print(f"round {k} {name} {label}: {r['wall_s']:.1f} s", file=sys.stderr, flush=True)
    json.dump(rows, sys.stdout, indent=1)


def round_spread(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--round-s", type=float, default=0.05, help="the round length the run used")
    args = ap.parse_args(argv)
    rows = []
    for bench in json.load(open(args.run))["benchmarks"]:
        e = bench["extra_info"]
        s = e.get("host_time_back_to_back_samples_s")
        if not s:
            continue
        calls = max(10, min(200, int(args.round_s / e["host_time_s"])))
        rows.append((calls * statistics.median(s), (max(s) - min(s)) / statistics.median(s)))
    print("| round length | cases | median range of the rounds | largest |")
    print("| --- | --- | --- | --- |")
    for lo, hi in [(0, 0.01), (0.01, 0.03), (0.03, 0.06), (0.06, 10)]:
        g = [r for r in rows if lo <= r[0] < hi]
        if g:
            print(f"| {lo * 1e3:.0f}-{hi * 1e3:.0f} ms | {len(g)} | {statistics.median(r[1] for r in g):.1%} "
                  f"| {max(r[1] for r in g):.1%} |")



if __name__ == "__main__":
    if sys.argv[1:2] == ["fork"] and len(sys.argv) == 2:
        fork_probe()
    elif sys.argv[1:2] == ["probe-ab"]:
        probe_ab(sys.argv[2:])
    elif sys.argv[1:2] == ["round-spread"]:
        round_spread(sys.argv[2:])
    else:
        raise SystemExit(__doc__)
