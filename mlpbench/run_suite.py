"""`mlpbench run`'s orchestration: pytest processes over the selected cases, their files merged."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

from . import registry
from .atomic import publish, temp_path


def run(args, root: Path) -> int:
    """`mlpbench run`: validate the selection, run the benchmarks of `root` in pytest (one process, one
    per group of ops, or one per GPU), merge their files into one, print the tables."""
    started = time.perf_counter()
    from .envinfo import machine_slug
    from .runner import default_device

    tier = args.tier or ("standard" if default_device() == "cuda" else "quick")
    try:
        cases = registry.select(tier, args.op, args.variant, args.dtype, args.shape)
    except registry.SelectionError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return 2
    if not cases:
        print(f"mlpbench: error: {registry.why_no_case(tier, args.op, args.variant, args.dtype, args.shape)}",
              file=sys.stderr)
        return 2
    workers = _precompile_workers(getattr(args, "precompile", "0"), cases)
    if workers is None:
        return 2
    from .sources import liger_source

    try:
        liger_source()
    except ValueError as exc:
        print(f"mlpbench: error: {exc}", file=sys.stderr)
        return 2
    out_dir = args.results / machine_slug()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".write-test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        print(f"mlpbench: error: cannot write results to {out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # The pid keeps two runs started in the same second apart.
    json_path = out_dir / f"{stamp}-{tier}-{os.getpid()}.json"
    # Outcomes go into the run's JSON; a file of their own stays only when nothing was timed.
    outcomes_path = json_path.with_name(json_path.stem + ".outcomes.json")
    tmp_outcomes = json_path.with_name(f".{json_path.stem}.outcomes.json")
    tmp_json = temp_path(json_path)
    print(f"mlpbench: {len(cases)} cases of tier {tier!r} on {machine_slug()} → {json_path}", flush=True)

    import pytest

    from .timing import HOST_SAMPLES_S

    argv = [str(root / "benchmarks"), "-v", "-p", "no:cacheprovider", f"--rootdir={root}",
            f"-c={root / 'pytest.ini'}", f"--tier={tier}", f"--benchmark-json={tmp_json}",
            f"--outcomes={tmp_outcomes}",
            # Synchronised host samples for a twentieth of a second per case (at least 5), as the ASV path
            # takes them: the figure is a median, listed, not gated (device time and back-to-back host
            # time have samples of their own), and the tier has a time budget. `-- --benchmark-max-time=1`
            # overrides.
            f"--benchmark-max-time={HOST_SAMPLES_S}"]
    for flag in ("op", "variant", "dtype", "shape"):
        argv += [f"--{flag}={v}" for v in getattr(args, flag) or []]
    if args.trace:
        argv.append(f"--trace-dir={args.trace}")
    if getattr(args, "paired", False):
        argv.append("--paired")
        if default_device() != "cuda":
            print("mlpbench: --paired: back-to-back host time is taken on a GPU only; nothing is paired here")
    n_shards = _shard_count(args.shards)
    if n_shards is None:
        return 2
    ops = list(dict.fromkeys(c.op for c in cases))
    parts: list[dict] = []  # each pytest process (and the precompile step): its label and wall time
    with _scratch(cases, workers, parts):
        rc = _measure(args, argv, cases, ops, n_shards, json_path, tmp_json, tmp_outcomes, parts)
    # The run's own cost, from its start to its file written (the tables printed after are not in it).
    run_info = {"wall_s": time.perf_counter() - started, "parts": parts}
    outcomes_path = _fold_outcomes(json_path, tmp_outcomes, outcomes_path, run_info)
    _summarise(json_path, outcomes_path)
    return 0 if rc in (0, 5) else (2 if rc == 4 else 1)


MAX_PRECOMPILE_WORKERS = 32  # each holds a CUDA context and one case in GPU memory


def _precompile_workers(spec: str, cases) -> int | None:
    from .compile import precompile

    if spec == "auto":
        return precompile.auto_workers(cases)
    if not str(spec).isdigit() or int(spec) > MAX_PRECOMPILE_WORKERS:
        print(f"mlpbench: error: --precompile {spec!r}: a number of workers from 0 (none) to "
              f"{MAX_PRECOMPILE_WORKERS}, or 'auto'", file=sys.stderr)
        return None
    return int(spec)


@contextlib.contextmanager
def _scratch(cases, workers: int, parts: list[dict]):
    """What the run's processes share, removed after: a file for the GPU's ceilings, measured by the
    first process that needs them (pytest_plugin), and with `workers` the cases' first calls made ahead
    of timing (mlpbench/compile/precompile.py), their compile caches handed on through the environment. The
    first pytest process starts while the workers compile, and waits for them before its first case."""
    import tempfile

    from .compile import precompile
    from .pytest_plugin import CEILINGS_ENV

    before = os.environ.get(CEILINGS_ENV)
    with tempfile.TemporaryDirectory(prefix="mlpbench-run-") as folder:
        os.environ[CEILINGS_ENV] = str(Path(folder) / "ceilings.json")
        try:
            with precompile.ahead(cases, workers, say=lambda m: print(f"mlpbench: {m}", flush=True),
                                  overlap=True) as info:
                yield
            if info is not None:
                parts.insert(0, {"part": f"precompile: {info['cases']} cases in {info['workers']} workers",
                                 "wall_s": info["wall_s"]})
        finally:
            if before is None:
                os.environ.pop(CEILINGS_ENV, None)
            else:
                os.environ[CEILINGS_ENV] = before


def _measure(args, argv, cases, ops, n_shards, json_path, tmp_json, tmp_outcomes, parts) -> int:
    """The pytest process(es) of the run: sharded, one per group of ops (op_groups), or this one."""
    import pytest

    if n_shards > 1:
        rc = _run_sharded(argv + list(args.pytest_args), n_shards, json_path, tmp_outcomes, parts)
    elif len(ops) > 1:
        rc = _run_per_op(argv + list(args.pytest_args), op_groups(cases), json_path, tmp_outcomes, parts)
    else:
        t0 = time.perf_counter()
        try:
            rc = pytest.main(argv + list(args.pytest_args))
        finally:
            parts.append({"part": f"op {ops[0]}", "wall_s": time.perf_counter() - t0}
                         | _process_cost(tmp_json, time.time()))
            # pytest-benchmark writes its JSON in place; it becomes a result only once complete.
            if tmp_json.exists() and tmp_json.stat().st_size > 0:
                publish(tmp_json, json_path)
            else:
                tmp_json.unlink(missing_ok=True)
    return rc


def _process_cost(path: Path, ended_at: float) -> dict:
    """`mlpbench_process` of a pytest process's JSON (pytest_plugin.process_cost), its `written_at` made
    `end_s`: from writing the JSON to `ended_at` (the wall clock when the process had exited, or pytest
    returned); {} without one."""
    from .results import process_info

    found = process_info(path)
    written = found.pop("written_at", None)
    if isinstance(written, (int, float)):
        found["end_s"] = round(max(0.0, ended_at - written), 3)
    return found


def _shard_count(spec: str) -> int | None:
    import torch

    if spec == "auto":
        return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1
    if not spec.isdigit() or int(spec) < 1:
        print(f"mlpbench: error: --shards {spec!r}: a positive number or 'auto'", file=sys.stderr)
        return None
    return int(spec)


def _run_sharded(argv: list[str], n: int, json_path: Path, outcomes_path: Path, walls: list[dict]) -> int:
    """One pytest process per shard (and GPU), at once, then one merged JSON and outcomes file."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    parts = []
    for k in range(n):
        env = {"CUDA_VISIBLE_DEVICES": str(k % gpus)} if gpus else {}
        parts.append((f"shard {k}/{n} on {'GPU ' + str(k % gpus) if gpus else 'the CPU'}",
                      ["-q", f"--shard={k}/{n}"], env))
    return _run_parts(argv, parts, json_path, outcomes_path, walls, together=True)


# The most cases one pytest process measures. Each process pays its own start (CUDA, the profiler,
# Inductor, Liger's and transformers' imports: seconds), so ops share processes; but memory that
# PyTorch reserves and empty_cache does not return adds up over a process, and a whole tier in one ran
# out of GPU memory: the standard tier runs in two.
CASES_PER_PROCESS = 200


def op_groups(cases) -> list[list[str]]:
    """The ops of `cases` in processes of their own: consecutive ops, in registry order, together while
    their cases number at most CASES_PER_PROCESS (an op with more has a process to itself)."""
    groups: list[list[str]] = []
    size = 0
    for op in dict.fromkeys(c.op for c in cases):
        n = sum(1 for c in cases if c.op == op)
        if groups and size + n <= CASES_PER_PROCESS:
            groups[-1].append(op)
            size += n
        else:
            groups.append([op])
            size = n
    return groups


def _run_per_op(argv: list[str], groups: list[list[str]], json_path: Path, outcomes_path: Path,
                walls: list[dict]) -> int:
    """One pytest process per group of ops (op_groups), measuring one after the other, then one merged
    JSON and outcomes file. A process starts with no memory reserved by the ops of the processes before
    it. They all start at once: each boots, collects and imports while
    the ones before it measure, and waits for the one before it to exit before its first case."""
    kept = [a for a in argv if not a.startswith("--op=")]
    return _run_parts(kept, [(f"op{'s' if len(g) > 1 else ''} {', '.join(g)}", ["-v", *[f"--op={op}" for op in g]], {})
                             for g in groups], json_path, outcomes_path, walls, together=False)


def _run_parts(argv: list[str], parts: list[tuple[str, list[str], dict]], json_path: Path, outcomes_path: Path,
               walls: list[dict], together: bool) -> int:
    """A pytest process per part (label, extra arguments, extra environment), all started at once, measuring
    together (shards, one per GPU) or in turn (`together` False: each waits for the one before it to
    exit, pytest_plugin.TURN_ENV); their records merged into one file, each record naming the process
    that measured it (`shard`). Appends each part's label and wall time to `walls`: from its start to
    its exit, so the parts of a run in turn overlap."""
    import subprocess
    import tempfile

    from . import shards
    from .atomic import write_json
    from .pytest_plugin import SPAWNED_ENV, TURN_ENV

    jsons = [json_path.with_name(f".{json_path.stem}.part{k}.json") for k in range(len(parts))]
    outs = [json_path.with_name(f".{json_path.stem}.part{k}.outcomes.json") for k in range(len(parts))]
    base = [a for a in argv if not a.startswith(("--benchmark-json=", "--outcomes=", "-v"))]
    procs, codes, held = [], [], []
    with tempfile.TemporaryDirectory(prefix="mlpbench-turns-") as turns:
        turn = [None] + [str(Path(turns) / f"turn{k}") for k in range(1, len(parts))]
        try:
            for k, (label, extra, env) in enumerate(parts):
                in_turn = not together and k > 0
                if not in_turn:
                    print(f"mlpbench: {label}", flush=True)
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest", *base, *extra, f"--benchmark-json={jsons[k]}",
                     f"--outcomes={outs[k]}"], env=os.environ | env | ({TURN_ENV: turn[k]} if in_turn else {})
                    | {SPAWNED_ENV: repr(time.time())}, **({"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT,
                                                            "text": True} if in_turn else {}))
                procs.append((label, time.perf_counter(), proc))
                held.append(_HeldOutput(proc.stdout, f"mlpbench: {label}") if in_turn else None)
            for k, (label, t0, proc) in enumerate(procs):
                codes.append(proc.wait())  # in start order: a part's wall time is at most the time until it is waited on
                walls.append({"part": label, "wall_s": time.perf_counter() - t0, "exited_at": time.time()})
                if held[k] is not None:
                    held[k].close()
                if k + 1 < len(parts) and held[k + 1] is not None:
                    Path(turn[k + 1]).touch()  # the next process may measure: this one has exited
                    held[k + 1].release()
        except BaseException:
            for _, _, proc in procs:  # no process left waiting for a turn, or measuring, after the run
                if proc.poll() is None:
                    proc.terminate()
            for _, _, proc in procs:
                proc.wait()
            raise
        finally:
            for h in held:
                if h is not None:
                    h.release()
                    h.close()
    for entry, path in zip(walls[-len(parts):], jsons):  # each process's time outside its cases, where it wrote it
        entry |= _process_cost(path, entry.pop("exited_at"))
    done = [p for p in jsons if p.exists() and p.stat().st_size > 0]
    if done:
        write_json(json_path, shards.merge(done), compact=True)
    write_json(outcomes_path, shards.merge_outcomes(outs))
    for p in jsons + outs:
        p.unlink(missing_ok=True)
    failed = [c for c in codes if c not in (0, 5)]
    return failed[0] if failed else 0


class _HeldOutput:
    """A process's output, held back until `release` (its turn: the process before it has exited), then
    printed as it comes: processes that start at once print one after the other."""

    def __init__(self, stream, title: str):
        import threading

        self._stream, self._title = stream, title
        self._lines: list[str] | None = []  # None once released
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="mlpbench-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._stream:
            with self._lock:
                if self._lines is not None:
                    self._lines.append(line)
                    continue
            sys.stdout.write(line)
            sys.stdout.flush()

    def release(self) -> None:
        with self._lock:
            if self._lines is None:
                return
            print(self._title, flush=True)
            sys.stdout.write("".join(self._lines))
            sys.stdout.flush()
            self._lines = None

    def close(self) -> None:
        """Once the process has exited: wait until all it printed is read, and print it."""
        self._reader.join()
        self.release()


def _without_process(doc: dict) -> dict:
    """A run's document without a process's own `mlpbench_process`: each process's is in `mlpbench_run`'s parts."""
    return {k: v for k, v in doc.items() if k != "mlpbench_process"}


def _fold_outcomes(json_path: Path, tmp_outcomes: Path, outcomes_path: Path, run_info: dict) -> Path | None:
    """The outcomes into the run's JSON (its `outcomes` list), and `run_info` as its `mlpbench_run`;
    where no JSON was written (nothing timed), into a file of their own. Returns where they are."""
    from .atomic import write_json

    if not tmp_outcomes.exists():
        if json_path.exists():
            write_json(json_path, _without_process(json.loads(json_path.read_text())) | {"mlpbench_run": run_info},
                       compact=True)
            return json_path
        return None
    outcomes = json.loads(tmp_outcomes.read_text())["outcomes"]
    if json_path.exists():
        write_json(json_path, _without_process(json.loads(json_path.read_text()))
                   | {"outcomes": outcomes, "mlpbench_run": run_info}, compact=True)
        where = json_path
    else:
        write_json(outcomes_path, {"outcomes": outcomes, "mlpbench_run": run_info})
        where = outcomes_path
    tmp_outcomes.unlink()
    return where


def _summarise(json_path: Path, outcomes_path: Path | None) -> None:
    from .tables import load_pytest_json, not_timed, op_tables

    if json_path.exists():
        df = load_pytest_json([json_path])
        if not df.empty:
            print("\n" + op_tables(df) + f"\n\n(from {json_path})")
    if outcomes_path is not None and outcomes_path.exists():
        text = not_timed(outcomes_path)
        if text:
            print("\nNot timed:\n" + text + f"\n\n(from {outcomes_path})")
