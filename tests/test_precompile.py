"""First calls ahead of timing (mlpbench/compile/precompile.py) and the ceilings a run's processes share."""

import json
import os

import pytest

from mlpbench import cli, registry
from mlpbench.compile import precompile
from mlpbench.pytest_plugin import CEILINGS_ENV, shared_ceilings
from mlpbench.timing import CEILINGS_VERSION


def test_which_cases_are_made_ahead():
    case = registry.case_by_id
    assert precompile.eligible(case("mlp/compiled/bf16/t8192-d768-h3072"))
    assert precompile.eligible(case("mlp/ours/bf16/t8192-d768-h3072"))  # a Triton kernel's JIT
    assert precompile.eligible(case("mlp/liger/bf16/t8192-d768-h3072"))
    assert not precompile.eligible(case("mlp/eager/bf16/t8192-d768-h3072"))
    # max-autotune benchmarks GEMMs while it compiles: never on a GPU that workers share
    assert not precompile.eligible(case("mlp/maxautotune/bf16/t8192-d768-h3072"))


def test_workers_follow_cores_and_cases():
    assert precompile.workers_for(100, cores=16) == 8
    assert precompile.workers_for(100, cores=6) == 3
    assert precompile.workers_for(2, cores=16) == 2
    assert precompile.workers_for(5, cores=1) == 1


def test_no_workers_on_a_cpu_by_default(monkeypatch):
    from mlpbench import runner

    monkeypatch.setattr(runner, "default_device", lambda: "cpu")
    cases = registry.select("quick", ops=["gelu_mul"])
    assert precompile.auto_workers(cases) == 0


def test_seed_only_where_a_worker_left_one(tmp_path, monkeypatch):
    monkeypatch.delenv(precompile.ENV, raising=False)
    assert precompile.seed_for("mlp/compiled/bf16/t8192-d768-h3072") is None
    monkeypatch.setenv(precompile.ENV, str(tmp_path))
    assert precompile.seed_for("mlp/compiled/bf16/t8192-d768-h3072") is None
    (tmp_path / precompile._slug("mlp/compiled/bf16/t8192-d768-h3072")).mkdir()
    assert precompile.seed_for("mlp/compiled/bf16/t8192-d768-h3072") is not None


def test_bad_worker_count_is_refused(capsys, tmp_path):
    assert cli.main(["run", "--op", "gelu_mul", "--precompile", "many", "--results", str(tmp_path)]) == 2
    assert "--precompile 'many'" in capsys.readouterr().err
    assert cli.main(["run", "--op", "gelu_mul", "--precompile", "500", "--results", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.slow
def test_a_case_compiled_by_a_worker_is_read_not_compiled_again(tmp_path, monkeypatch):
    """A worker compiles the case into its folder; the measuring process starts its hermetic cache from
    it, records that it did, and still checks the result against float64."""
    from mlpbench import runner

    case = registry.case_by_id("gelu_mul/compiled/fp32/t333-h3000")
    with precompile.ahead([case], workers=1, say=lambda m: None) as info:
        assert info["cases"] == 1 and info["failed"] == 0
        assert precompile.seed_for(case.id) is not None
        seeds = list(precompile.seed_for(case.id).rglob("*"))
        assert seeds and not [p for p in seeds if p.name.endswith(".best_config")]
        with runner.measuring_threads("cpu"):  # as the suite builds a case: the thread count is in its code
            prepared = runner.prepare(case, "cpu")
    assert prepared.codegen["precompiled"] is True  # the compile read the worker's folder (a cache hit)
    assert prepared.max_rel_err <= 1e-4
    assert precompile.seed_for(case.id) is None  # the folder is gone with the run
    # a folder the compile cannot use (here: empty) is recorded as missed, and the case compiled here
    (tmp_path / precompile._slug(case.id)).mkdir()
    monkeypatch.setenv(precompile.ENV, str(tmp_path))
    with runner.measuring_threads("cpu"):
        again = runner.prepare(case, "cpu")
    assert again.codegen["precompiled"] is False and again.max_rel_err <= 1e-4


def test_ceilings_are_measured_once_per_run(tmp_path, monkeypatch):
    calls = []

    measured = {"copy_bandwidth_Bps": 1.0, "ceilings_version": CEILINGS_VERSION}

    def measure():
        calls.append(1)
        return measured

    monkeypatch.setenv(CEILINGS_ENV, str(tmp_path / "ceilings.json"))
    assert shared_ceilings(measure) == measured
    assert shared_ceilings(measure) == measured
    assert len(calls) == 1
    assert json.loads((tmp_path / "ceilings.json").read_text()) == measured
    # a file of another ceilings version is measured again, not trusted
    (tmp_path / "ceilings.json").write_text(json.dumps({"copy_bandwidth_Bps": 2.0, "ceilings_version": 1}))
    assert shared_ceilings(measure) == measured and len(calls) == 2


def test_a_failed_ceiling_measurement_is_recorded_not_shared(tmp_path, monkeypatch):
    monkeypatch.setenv(CEILINGS_ENV, str(tmp_path / "ceilings.json"))

    def broken():
        raise RuntimeError("no GPU memory left")

    assert shared_ceilings(broken) == {"error": "RuntimeError: no GPU memory left"}
    assert not (tmp_path / "ceilings.json").exists()


def test_ops_share_a_process_up_to_the_cap():
    from mlpbench import run_suite

    cases = registry.select("standard")
    groups = run_suite.op_groups(cases)
    assert [op for g in groups for op in g] == list(dict.fromkeys(c.op for c in cases))  # each op once, in order
    for g in groups:
        n = sum(1 for c in cases if c.op in g)
        assert n <= run_suite.CASES_PER_PROCESS or len(g) == 1, (g, n)
    assert len(groups) < len({c.op for c in cases})


def test_a_case_that_gave_its_memory_back_is_not_collected(monkeypatch):
    """A full collection walks every object of the process: it runs only where the case left GPU memory
    allocated (past the slack a cuBLAS workspace takes), or nothing tells."""
    import gc

    import torch

    from mlpbench import runner

    collected = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(runner, "_FROZEN", True)
    monkeypatch.setattr(runner, "allocated_bytes", lambda: 10 * 2**30)
    runner.release_memory(10 * 2**30)  # everything the case allocated was freed already
    assert collected == []
    runner.release_memory(10 * 2**30 - runner.RELEASE_SLACK_BYTES + 1)  # within the slack
    assert collected == []
    runner.release_memory(10 * 2**30 - runner.RELEASE_SLACK_BYTES - 1)  # the case left memory: collected
    assert collected == [1]
    runner.release_memory(None)  # unknown: collected
    assert collected == [1, 1]
    monkeypatch.setattr(runner, "allocated_bytes", lambda: None)  # no GPU: collected
    runner.release_memory(0)
    assert collected == [1, 1, 1]


def test_what_the_first_case_froze_is_unfrozen_at_exit():
    """gc.freeze after the first case keeps later collections short; at exit the objects are unfrozen so
    the interpreter's last collection frees them (Triton's nanobind bindings report them as leaked
    otherwise). atexit runs its handlers last registered first: the probe, registered before, sees the
    state after release_memory's handler ran."""
    import subprocess
    import sys

    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('frozen at exit', gc.get_freeze_count()))\n"
            "from mlpbench import runner\n"
            "runner.release_memory(None)\n"
            "print('frozen', gc.get_freeze_count() > 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["frozen True", "frozen at exit 0"]


def test_each_case_is_claimed_by_one_worker_only(tmp_path):
    assert precompile.claim(tmp_path, 0) and not precompile.claim(tmp_path, 0)
    assert precompile.claim(tmp_path, 1)


def test_a_measuring_process_waits_for_the_first_calls_made_ahead(monkeypatch):
    """overlap=True yields while the workers still run; wait_for_ahead blocks until they are done, and
    the summary is complete once the block is left."""
    import threading
    import time

    gate = threading.Event()

    def fake_start(cases, folder, workers, say, info):
        info |= {"cases": 2, "workers": 1, "started": time.perf_counter()}
        return ["a worker"]

    def fake_finish(procs, say, info):
        gate.wait(10)
        info["wall_s"] = time.perf_counter() - info.pop("started")

    monkeypatch.setattr(precompile, "_start", fake_start)
    monkeypatch.setattr(precompile, "_finish", fake_finish)
    monkeypatch.delenv(precompile.DONE_ENV, raising=False)
    assert precompile.wait_for_ahead() == 0.0  # nothing made ahead: no wait
    with precompile.ahead([], workers=1, say=lambda m: None, overlap=True) as info:
        assert "started" in info  # yielded before the workers were done
        threading.Timer(0.3, gate.set).start()
        waited = precompile.wait_for_ahead()
        assert waited >= 0.2
    assert info["cases"] == 2 and info["wall_s"] >= 0.2 and "started" not in info
    assert precompile.DONE_ENV not in os.environ and precompile.ENV not in os.environ
    # a variable left behind by a run that has ended (its folder gone) does not hold a process up
    monkeypatch.setenv(precompile.DONE_ENV, "/nonexistent-mlpbench-run/.done")
    assert precompile.wait_for_ahead() == 0.0


def test_preload_imports_the_selected_ops_modules_only(monkeypatch):
    import importlib
    from types import SimpleNamespace as NS

    from mlpbench import runner

    imported, loaded = [], []
    monkeypatch.setattr(importlib, "import_module", lambda name: imported.append(name))

    def op(name):
        return NS(name=name, variants=[NS(preload=None), NS(preload=lambda: loaded.append(name))])

    monkeypatch.setattr(registry, "OPS", {"a": op("a"), "b": op("b")})
    runner.preload(["a", "a"])
    assert loaded == ["a"] and "torch._inductor.compile_fx" in imported
    loaded.clear()
    runner.preload()
    assert loaded == ["a", "b"]


class _Worker:
    """A stand-in worker process: running until terminated."""

    def __init__(self, gate):
        self.gate, self.terminated = gate, False

    def poll(self):
        return 0 if self.terminated else None

    def terminate(self):
        self.terminated = True
        self.gate.set()

    def wait(self):
        return 0


def test_the_done_file_appears_when_the_workers_bookkeeping_fails(monkeypatch):
    def broken_finish(procs, say, info):
        raise RuntimeError("a worker could not be waited for")

    monkeypatch.setattr(precompile, "_start", lambda cases, folder, workers, say, info: ["a worker"])
    monkeypatch.setattr(precompile, "_finish", broken_finish)
    with precompile.ahead([], workers=1, say=lambda m: None, overlap=True) as info:
        precompile.wait_for_ahead()  # returns: the file is made whatever happened to the bookkeeping
        assert os.path.exists(os.environ[precompile.DONE_ENV])
    assert info["error"] == "RuntimeError: a worker could not be waited for"


def test_a_run_that_fails_leaves_no_worker_running(monkeypatch):
    import threading

    gate = threading.Event()
    worker = _Worker(gate)
    monkeypatch.setattr(precompile, "_start", lambda cases, folder, workers, say, info: [worker])
    monkeypatch.setattr(precompile, "_finish", lambda procs, say, info: gate.wait(10))
    with pytest.raises(KeyboardInterrupt):
        with precompile.ahead([], workers=1, say=lambda m: None, overlap=True):
            raise KeyboardInterrupt
    assert worker.terminated and precompile.DONE_ENV not in os.environ
