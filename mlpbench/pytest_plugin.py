"""The pytest plugin behind the benchmark suite: case selection options, machine info, outcomes.

Loaded by the repository's conftest.py. Case selection options mirror `mlpbench run`;
pytest-benchmark's own options work unchanged. Every case's outcome (passed, failed, skipped)
with its reason goes into the `--benchmark-json` document under "outcomes", because pytest-benchmark
records only what was timed; `--outcomes PATH` writes them to a file of their own as well (a run
that timed nothing gets no benchmark JSON).
"""

import os
import time
from pathlib import Path

import pytest

from mlpbench import registry


def pytest_addoption(parser):
    group = parser.getgroup("mlpbench", "mlpbench case selection")
    group.addoption("--tier", choices=registry.TIERS, default=None,
                    help="cases of this tier (default: standard with a GPU, quick without)")
    group.addoption("--op", action="append", default=None, help=f"only this op (repeatable): {', '.join(registry.OPS)}")
    group.addoption("--variant", action="append", default=None,
                    help=f"only this variant (repeatable): {', '.join(registry.all_variants())}")
    group.addoption("--dtype", action="append", default=None, help=f"only this dtype (repeatable): {', '.join(registry.DTYPES)}")
    group.addoption("--shape", action="append", default=None, help="only this shape id (repeatable), e.g. t8192-d768-h3072")
    group.addoption("--trace-dir", type=Path, default=None,
                    help="write one Chrome/Perfetto trace per case (GPU), named by case id")
    group.addoption("--paired", action="store_true", default=False,
                    help="also time each case's back-to-back host rounds interleaved with its op's eager case of "
                         "the same dtype and shape (GPU): the ratio host_time_back_to_back_vs_eager")
    group.addoption("--shard", default=None, metavar="K/N",
                    help="only every N-th selected case, starting at K (one process per GPU; see mlpbench.shards)")
    group.addoption("--outcomes", type=Path, default=None,
                    help="write every case's outcome and reason to this JSON file (atomically)")


def pytest_configure(config):
    # For runs that load the plugin with -p; the repository's conftest.py does this before importing torch.
    from mlpbench import environment

    environment.prepare()
    environment.interpret_triton_without_gpu()
    _OUTCOMES.clear()  # a second pytest.main in one process starts with no outcomes of the first
    _PROCESS.clear()
    _PROCESS.update(configured_at=time.perf_counter(), configured_wall=time.time(), release_s=0.0, ceilings_s=0.0,
                    waited_s=0.0, turn_s=0.0)


_OUTCOMES: dict[str, dict] = {}
# Where this process's time outside its cases goes, for the run file's `parts` (run_suite): from its
# start to pytest's configuration (the interpreter, torch's import), from configuring to the first case
# (collection, imports), memory released between cases, the ceilings.
_PROCESS: dict[str, float] = {}
# Set by the process that starts this one (run_suite), to its wall clock at the start: `boot_s` is
# measured from it. Wall clocks, not perf_counter, because the two readings are taken in two processes.
SPAWNED_ENV = "MLPBENCH_SPAWNED_AT"


def pytest_collection_finish(session):
    """Before the first case: on a GPU, the imports its first calls would make (runner.preload); then,
    where a run is making first calls ahead in worker processes, wait for them (precompile)."""
    cases = [item.callspec.params["case"] for item in session.items
             if "test_case[" in item.nodeid and hasattr(item, "callspec")]
    if not cases:
        return
    from mlpbench.compile import precompile
    from mlpbench import runner

    def say(m):
        print(f"\nmlpbench: {m}", flush=True)

    if runner.default_device() == "cuda":
        runner.preload(c.op for c in cases)
    _PROCESS["waited_s"] = _PROCESS.get("waited_s", 0.0) + precompile.wait_for_ahead(say=say)
    _PROCESS["turn_s"] = _PROCESS.get("turn_s", 0.0) + precompile.wait_for_file(
        os.environ.get(TURN_ENV), say, "waiting for the pytest process before this one to finish")


# Set by `mlpbench run` when it starts its pytest processes at once (run_suite._run_parts): a file that
# appears once the process before this one has exited. The process boots, collects and imports while the
# one before measures, and times nothing until the GPU and the CPU are its own.
TURN_ENV = "MLPBENCH_TURN"


def pytest_runtest_logstart(nodeid, location):
    _PROCESS.setdefault("first_case_at", time.perf_counter())


def note_release(seconds: float) -> None:
    """Add the seconds one case's memory release took (the suite's teardown) to this process's account."""
    _PROCESS["release_s"] = _PROCESS.get("release_s", 0.0) + seconds


def process_cost() -> dict:
    """This process's time outside its cases so far: `boot_s` (started to configured, where the starting
    process said when it started), `start_s` (configured to first case), of it `waited_s` (for the first
    calls made ahead by other processes) and `turn_s` (for the process before it), `release_s`,
    `ceilings_s`, and `written_at`, the wall clock now, from which the starting process tells how long
    the exit took."""
    start = _PROCESS.get("first_case_at", time.perf_counter()) - _PROCESS.get("configured_at", time.perf_counter())
    out = {"start_s": round(start, 3), "waited_s": round(_PROCESS.get("waited_s", 0.0), 3),
           "turn_s": round(_PROCESS.get("turn_s", 0.0), 3),
           "release_s": round(_PROCESS.get("release_s", 0.0), 3),
           "ceilings_s": round(_PROCESS.get("ceilings_s", 0.0), 3), "written_at": time.time()}
    try:
        out["boot_s"] = round(_PROCESS["configured_wall"] - float(os.environ[SPAWNED_ENV]), 3)
    except (KeyError, ValueError):
        pass
    return out


def pytest_runtest_logreport(report):
    case = _case_of(report.nodeid)
    if case is None or (report.when != "call" and report.outcome == "passed"):
        return
    if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2].removeprefix("Skipped: ")
    elif report.outcome == "failed":
        # The exception's own message ("CorrectnessError: … relative error 0.36 > tolerance 1e-4").
        crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
        reason = crash or (report.longreprtext.strip().splitlines() or ["failed"])[-1]
    else:
        reason = ""
    if case in _OUTCOMES and _OUTCOMES[case]["outcome"] == "failed":
        return  # keep the first failure (a teardown report must not overwrite it)
    _OUTCOMES[case] = {"case": case, "outcome": report.outcome, "reason": reason, "when": report.when}


def _case_of(nodeid: str) -> str | None:
    if "test_case[" not in nodeid:
        return None
    return nodeid.split("test_case[", 1)[1].rstrip("]")


def pytest_sessionfinish(session):
    path = session.config.getoption("--outcomes", None)
    if path:
        from mlpbench.atomic import write_json

        write_json(path, {"outcomes": list(_OUTCOMES.values())})


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["outcomes"] = list(_OUTCOMES.values())
    output_json["mlpbench_process"] = process_cost()


def selected_tier(config) -> str:
    from mlpbench.runner import default_device

    return config.getoption("--tier") or ("standard" if default_device() == "cuda" else "quick")


def selected_cases(config) -> list[registry.Case]:
    tier = selected_tier(config)
    from mlpbench import shards

    given = {"ops": config.getoption("--op"), "variants": config.getoption("--variant"),
             "dtypes": config.getoption("--dtype"), "shapes": config.getoption("--shape")}
    try:
        cases = registry.select(tier, **given)
        if not cases:  # a valid value of another tier, say which (rather than one skipped empty test)
            raise registry.SelectionError(registry.why_no_case(tier, **given))
        return shards.pick(cases, config.getoption("--shard"))
    except (registry.SelectionError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None


# A file the processes of one `mlpbench run` share the GPU's ceilings through: a process that finds it
# reads its figures, one that does not measures them (seconds of 1 GiB copies and 8192³ GEMMs) and
# writes it; shards that finish together may each measure.
CEILINGS_ENV = "MLPBENCH_CEILINGS"


def shared_ceilings(measure) -> dict:
    """`measure()`, or what an earlier process of this run wrote to $MLPBENCH_CEILINGS; written there
    when this process measured. A failed measurement is recorded as {"error": ...} and not shared."""
    import json

    path = Path(os.environ[CEILINGS_ENV]) if os.environ.get(CEILINGS_ENV) else None
    if path is not None and path.is_file():
        from mlpbench.timing import CEILINGS_VERSION

        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            found = None  # unreadable: measure here
        if isinstance(found, dict) and found.get("ceilings_version") == CEILINGS_VERSION:
            return found
    try:
        measured = measure()
    except Exception as exc:  # noqa: BLE001 - a run's records must still be written
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if path is not None and measured:
        from mlpbench.atomic import write_json

        write_json(path, measured)
    return measured


def pytest_benchmark_update_machine_info(config, machine_info):
    from mlpbench.envinfo import environment, machine_slug
    from mlpbench.timing import ceilings

    from mlpbench.runner import release_memory

    release_memory()  # the cases' memory back before the ceilings' 1 GiB buffers
    t0 = time.perf_counter()
    measured = shared_ceilings(ceilings)
    _PROCESS["ceilings_s"] = _PROCESS.get("ceilings_s", 0.0) + time.perf_counter() - t0
    machine_info["mlpbench"] = environment() | {"machine": machine_slug(), "ceilings": measured}
