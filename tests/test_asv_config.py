"""What ASV's own commands are told: which torch an environment it makes may hold, which benchmarks the
dashboard's Regressions page may flag and at what threshold, what a benchmark process measures, and
why a benchmark skips on this machine."""

import json
import re

import pytest
from project_copy import ROOT

from mlpbench.asv import machine as asv_machine, measure as asv_measure, suite as asv_suite, tiers as asv_tiers
from mlpbench import cli, registry, runner
from mlpbench.judging import gate
from mlpbench.record import METRICS


def _conf() -> dict:
    from asv import util

    return util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)


def _names(method: str, variant: str = "eager") -> list[str]:
    # ASV's names for a parametrised benchmark, as its regressions_* regexes see them
    return [f"standard.MlpDevice.{method}('{variant}', 'bf16', 't8192-d768-h3072')",
            f"quick.GeluMulHost.{method}('{variant}', 'fp32', 't333-h3000')"]


def _detected(conf: dict, name: str) -> bool:
    return not any(re.match(rx, name) and first is None for rx, first in conf["regressions_first_commits"].items())


def _threshold(conf: dict, name: str) -> float:
    return max(t for rx, t in conf["regressions_thresholds"].items() if re.match(rx, name))


def test_the_regressions_page_flags_only_what_the_gate_gates_on_a_gpu():
    conf = _conf()
    for method, metric in METRICS.items():
        gated_on_gpu = metric.gated == "yes"  # back-to-back host time too: the gate judges it on one box
        for name in _names(method):
            assert _detected(conf, name) == gated_on_gpu, (name, metric.gated, metric.one_box)
    for name in ("standard.CompileTime.track_cold_compile('mlp/compiled/bf16/t8192-d768-h3072')",
                 "standard.ChangingShapes.track_total('mlp/compiled/bf16/d768-h3072')"):
        assert not _detected(conf, name)


def test_the_pages_thresholds_are_the_gates_floors():
    conf = _conf()
    for op in registry.OPS.values():
        for v in op.variants:
            want = gate.COMPILED_FLOOR if v.compiles else gate.FLOOR
            name = f"standard.{registry.class_name(op.name)}Device.track_device_time('{v.name}', 'bf16', 's')"
            assert _threshold(conf, name) == pytest.approx(want), v.name


def test_asv_installs_the_project_without_reresolving_the_pinned_torch():
    # ASV's default install command (--force-reinstall with dependencies) let pip replace the torch the
    # matrix pinned: every forced reinstall must leave the dependencies alone.
    commands = _conf()["install_command"]
    assert any("--force-reinstall" in c for c in commands)
    assert all("--no-deps" in c for c in commands if "--force-reinstall" in c)


@pytest.mark.parametrize("env_name, torch_version, ok", [
    ("virtualenv-py3.11-torch2.13.0", "2.13.0+cpu", True),
    ("virtualenv-py3.11-torch2.13.0", "2.13.0", True),
    ("virtualenv-py3.11-torch2.13.0", "2.14.1+cu130", False),
    ("virtualenv-py3.11-numpy2.0-torch2.13.0-triton3.6", "2.14.1", False),
    ("existing-py_opt_torch_.venv_bin_python3", "2.11.0", True),
    (None, "2.11.0", True),
])
def test_an_environment_whose_torch_is_not_the_one_its_name_says_fails(env_name, torch_version, ok):
    if ok:
        asv_machine.check_environment_name(env_name, torch_version)
    else:
        with pytest.raises(asv_machine.EnvironmentMismatch, match=re.escape(torch_version)):
            asv_machine.check_environment_name(env_name, torch_version)


def test_a_benchmark_process_refuses_a_torch_its_environment_does_not_name(monkeypatch):
    monkeypatch.setenv("ASV_ENV_NAME", "virtualenv-py3.11-torch1.0.0")
    with pytest.raises(asv_machine.EnvironmentMismatch, match="promises torch 1.0.0"):
        asv_suite.classes("quick")


def test_running_versions_name_the_python_not_its_path():
    import platform

    v = asv_machine.running_versions()
    assert v["python"] == ".".join(platform.python_version_tuple()[:2])
    assert set(asv_machine.SPLIT_KEYS) <= set(v)


def test_mlpbench_cases_narrows_what_a_setup_cache_measures(monkeypatch):
    ids = ["mlp/eager/bf16/t1", "mlp/ours/bf16/t1", "gelu_mul/eager/bf16/t1"]
    assert asv_tiers.selected(ids) == ids
    monkeypatch.setenv("MLPBENCH_CASES", r"^mlp/\w+/bf16/")
    assert asv_tiers.selected(ids) == ids[:2]
    with pytest.raises(NotImplementedError, match="does not select it"):
        asv_measure.entry({}, "gelu_mul/eager/bf16/t1")
    monkeypatch.setenv("MLPBENCH_CASES", "mlp/(")
    with pytest.raises(registry.SelectionError, match=re.escape("MLPBENCH_CASES='mlp/('")):
        asv_tiers.selected(ids)


def test_skips_lists_each_skipped_benchmark_with_the_reason_its_setup_gives(capsys):
    assert cli.main(["skips", "--bench", r"^(quick|standard)\.SiluMulHost\.track_host_time"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = dict(line.split(": ", 1) for line in out[:-1])
    # a combination that is not a case, and (on this CPU) a GPU-sized shape
    assert rows["quick.SiluMulHost.track_host_time('eager', 'bf16', 't64-h448')"].startswith("skipped: ")
    assert "measured in fp32 only" in rows["quick.SiluMulHost.track_host_time('eager', 'bf16', 't64-h448')"]
    assert "quick.SiluMulHost.track_host_time('eager', 'fp32', 't64-h448')" not in rows  # runs here
    gpu_sized = "standard.SiluMulHost.track_host_time('eager', 'bf16', 't8192-h14336')"
    if runner.default_device() == "cpu":
        assert "GPU-sized" in rows[gpu_sized]
    else:
        assert gpu_sized not in rows  # runs on a GPU
    skipped, total = map(int, re.match(r"(\d+) of (\d+) benchmarks skip", out[-1]).groups())
    assert skipped == len(rows) and skipped < total


def test_a_variant_kept_out_of_the_tier_skips_saying_which_tier_measures_it():
    cls = asv_suite.classes("standard")["MlpHost"]
    with pytest.raises(NotImplementedError, match="maxautotune is measured in the full tier only, not in standard"):
        cls().setup({}, "maxautotune", "bf16", "t8192-d768-h3072")


def test_skips_agree_with_setup_on_what_a_setup_cache_recorded():
    # The dry cache stands for what setup_cache records: a case skipped while measuring says the same.
    cls = asv_suite.classes("quick")["SiluMulHost"]
    dry = cls.dry_cache()
    for case_id, entry in dry.items():
        _, variant, dtype, shape = case_id.split("/")
        if "skip" in entry:
            with pytest.raises(NotImplementedError, match=re.escape(entry["skip"][:40])):
                cls().setup(dry, variant, dtype, shape)


def test_skips_exits_2_naming_a_bad_or_empty_selection(capsys):
    assert cli.main(["skips", "--bench", "("]) == 2
    assert "'('" in capsys.readouterr().err
    assert cli.main(["skips", "--bench", "^nothing$"]) == 2
    assert "selects no benchmark" in capsys.readouterr().err


# ------------------------------------------------------------------ the Regressions page is the gate's
def _history_project(root):
    """An ASV project of three commits on one machine: the eager MLP's device time steps up 10% at the
    third (a regression the gate fails on), its single-call host time doubles at the second (listed,
    not gated beside device time)."""
    import random
    import subprocess

    proj = root / "proj"
    (proj / "results" / "box").mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q", "-b", "main"], cwd=proj, check=True)
    shas = []
    for k in range(3):
        (proj / "stamp").write_text(str(k))
        subprocess.run(git + ["add", "stamp"], cwd=proj, check=True)
        subprocess.run(git + ["commit", "-qm", f"c{k}"], cwd=proj, check=True)
        shas.append(subprocess.run(git + ["rev-parse", "HEAD"], cwd=proj, check=True, capture_output=True,
                                   text=True).stdout.strip())
    conf = {"version": 1, "project": "tiny", "project_url": "http://example.invalid/", "repo": ".",
            "branches": ["main"], "environment_type": "existing", "results_dir": "results", "html_dir": "html",
            "plugins": [".mlpbench.asv.regressions"]}
    conf["regressions_first_commits"] = _conf()["regressions_first_commits"]
    (proj / "asv.conf.json").write_text(json.dumps(conf))
    params = [["'eager'"], ["'bf16'"], ["'t8192-d768-h3072'"]]
    # name → (level per commit, relative spread of its samples). GeluMul's 20% step lies within its
    # samples' noise: ASV's own detector flags it, the gate's significance test does not.
    names = {"standard.MlpDevice.track_device_time": ([1.0, 1.0, 1.1], 0.002),
             "standard.MlpHost.track_host_time": ([1.0, 2.0, 2.0], 0.002),
             "standard.GeluMulDevice.track_device_time": ([1.0, 1.0, 1.2], 0.9)}
    bench = {"code": "def track(): pass", "param_names": ["variant", "dtype", "shape"], "params": params,
             "type": "track", "unit": "seconds", "version": "v1", "timeout": 60}
    (proj / "results" / "benchmarks.json").write_text(json.dumps({**{n: {**bench, "name": n} for n in names},
                                                                  "version": 2}))
    (proj / "results" / "box" / "machine.json").write_text(json.dumps({"machine": "box", "os": "Linux", "version": 1}))
    rng = random.Random(0)
    for k, sha in enumerate(shas):
        results = {}
        for name, (levels, spread) in names.items():
            samples = [levels[k] * 1e-4 * (1 + rng.uniform(-spread, spread)) for _ in range(30)]
            results[name] = [[levels[k] * 1e-4], params, "v1", [samples]]
        doc = {"commit_hash": sha, "env_name": "existing-py", "date": 1700000000000 + k * 1000, "python": "3.11",
               "params": {"machine": "box", "os": "Linux", "python": "3.11"}, "requirements": {}, "env_vars": {},
               "result_columns": ["result", "params", "version", "samples"], "results": results,
               "durations": {}, "version": 2}
        (proj / "results" / "box" / f"{sha[:8]}-existing-py.json").write_text(json.dumps(doc))
    return proj, shas


@pytest.mark.slow
def test_the_regressions_page_lists_the_gates_verdicts_and_nothing_else(tmp_path):
    import os
    import subprocess
    import sys

    proj, shas = _history_project(tmp_path)
    steps = [(head, v.benchmark, v.param) for head, v in gate.history(gate.load(proj / "results"), 3, "box")]
    assert steps == [(shas[2], "standard.MlpDevice.track_device_time", "mlp/eager/bf16/t8192-d768-h3072")]
    env = os.environ | {"HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    # ASV's own detector first (no plugin), for what the gate takes off the page
    conf = json.loads((proj / "asv.conf.json").read_text())
    (proj / "stock.conf.json").write_text(json.dumps(conf | {"plugins": [], "html_dir": "stock"}))
    subprocess.run([sys.executable, "-m", "asv", "--config", "stock.conf.json", "publish"], cwd=proj, env=env,
                   capture_output=True, check=True, timeout=300)
    stock_rows = json.loads((proj / "stock" / "regressions.json").read_text())["regressions"]
    proc = subprocess.run([sys.executable, "-m", "asv", "publish"], cwd=proj, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads((proj / "html" / "regressions.json").read_text())["regressions"]
    assert {r[0].split("(")[0] for r in stock_rows} >= {"standard.MlpDevice.track_device_time",
                                                         "standard.GeluMulDevice.track_device_time"}
    assert [r[0] for r in rows] == ["standard.MlpDevice.track_device_time('eager', 'bf16', 't8192-d768-h3072')"]
    ((before, after, base, head),) = rows[0][6]
    assert (before, after) == (1, 2) and head / base == pytest.approx(1.1, rel=0.01)  # revisions of c1 → c2


def test_the_plugin_reads_versions_in_the_environment_and_stops_on_a_mismatch():
    class Env:
        name = "virtualenv-py3.11-torch9.9.9"
        _global_env_vars = {"ASV_ENV_NAME": name}

        def __init__(self, out=None, error=None):
            self.out, self.error = out, error

        def run(self, args, env=None):
            assert env["ASV_ENV_NAME"] == self.name and "running_versions" in args[-1]
            if self.error:
                raise RuntimeError(self.error)
            return self.out

    ran = {"torch": "9.9.9+cpu", "python": "3.11"}
    assert asv_machine._environment_versions(Env(out="noise\n" + json.dumps(ran) + "\n")) == ran
    with pytest.raises(asv_machine.EnvironmentMismatch, match="promises torch 9.9.9"):
        asv_machine._environment_versions(Env(error="Traceback ...\nmlpbench.asv.machine.EnvironmentMismatch: "
                                                    "ASV environment 'x' promises torch 9.9.9, but torch 2.14.1"))
    with pytest.raises(RuntimeError, match="could not read the versions"):
        asv_machine._environment_versions(Env(error="ModuleNotFoundError: No module named 'mlpbench'"))
