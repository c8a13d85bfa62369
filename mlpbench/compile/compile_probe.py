"""The compile tax, each figure from a fresh process with empty compiler caches.

    python -m mlpbench.compile.compile_probe CASE_ID [--dynamic]          cold compile and recompile
    python -m mlpbench.compile.compile_probe CASE_ID --sequence [--dynamic] a run over changing token counts
    ... --wait: say "ready" once the device is warm, time nothing before "go" on stdin (`started`)

A process of its own, because torch.compile, Inductor and Triton keep in-memory caches that no API
empties completely; `probe()` gives it fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR.

cold_compile_s: wall time of the first call minus a steady-state call (CUDA and cuBLAS are already
initialised by an eager call of the same op). recompile_s: the same for the first call with a new
token count on the already compiled callable: a full recompile with static shapes (the default,
as in the blog), none expected with dynamic=True.

--sequence: the blog's closing trade-off as one number. The callable meets TOKEN_SEQUENCE in
order, a new shape each step, and total_s is the wall time of all steps, compilation included:
static compilation pays a compile per shape, dynamic compilation one or two, Liger and our kernel
none.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Ten token counts an inference server meets in a few seconds: decode, ragged prefills, full batches.
TOKEN_SEQUENCE = (1, 16, 64, 128, 333, 512, 1000, 2048, 4096, 8192)


def _timed(fn, inputs) -> float:
    from ..timing import sync_perf_counter

    t0 = sync_perf_counter()
    fn(*inputs)
    return sync_perf_counter() - t0


def _with_tokens(case, tokens: int):
    dims = dict(case.shape.dims)
    dims["t"] = tokens
    return dataclasses.replace(case, shape=dataclasses.replace(case.shape, dims=tuple(dims.items())))


def _baseline(case):
    from ..registry import OPS

    return dataclasses.replace(case, variant=OPS[case.op].baseline)


def _inputs_for(case, tokens: int, device: str, seed: int) -> tuple:
    from .. import workloads

    return workloads.build(_baseline(_with_tokens(case, tokens)), device).make_inputs(seed)


def _warm_device(case, device: str) -> None:
    from .. import workloads

    eager = workloads.build(_baseline(case), device)
    eager.fn(*eager.make_inputs(0))  # CUDA context, cuBLAS handles: not compile time


def _cold_and_recompile(case, device: str, dynamic: bool):
    """The cold-compile probe: its workload and inputs built, then a function timing it."""
    from .. import workloads

    wl = workloads.build(case, device, dynamic=dynamic)
    inputs = wl.make_inputs(0)
    tokens = case.shape.as_dict()["t"] + 17  # a token count the compiled graph has not seen
    new_inputs = _inputs_for(case, tokens, device, 1)

    def run() -> dict:
        first = _timed(wl.fn, inputs)
        steady = statistics.median(_timed(wl.fn, inputs) for _ in range(5))
        first_new = _timed(wl.fn, new_inputs)
        steady_new = statistics.median(_timed(wl.fn, new_inputs) for _ in range(5))
        return {
            "cold_compile_s": first - steady,
            "recompile_s": first_new - steady_new,
            "steady_call_s": steady,
            "recompile_tokens": tokens,
        }

    return run


def _sequence(case, device: str, dynamic: bool, tokens_seq=TOKEN_SEQUENCE):
    """The changing-shapes probe: its workload and every step's inputs built, then a function timing it."""
    from .. import workloads

    wl = workloads.build(_with_tokens(case, tokens_seq[0]), device, dynamic=dynamic)
    inputs = [_inputs_for(case, tokens, device, k) for k, tokens in enumerate(tokens_seq)]

    def run() -> dict:
        steps = [_timed(wl.fn, step) for step in inputs]
        return {"tokens": list(tokens_seq), "step_s": steps, "total_s": sum(steps)}

    return run


def measure(case_id: str, dynamic: bool = False, sequence: bool = False, wait=None) -> dict:
    """The probe's figures for `case_id`. `wait`: called once the device is warm and the case built,
    before anything is timed (a probe started ahead waits there for its go). Building imports
    Dynamo and Inductor (torch.compile), which no figure holds: it happens before the go, so that a
    probe's turn lasts only as long as what it times."""
    from .. import registry
    from ..runner import default_device

    case = registry.case_by_id(case_id)
    if not registry.variant_of(case).compiles and not sequence:
        raise SystemExit(f"compile_probe: {case_id!r} is not a compiled case")
    device = default_device()
    _warm_device(case, device)
    run = (_sequence if sequence else _cold_and_recompile)(case, device, dynamic)
    if wait is not None:
        wait()
    return {
        "case": case_id,
        "dynamic": dynamic,
        **run(),
        "method": "fresh process, empty TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR; synchronised wall time"
                  + ("" if sequence else "; first call minus steady call"),
    }


READY, GO = "ready\n", "go\n"  # what a probe started ahead says once its device is warm; what starts its timing


def _args(case_id: str, dynamic: bool, sequence: bool) -> list[str]:
    return [case_id] + (["--dynamic"] if dynamic else []) + (["--sequence"] if sequence else [])


class _Started:
    """A probe's process in a session of its own, with empty compiler caches of its own. With `wait` it
    imports, warms the device and says READY, then blocks until `result` sends GO."""

    def __init__(self, args: list[str], wait: bool):
        import queue
        import threading

        self.args = args
        self._tmp = tempfile.TemporaryDirectory(prefix="mlpbench-compile-")
        env = os.environ | {
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(self._tmp.name, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(self._tmp.name, "triton"),
        }
        self._stderr = open(os.path.join(self._tmp.name, "stderr"), "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "mlpbench.compile.compile_probe", *args, *(["--wait"] if wait else [])],
                                     env=env, text=True, stdin=subprocess.PIPE if wait else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True)
        self.wait = wait
        self.is_ready = False
        self.error: Exception | None = None  # why it could not get ready (`started`), said by `probe`
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name="mlpbench-probe").start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # the process closed its output: it exited

    def _line(self, timeout: float) -> str | None:
        import queue

        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"compile probe {' '.join(self.args)}: nothing said in {timeout:.0f} s") from None

    def _failed(self, what: str) -> RuntimeError:
        self._kill()
        self._stderr.seek(0)
        err = self._stderr.read()[-2000:]
        self.close()
        return RuntimeError(f"compile probe {' '.join(self.args)} {what}:\n{err}")

    def ready(self, timeout: float) -> None:
        """Block until the process has said READY (imported, device warm)."""
        while (line := self._line(timeout)) != READY:
            if line is None:
                raise self._failed(f"exited with status {self.proc.wait()} before it was ready")
        self.is_ready = True

    def result(self, timeout: float) -> dict:
        """Its figures: GO sent (where it waits), then its JSON line read. The process is killed with its
        own children as soon as it has spoken, so that its exit (Inductor's compile workers, CUDA's
        teardown) does not overlap the next probe's timing."""
        try:
            if self.wait:
                if not self.is_ready:
                    self.ready(timeout)
                self.proc.stdin.write(GO)
                self.proc.stdin.flush()
            lines = []
            while (line := self._line(timeout)) is not None:
                lines.append(line)
                if line.startswith("{"):
                    break
            if not lines or not lines[-1].startswith("{"):
                raise self._failed(f"exited with status {self.proc.wait()} before its figures")
            return json.loads(lines[-1])
        finally:
            self.close()

    def _kill(self) -> None:
        import signal

        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        self._kill()
        self._stderr.close()
        self._tmp.cleanup()


# Probes started ahead (`started`) and ready, by their arguments: `probe` takes them in turn.
_WAITING: dict[tuple, list[_Started]] = {}


@contextlib.contextmanager
def started(specs, timeout: float = 900):
    """Start a process for every probe of `specs` ((case_id, dynamic, sequence) tuples) at once, and return
    once all of them are ready (imported, device warm) or have failed. `probe` then takes the one started
    for its arguments: only what a probe times runs after its go, one probe at a time, with every other
    process of the box idle. Each process is still fresh, with empty caches. Those left unused are
    stopped when the block ends."""
    mine: list[_Started] = []
    try:
        for spec in specs:
            mine.append(_Started(_args(*spec), wait=True))
        for p in mine:
            try:
                p.ready(timeout)
            except (RuntimeError, TimeoutError) as exc:
                p.error = exc
            _WAITING.setdefault(_spec_of(p.args), []).append(p)
        yield
    finally:
        for p in mine:
            p.close()
            waiting = _WAITING.get(_spec_of(p.args), [])
            if p in waiting:
                waiting.remove(p)


def _spec_of(args: list[str]) -> tuple:
    return (args[0], "--dynamic" in args, "--sequence" in args)


def probe(case_id: str, *, dynamic: bool = False, sequence: bool = False, timeout: float = 900) -> dict:
    """Run a probe for `case_id` in a new process with empty compiler caches; return its JSON. A process
    `started` for the same arguments is used where there is one."""
    waiting = _WAITING.get((case_id, dynamic, sequence))
    found = waiting.pop(0) if waiting else _Started(_args(case_id, dynamic, sequence), wait=False)
    if found.error is not None:
        raise found.error
    return found.result(timeout)


if __name__ == "__main__":
    from mlpbench import environment

    environment.prepare()  # inherited from the process that started the probe; a probe run by hand needs it too
    parser = argparse.ArgumentParser(prog="python -m mlpbench.compile.compile_probe")
    parser.add_argument("case_id")
    parser.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True)")
    parser.add_argument("--sequence", action="store_true", help=f"run over token counts {TOKEN_SEQUENCE}")
    parser.add_argument("--wait", action="store_true",
                        help=f"say {READY.strip()!r} once the device is warm, then wait for {GO.strip()!r} on stdin")
    a = parser.parse_args()

    def wait_for_go():
        sys.stdout.write(READY)
        sys.stdout.flush()
        if sys.stdin.readline() != GO:
            sys.exit(3)  # the process that started it is gone: nothing to measure for

    print(json.dumps(measure(a.case_id, dynamic=a.dynamic, sequence=a.sequence, wait=wait_for_go if a.wait else None)),
          flush=True)
