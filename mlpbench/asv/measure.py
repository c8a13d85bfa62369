"""What an ASV setup_cache does: measure each case once, in one process, and hand `setup` an entry per case.

Building and compiling a case costs far more than measuring it, and ASV starts a process for every
parameter combination of every benchmark, so one setup_cache measures every case of a class. An
entry is the case's record fields, {"skip": reason} (its setup raises NotImplementedError, ASV's
skip) or {"error": ...} (the case failed, a CorrectnessError included: recorded as failed). A
measured entry holds the case's wall time and its phases as the pytest suite's records do.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from ..compile import codegen_record
from .. import registry, runner, timing
from .tiers import CASES_ENV, reason_not_here


def each(ids: list[str], label: str, measure) -> dict:
    """`measure(id)` for every id, as a setup_cache returns it: a case that cannot run maps to
    {"skip": reason} (it raised NotImplementedError), one that failed to {"error": ...}, and the
    other cases still run. Progress goes to stderr (`asv run --show-stderr`)."""
    from ..compile import precompile

    # first calls that worker processes make ahead of this run must be done before anything is timed
    precompile.wait_for_ahead(say=lambda m: print(f"[{label}] {m}", file=sys.stderr, flush=True))
    out = {}
    for k, i in enumerate(ids, 1):
        t0 = time.perf_counter()
        before = runner.allocated_bytes()
        try:
            out[i] = measure(i)
            what = "measured"
        except NotImplementedError as exc:
            out[i] = {"skip": str(exc)}
            what = f"skipped ({exc})"
        except Exception as exc:  # noqa: BLE001 - recorded per case; the other cases still run
            out[i] = {"error": f"{type(exc).__name__}: {exc}"}
            what = f"FAILED ({out[i]['error']})"
        finally:
            runner.release_memory(before)  # free each case's GPU memory before the next
        line = f"[{label} {k}/{len(ids)}] {i}: {what}, {time.perf_counter() - t0:.2f} s"
        print(line, file=sys.stderr, flush=True)
        _progress(line)
    return out


# ASV keeps a setup_cache's output only when it fails: where this names a file, each case's line is
# appended to it as well, for `progress` (the nightly, `mlpbench asv`) to show while ASV runs.
PROGRESS_ENV = "MLPBENCH_PROGRESS"


def _progress(line: str) -> None:
    path = os.environ.get(PROGRESS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@contextlib.contextmanager
def progress(say):
    """While the block runs, `say` each line that setup_caches started inside append to a file of
    their own ($MLPBENCH_PROGRESS): per case, measured or why not, and its seconds."""
    import tempfile
    import threading

    fd, path = tempfile.mkstemp(prefix="mlpbench-progress-", suffix=".log")
    os.close(fd)
    before = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = path
    stop = threading.Event()

    def tail():
        with open(path) as f:
            while True:
                line = f.readline()
                if line:
                    say(line.rstrip("\n"))
                elif stop.is_set():
                    return
                else:
                    time.sleep(0.2)

    reader = threading.Thread(target=tail, name="mlpbench-progress", daemon=True)
    reader.start()
    try:
        yield
    finally:
        stop.set()
        reader.join(10)
        if before is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = before
        with contextlib.suppress(OSError):
            os.unlink(path)


def measure_case(case_id: str, results: Path | None = None) -> dict:
    """Everything the op classes report for one case, after its float64 check. A compiled case's
    codegen record goes under `results` (the results root, the folder holding asv/; None: nowhere)."""
    phases = runner.Phases()
    case = registry.case_by_id(case_id)
    device = runner.default_device()
    reason = reason_not_here(case, device)
    if reason:
        raise NotImplementedError(reason)
    with runner.measuring_threads(device):
        with phases("check"):
            p = runner.prepare(case, device)  # raises CorrectnessError: recorded as failed, never timed
        reason = runner.timing_skip_reason(case, device)
        if reason:
            raise NotImplementedError(reason)
        record = runner.describe(p, None)
        with phases("device"):
            record.set(**runner.device_metrics(p))
        with phases("host"):
            record.set(**runner.back_to_back_metrics(p))
        with phases("profile"):
            record.set(**runner.structure(p))
        # A twentieth of a second of single calls (at least ten), as long as `mlpbench run` takes them for:
        # their median is reported, not gated, on a GPU, and a nightly must leave time for the compile
        # benchmarks.
        with phases("host"):
            record.set(host_time_samples_s=timing.host_time_samples(p.workload.fn, p.input_sets[0],
                                                                    budget_s=timing.HOST_SAMPLES_S, min_samples=10))
    if record.codegen_fingerprint is not None and results is not None:
        # ASV keeps numbers only: the fingerprint goes into its results (track_codegen), the record
        # beside them, content-addressed, for the gate to say what changed (results_dir's parent).
        codegen_record.store(record.codegen, results)
    return record.set(**phases.fields()).extra_info()


def entry(cache: dict, case_id: str) -> dict:
    """The cache's entry for `case_id`; NotImplementedError (ASV's skip) where it was not measured."""
    if case_id not in cache:
        if os.environ.get(CASES_ENV):
            raise NotImplementedError(f"{case_id} was not measured: {CASES_ENV}={os.environ[CASES_ENV]!r} "
                                      "does not select it")
        raise NotImplementedError(f"{case_id} is not a case of the registry")
    found = cache[case_id]
    if "skip" in found:
        raise NotImplementedError(found["skip"])
    if "error" in found:
        raise RuntimeError(found["error"])
    return found
