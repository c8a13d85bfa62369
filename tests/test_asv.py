"""ASV on a CPU: the existing-environment path end to end, and the generated benchmark classes."""

import json
import os
import subprocess
import sys

import pytest

from project_copy import git, project_repo

from mlpbench import asv_machine, asv_suite, registry



def test_classes_follow_the_registry(monkeypatch):
    monkeypatch.setenv("MLPBENCH_TIER", "quick")
    monkeypatch.delenv("MLPBENCH_CASES", raising=False)
    classes = asv_suite.classes()
    host = classes["MlpHost"]
    assert host.params == [[c.id for c in registry.select("quick", ops=["mlp"])]]
    assert host.param_names == ["case"]
    assert host.version == asv_suite.VERSION
    assert {"CompileTime", "CompileTimeDynamic", "ChangingShapes"} <= set(classes)
    monkeypatch.setenv("MLPBENCH_CASES", "gelu_mul/eager/*")
    classes = asv_suite.classes()
    assert set(classes) == {"GeluMulHost"}


def test_bad_tier_is_named(monkeypatch):
    monkeypatch.setenv("MLPBENCH_TIER", "nightly")
    with pytest.raises(registry.SelectionError, match="unknown tier 'nightly'"):
        asv_suite.classes()


def test_machine_entry_splits_series_on_the_stack(tmp_path):
    path = tmp_path / "machines.json"
    entry = asv_machine.register("box", path=path)
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["box"] == entry
    for key in asv_machine.SPLIT_KEYS:
        assert key in entry


@pytest.mark.slow
def test_asv_existing_environment_records_the_commit(tmp_path):
    repo = project_repo(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    asv_machine.register("cibox", path=home / ".asv-machine.json")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    env = os.environ | {"HOME": str(home), "MLPBENCH_TIER": "quick", "MLPBENCH_CASES": "gelu_mul/eager/fp32/*"}
    proc = subprocess.run(
        [sys.executable, "-m", "asv", "run", "--environment", f"existing:{sys.executable}", "--set-commit-hash", head,
         "--machine", "cibox", "--launch-method", "spawn", "--record-samples"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result_file,) = (repo / "results" / "asv" / "cibox").glob(f"{head[:8]}-existing-*.json")
    doc = json.loads(result_file.read_text())
    assert doc["commit_hash"] == head
    assert doc["params"]["machine"] == "cibox" and "torch" in doc["params"] and "gpu" in doc["params"]
    cols = doc["result_columns"]
    row = dict(zip(cols, doc["results"]["asv_cases.GeluMulHost.time_host"]))
    assert row["params"] == [["'gelu_mul/eager/fp32/t333-h3000'"]]
    assert row["version"] == asv_suite.VERSION
    (median,) = row["result"]
    (samples,) = row["samples"]
    assert 0 < median < 1 and len(samples) >= 10


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MLPBENCH_TEST_ASV_VIRTUALENV") != "1",
                    reason="builds a virtualenv and installs torch, triton and the project's dependencies "
                           "(about 7 minutes); set MLPBENCH_TEST_ASV_VIRTUALENV=1 to run it")
def test_plain_asv_run_builds_and_installs_each_commit(tmp_path):
    repo = project_repo(tmp_path)
    (repo / "README.md").write_text("tiny\n")
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    home = tmp_path / "home"
    home.mkdir()
    asv_machine.register("cibox", path=home / ".asv-machine.json")
    env = os.environ | {"HOME": str(home), "MLPBENCH_TIER": "quick", "MLPBENCH_CASES": "gelu_mul/eager/fp32/*"}
    proc = subprocess.run(
        [sys.executable, "-m", "asv", "run", "--machine", "cibox", "--launch-method", "spawn", "--record-samples", "HEAD~1..HEAD"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=3000,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = sorted((repo / "results" / "asv" / "cibox").glob("*-virtualenv-*.json"))
    assert len(files) == 1  # HEAD~1..HEAD is the one commit after HEAD~1
    doc = json.loads(files[0].read_text())
    assert doc["requirements"] == {"torch": "2.13.0"}
    assert "asv_cases.GeluMulHost.time_host" in doc["results"]


def test_mlpbench_asv_runs_one_asv_run_per_op_so_a_kill_loses_one_op():
    from mlpbench import cli

    chunks = cli._asv_chunks({"MLPBENCH_TIER": "quick", "MLPBENCH_CASES": "gelu_mul/eager/*,linear/*"})
    assert [what for _, what in chunks] == ["linear", "gelu_mul", "compile time"]  # registry.OPS order
    regex = dict((what, rx) for rx, what in chunks)["gelu_mul"]
    import re

    assert re.search(regex, "asv_cases.GeluMulHost.time_host")
    assert not re.search(regex, "asv_cases.GeluMulTrainHost.time_host")
    assert "MLPBENCH_CASES" not in os.environ  # the selection was read, not left behind


def test_a_setup_cache_records_skips_and_failures_per_case_and_goes_on():
    def measure(case_id):
        if case_id == "skipped":
            raise NotImplementedError("needs a GPU")
        if case_id == "broken":
            raise RuntimeError("compile error")
        return {"value": 1.0}

    out = asv_suite._each(["skipped", "broken", "fine"], "test", measure)
    assert out == {"skipped": {"skip": "needs a GPU"}, "broken": {"error": "RuntimeError: compile error"},
                   "fine": {"value": 1.0}}
    with pytest.raises(NotImplementedError, match="needs a GPU"):
        asv_suite._from_cache(out, "skipped")


def test_dynamic_recompile_is_a_class_of_mlp_cases_and_skips_happen_in_setup(monkeypatch):
    # Probed with dynamic=True for the MLP only: a class of its own, so no case needs skipping (raised
    # from a benchmark's body, NotImplementedError is a failure to ASV, not a skip:
    # results/logs/h200-20261130-mlp/compile-dynamic-fix.log).
    monkeypatch.setattr(asv_suite, "probe", lambda case_id, dynamic=False: {
        "cold_compile_s": 2.0, "recompile_s": 0.01 if dynamic else 0.5, "dynamic": dynamic})
    static, dynamic = asv_suite.compile_class(), asv_suite.compile_dynamic_class()
    assert dynamic.params[0] and all(i.startswith("mlp/") for i in dynamic.params[0])
    assert any(not i.startswith("mlp/") for i in static.params[0])
    mlp = dynamic.params[0][0]
    assert dynamic().track_recompile_new_shape_dynamic(dynamic().setup_cache(), mlp) == 0.01
    assert static().track_recompile_new_shape(static().setup_cache(), mlp) == 0.5
    for cls in (static, dynamic, asv_suite.sequence_class()):
        with pytest.raises(NotImplementedError, match="needs a GPU"):
            cls.setup(cls(), {"x": {"skip": "needs a GPU"}}, "x")


def test_every_generated_class_has_a_setup_cache_of_its_own(monkeypatch):
    # ASV hands one setup_cache result to every class whose setup_cache has the same key (module and
    # line): generated classes share a line, and a shared key fed one class's cache to the others.
    from asv_runner.benchmarks._base import get_setup_cache_key

    monkeypatch.setenv("MLPBENCH_TIER", "quick")
    monkeypatch.delenv("MLPBENCH_CASES", raising=False)
    made = [asv_suite.device_class(op) for op in registry.OPS] + [
        asv_suite.compile_class(), asv_suite.compile_dynamic_class(), asv_suite.sequence_class()]
    keys = [get_setup_cache_key(cls.setup_cache) for cls in made]
    assert len(set(keys)) == len(made), keys
