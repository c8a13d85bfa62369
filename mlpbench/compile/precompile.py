"""First calls ahead of timing, in parallel worker processes: the compile work of a run done at once.

A case's first call compiles: torch.compile traces and generates code, and a Triton kernel (ours,
Liger's) is compiled for the case's shapes and dtype. None of it is timed, yet done case by case in
the measuring process it dominates a tier's wall time. Before any case is timed, `run` makes those
first calls in worker processes, several at a time:

- a compiled case is compiled hermetically (mlpbench/compile/codegen.py) into a cache folder of its own,
  which the worker leaves under MLPBENCH_PRECOMPILED; the measuring process starts the case's own
  hermetic cache from a copy of it (`seed_for`), so Inductor reads the code this run's compile of the
  same case generated instead of generating it again. Inductor's autotune picks (`*.best_config`)
  are not kept: workers share the GPU, so their picks were benchmarked on a busy device; the
  measuring process autotunes afresh, alone on the GPU, as it did without workers;
- a case with a Triton kernel of ours or Liger's fills Triton's own cache, which the measuring
  process then reads;
- max-autotune variants are not precompiled: they benchmark GEMM templates while compiling.

Nothing a worker measured is recorded, and a worker's failure is only printed: the measuring
process builds and checks every case itself, and reports what fails there.

    python -m mlpbench.compile.precompile FOLDER [--claims DIR] CASE_ID...   (what `run` starts, one per worker:
    each takes the next case no other worker claimed in DIR)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .codegen import PRECOMPILED_ENV as ENV, precompiled_slug as _slug, seed_for  # noqa: F401 - this module's API

DROPPED = ("*.best_config", "*.lock")  # autotune picks made on a shared GPU; lock files


def eligible(case) -> bool:
    """Whether `case`'s first call is worth making ahead: it compiles (not in a mode that autotunes GEMMs
    while compiling) or JIT-compiles a Triton kernel."""
    from ..registry import variant_of

    v = variant_of(case)
    if v.compiles:
        return not (v.compile_mode or "").startswith("max-autotune")
    return v.triton


def workers_for(n_cases: int, cores: int | None = None) -> int:
    """How many workers: one per two cores (Inductor compiles a graph's kernels in threads of its own),
    at most eight (each holds a CUDA context and a case in GPU memory), at most one per case."""
    return max(1, min(8, (cores or _cores()) // 2, n_cases))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _print(msg: str) -> None:
    print(msg, flush=True)


def run(cases, folder: Path, workers: int, say=_print) -> dict:
    """The first calls of the eligible `cases`, in `workers` processes at once, compiled cases' caches
    left in `folder`. Returns what was done: {cases, workers, wall_s, failed}."""
    info = {"cases": 0, "workers": 0, "wall_s": 0.0, "failed": 0}
    _finish(_start(cases, folder, workers, say, info), say, info)
    return info


def _start(cases, folder: Path, workers: int, say, info: dict) -> list:
    """The worker processes of `run`, started; `info` filled with what they were given."""
    todo = [c for c in cases if eligible(c)]
    info["cases"] = len(todo)
    if not todo or workers < 1:
        return []
    workers = min(workers, len(todo))
    todo.sort(key=_cost_rank)
    env = os.environ | {"TORCHINDUCTOR_COMPILE_THREADS": str(max(1, _cores() // workers))}
    folder.mkdir(parents=True, exist_ok=True)
    claims = folder / ".claims"
    claims.mkdir(exist_ok=True)
    say(f"precompile: first calls of {len(todo)} cases in {workers} worker processes")
    info |= {"workers": workers, "started": time.perf_counter()}
    procs: list = []
    try:
        for _ in range(workers):
            procs.append(subprocess.Popen([sys.executable, "-m", "mlpbench.compile.precompile", str(folder), "--claims",
                                           str(claims), *[c.id for c in todo]], env=env))
    except BaseException:
        _stop(procs)  # none left running with the GPU when the others could not start
        raise
    return procs


def _stop(procs: list) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        p.wait()


def _cost_rank(case) -> tuple:
    """Costliest first, so that no worker is left with a long compile at the end: compiled models, then
    other compiled cases, then a Triton kernel's first call."""
    from ..registry import OPS, variant_of

    return (not variant_of(case).compiles, not OPS[case.op].name.endswith("_model"))


def claim(claims: Path, k: int) -> bool:
    """Whether this worker takes the k-th case: the first worker to create `claims/k` does. Workers
    take the next unclaimed case when they are free, so a slow compile delays one worker only."""
    try:
        os.close(os.open(claims / str(k), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _finish(procs: list, say, info: dict) -> None:
    """Wait for `procs`; `info` gets their wall time and how many reported failures."""
    if not procs:
        return
    info["failed"] = sum(p.wait() != 0 for p in procs)
    info["wall_s"] = time.perf_counter() - info.pop("started")
    say(f"precompile: done in {info['wall_s']:.1f} s" + (f", {info['failed']} worker(s) reported failures"
                                                         if info["failed"] else ""))


# Set, while first calls are made ahead, to a file that exists once they are done: a measuring process
# started meanwhile (its interpreter, imports and collection overlap the compiles) waits for it before
# its first case (wait_for_ahead), so nothing is timed while the workers hold the CPU and the GPU.
DONE_ENV = "MLPBENCH_PRECOMPILE_DONE"
WAIT_POLL_S = 0.05


def wait_for_ahead(say=None) -> float:
    """Block until the first calls made ahead of this run are done ($MLPBENCH_PRECOMPILE_DONE exists);
    the seconds waited (0.0 when nothing is being made ahead). A folder that is gone (the run that set
    the variable has ended) ends the wait: there is nothing left to wait for."""
    return wait_for_file(os.environ.get(DONE_ENV), say, "waiting for the first calls made ahead")


def wait_for_file(path: str | None, say=None, what: str = "") -> float:
    """Block until `path` exists; the seconds waited (0.0 when `path` is None or already there). A folder
    that is gone (the run that made it has ended) ends the wait: nothing is left to wait for."""
    if not path or os.path.exists(path) or not os.path.isdir(os.path.dirname(path)):
        return 0.0
    t0 = time.perf_counter()
    if say and what:
        say(what)
    while not os.path.exists(path) and os.path.isdir(os.path.dirname(path)):
        time.sleep(WAIT_POLL_S)
    return time.perf_counter() - t0


def auto_workers(cases) -> int:
    """The workers `run` uses by default: `workers_for` the eligible cases on a GPU; none on a CPU,
    where compiles share the cores with the timing threads, or for fewer than two cases."""
    from ..runner import default_device

    n = sum(1 for c in cases if eligible(c))
    return workers_for(n) if default_device() == "cuda" and n > 1 else 0


@contextlib.contextmanager
def ahead(cases, workers: int, say=_print, overlap: bool = False):
    """`run` for `cases` with `workers` (none: nothing done), its caches handed through $MLPBENCH_PRECOMPILED
    to every process started inside, and removed after. Yields `run`'s summary (None when nothing ran).

    `overlap`: yield at once, the workers still running; processes started inside wait for them
    before their first case (wait_for_ahead), and the summary is complete once the block is left."""
    if workers < 1:
        yield None
        return
    import tempfile
    import threading

    folder = Path(tempfile.mkdtemp(prefix="mlpbench-precompiled-"))
    saved = {name: os.environ.get(name) for name in (ENV, DONE_ENV)}
    info = {"cases": 0, "workers": 0, "wall_s": 0.0, "failed": 0}
    done = folder / ".done"
    procs, waiter = [], None
    try:
        procs = _start(cases, folder / "cases", workers, say, info)
        os.environ[ENV] = str(folder / "cases")
        os.environ[DONE_ENV] = str(done)

        def finish():
            try:
                _finish(procs, say, info)
            except Exception as exc:  # noqa: BLE001 - the measuring processes build every case themselves
                info["error"] = f"{type(exc).__name__}: {exc}"
                say(f"precompile: {info['error']}")
            finally:
                with contextlib.suppress(OSError):  # the folder is gone when the block ended early
                    done.touch()

        waiter = threading.Thread(target=finish, name="mlpbench-precompile", daemon=True)
        waiter.start()
        if not overlap:
            waiter.join()
        yield info
        waiter.join()
    finally:
        if waiter is not None and waiter.is_alive():  # the block raised: no worker outlives the run
            _stop(procs)
            waiter.join()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)


def _first_call(case_id: str, folder: Path) -> None:
    from . import codegen
    from .. import registry, runner, workloads

    case = registry.case_by_id(case_id)
    device = runner.default_device()
    if runner.skip_reason(case, device):
        return
    with runner.measuring_threads(device):
        if registry.variant_of(case).compiles:
            with codegen.hermetic() as root:
                workloads.check(workloads.build(case, device))
                target = folder / _slug(case_id)
                shutil.copytree(root, target.with_suffix(".part"), ignore=shutil.ignore_patterns(*DROPPED))
                target.with_suffix(".part").rename(target)  # whole or absent: seed_for never sees half a folder
        else:
            workloads.check(workloads.build(case, device))


def main(argv: list[str]) -> int:
    from .. import environment

    environment.prepare()
    environment.interpret_triton_without_gpu()
    folder, ids = Path(argv[0]), argv[1:]
    claims = None
    if ids[:1] == ["--claims"]:
        claims, ids = Path(ids[1]), ids[2:]
    failed = 0
    from ..runner import allocated_bytes, release_memory

    for k, case_id in enumerate(ids):
        if claims is not None and not claim(claims, k):
            continue  # another worker has it
        before = allocated_bytes()
        try:
            _first_call(case_id, folder)
        except Exception as exc:  # noqa: BLE001 - the measuring process meets it again and records it
            failed += 1
            print(f"precompile: {case_id}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr, flush=True)
        finally:
            release_memory(before)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
