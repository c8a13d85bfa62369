"""How long one ASV benchmark process costs: fork and exit from a server in the state ASV's forkserver
is in (torch imported, then the benchmark modules discovered, which preloads on a GPU), and a child
that does what asv_runner's does for a track benchmark (find it, set its cache, run its setup).

    python3 studies/suite-cost/fork.py      (from the repository root)
"""
import json
import os
import sys
import time

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
