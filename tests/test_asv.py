"""ASV: one fixed benchmark set on every machine, selection through ASV's own --bench, and ASV's own
commands (`asv machine --yes`, `asv run` in an existing environment and in one ASV makes)."""

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from project_copy import ROOT, git, project_repo

from mlpbench.asv import (classes as asv_classes,
                          compile as asv_compile,
                          machine as asv_machine,
                          measure as asv_measure,
                          run as asv_run,
                          suite as asv_suite,
                          tiers as asv_tiers)
from mlpbench import registry

# ASV's benchmark families are the tiers: benchmarks/<tier>.py holds asv_suite.classes(tier).
BY_TIER = {tier: asv_suite.classes(tier) for tier in registry.TIERS}


def _param_names() -> list[tuple[str, str]]:
    """(tier, 'tier.Class.bench(params)') for every benchmark combination, as ASV's --bench sees them."""
    out = []
    for tier, classes in BY_TIER.items():
        for cls_name, cls in classes.items():
            for bench in [b for b in dir(cls) if b.startswith("track_")]:
                for combo in itertools.product(*cls.params):
                    out.append((tier, f"{tier}.{cls_name}.{bench}({', '.join(repr(v) for v in combo)})"))
    return out


def test_op_classes_have_variant_dtype_shape_axes_and_a_tier_holds_the_shapes_that_list_it():
    for tier, classes in BY_TIER.items():
        for op in registry.OPS:
            name = registry.class_name(op)
            tier_shapes = [s.id for s in registry.OPS[op].shapes if tier in s.tiers]
            if f"{name}Device" not in classes:
                assert not tier_shapes
                continue
            for kind in ("Device", "Host"):
                cls = classes[f"{name}{kind}"]
                assert cls.param_names == ["variant", "dtype", "shape"]
                # fp32, bf16, fp16 always (the history's axis); fp8 only where a shape of the tier lists it
                has_fp8 = any("fp8" in s.dtypes for s in registry.OPS[op].shapes if tier in s.tiers)
                dtypes = ["fp32", "bf16", "fp16"] + (["fp8"] if has_fp8 else [])
                assert cls.params == [list(registry.OPS[op].variant_names), dtypes, tier_shapes]
                assert cls.version == asv_classes.VERSION
    assert "fp8" in BY_TIER["standard"]["MlpDevice"].params[1]
    assert "fp8" not in BY_TIER["standard"]["GeluMulDevice"].params[1]
    assert "fp8" not in BY_TIER["quick"]["MlpDevice"].params[1]


@pytest.mark.parametrize("tier", registry.TIERS)
def test_a_tiers_family_is_the_asv_bench_expression_that_selects_exactly_its_cases(tier):
    regex = asv_tiers.bench(tier)
    picked = set()
    for _, name in _param_names():
        if re.search(regex, name) and (m := re.match(r"\w+\.(\w+)(Device|Host)\.\w+\('(\w+)', '(\w+)', '([\w-]+)'\)$", name)):
            op = {registry.class_name(o): o for o in registry.OPS}[m[1]]
            picked.add(f"{op}/{m[3]}/{m[4]}/{m[5]}")
    wanted = {c.id for c in registry.select(tier)}
    assert wanted <= picked
    # The cartesian axes hold combinations that are not cases (they skip), among them a variant kept
    # out of the tier (max-autotune: full only); no other case is picked.
    in_tier = {c.id for c in registry.all_cases() if registry.variant_of(c).in_tier(tier)}
    assert {i for i in picked if i in in_tier} == wanted
    assert {fam for fam, name in _param_names() if re.search(regex, name)} == {tier}
    with pytest.raises(registry.SelectionError, match="unknown tier 'large'"):
        asv_tiers.bench("large")


def test_the_recorded_history_names_benchmarks_that_still_exist():
    # The gate compares a benchmark by name, parameters and version: every benchmark the published
    # history holds at this version must still be measured under its name, or its series would end
    # without a version bump saying so. The fixture lists those names and parameters (no measurements);
    # add to it when a machine's history gains benchmarks.
    history = json.loads((Path(__file__).parent / "fixtures" / "history_benchmarks.json").read_text())
    assert history
    for name, old_params in history.items():
        tier, cls_name, method = name.split(".")
        cls = BY_TIER[tier][cls_name]
        assert hasattr(cls, method), name
        params = [[repr(v) for v in axis] for axis in cls.params]
        assert all(set(old) <= set(new) for old, new in zip(old_params, params)), name


def test_the_benchmark_modules_are_the_tiers():
    assert sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem not in ("__init__", "test_cases")) \
        == sorted(registry.TIERS)


def test_the_benchmark_set_does_not_depend_on_the_environment(monkeypatch):
    monkeypatch.setenv("MLPBENCH_TIER", "full")
    monkeypatch.setenv("MLPBENCH_CASES", "gelu_mul/eager/*")
    again = {tier: asv_suite.classes(tier) for tier in registry.TIERS}
    assert {f: {c: v.params for c, v in cls.items()} for f, cls in again.items()} == \
        {f: {c: v.params for c, v in cls.items()} for f, cls in BY_TIER.items()}


def test_combinations_that_are_not_cases_or_cannot_run_here_skip_in_setup_with_the_reason():
    mlp = BY_TIER["standard"]["MlpDevice"]
    with pytest.raises(NotImplementedError, match="measured in bf16, fp16, fp8 only"):
        mlp().setup({}, "eager", "fp32", "t8192-d4096-h14336")
    with pytest.raises(NotImplementedError, match="liger has no FP8 path"):
        mlp().setup({}, "liger", "fp8", "t8192-d4096-h14336")
    host = BY_TIER["standard"]["MlpHost"]
    reason = "shape t8192-d768-h3072 is GPU-sized"
    with pytest.raises(NotImplementedError, match=reason):
        host().setup({"mlp/eager/bf16/t8192-d768-h3072": {"skip": reason}}, "eager", "bf16", "t8192-d768-h3072")
    with pytest.raises(NotImplementedError, match="no GPU here"):
        mlp().setup({"mlp/eager/bf16/t8192-d768-h3072": {"host_time_samples_s": [1e-3]}}, "eager", "bf16",
                    "t8192-d768-h3072")
    with pytest.raises(RuntimeError, match="CorrectnessError"):
        host().setup({"mlp/ours/bf16/t8192-d768-h3072": {"error": "CorrectnessError: 0.3 > 1e-2"}}, "ours", "bf16",
                     "t8192-d768-h3072")
    case = registry.case_by_id("mlp/eager/bf16/t8192-d768-h3072")
    assert "GPU-sized" in asv_tiers.reason_not_here(case, "cpu")
    assert asv_tiers.reason_not_here(case, "cuda") is None


def test_the_classes_of_an_op_share_one_measurement_and_nothing_else_does():
    # ASV runs a setup_cache once per key (module and first line) and hands the result to every class
    # with that key: the Device, Host and Codegen classes of one tier and op must share it, no others.
    from asv_runner.benchmarks._base import get_setup_cache_key

    keys = {}
    for tier, classes in BY_TIER.items():
        for cls_name, cls in classes.items():
            keys.setdefault(get_setup_cache_key(cls.setup_cache), []).append(f"{tier}.{cls_name}")
    for owners in keys.values():
        stems = {o.removesuffix("Device").removesuffix("Host").removesuffix("Codegen") for o in owners}
        assert len(stems) == 1 and len(owners) <= 3, owners


def test_a_setup_cache_records_skips_and_failures_per_case_and_goes_on():
    def measure(case_id):
        if case_id == "skipped":
            raise NotImplementedError("needs a GPU")
        if case_id == "broken":
            raise RuntimeError("compile error")
        return {"value": 1.0}

    out = asv_measure.each(["skipped", "broken", "fine"], "test", measure)
    assert out == {"skipped": {"skip": "needs a GPU"}, "broken": {"error": "RuntimeError: compile error"},
                   "fine": {"value": 1.0}}
    with pytest.raises(NotImplementedError, match="needs a GPU"):
        asv_measure.entry(out, "skipped")


def test_compile_classes_probe_one_compiled_case_per_op_and_skip_in_setup(monkeypatch):
    import contextlib

    # no probe process is started ahead: `probe` stands in for them all
    monkeypatch.setattr(asv_compile, "started", lambda specs: contextlib.nullcontext())
    monkeypatch.setattr(asv_compile, "probe", lambda case_id, dynamic=False, sequence=False: {
        "cold_compile_s": 2.0, "recompile_s": 0.01 if dynamic else 0.5, "total_s": 3.0})
    monkeypatch.setattr(asv_compile, "_probe_here", lambda case: None)
    classes = asv_compile.compile_classes("standard")
    static, dynamic = classes["CompileTime"], classes["CompileTimeDynamic"]
    # one per op that asks for its compile to be timed; the SwiGLU ops' graphs are the GeGLU ones' with SiLU
    # (max-autotune's are the full tier's, after the default compiler's, so that existing ids keep their place)
    assert [registry.case_by_id(i).id for i in static.params[0]] == [
        "linear/compiled/bf16/t1024-i32-o64", "mlp/compiled/bf16/t8192-d768-h3072", "gelu_mul/compiled/bf16/t333-h3000",
        "gelu_mul_train/compiled/bf16/t8192-h3072"]
    assert [c.id for c in asv_compile.probe_cases("full")][4:] == [
        "mlp/maxautotune/bf16/t8192-d768-h3072", "gelu_mul/maxautotune/bf16/t8192-h3072"]
    assert list(asv_compile.sequences("standard")) == ["mlp/compiled/bf16/d768-h3072", "mlp/compiled-dynamic/bf16/d768-h3072",
                                                  "mlp/liger/bf16/d768-h3072", "mlp/ours/bf16/d768-h3072",
                                                  "mlp/dualgemm/bf16/d768-h3072"]
    (mlp,) = dynamic.params[0]
    assert dynamic().track_recompile_new_shape_dynamic(dynamic().setup_cache(), mlp) == 0.01
    assert static().track_recompile_new_shape(static().setup_cache(), mlp) == 0.5
    # ASV counts NotImplementedError raised in a benchmark's body as a failure: skips happen in setup
    # (results/logs/h200-20261130-mlp/compile-dynamic-fix.log).
    for name, cls in classes.items():
        with pytest.raises(NotImplementedError, match="needs a GPU"):
            cls.setup(cls(), {f"{name}:x": {"skip": "needs a GPU"}}, "x")


def test_grouped_compile_tax_measures_every_class_in_one_setup_cache_each_reading_its_own(monkeypatch):
    """The nightly's grouping: one setup_cache starts the probes of all three classes at once; the static
    and dynamic compiles of one case id are two probes, and each class reads its own."""
    import contextlib

    from mlpbench.asv.tiers import GROUPED_ENV

    started = []
    monkeypatch.setattr(asv_compile, "started", lambda specs: started.append(list(specs)) or contextlib.nullcontext())
    monkeypatch.setattr(asv_compile, "probe", lambda case_id, dynamic=False, sequence=False: {
        "cold_compile_s": 2.0, "recompile_s": 0.01 if dynamic else 0.5, "total_s": 7.0 if dynamic else 3.0})
    monkeypatch.setattr(asv_compile, "_probe_here", lambda case: None)
    monkeypatch.setenv(GROUPED_ENV, "1")
    classes = asv_compile.compile_classes("standard")
    static, dynamic, shapes = (classes[n] for n in asv_compile.CLASSES)
    assert static.setup_cache is dynamic.setup_cache is shapes.setup_cache
    cache = static().setup_cache()
    # every probe of the three classes was started ahead, together, once
    assert len(started) == 1 and len(started[0]) == sum(len(c.params[0]) for c in (static, dynamic, shapes))
    (mlp,) = dynamic.params[0]
    assert static().track_recompile_new_shape(cache, mlp) == 0.5
    assert dynamic().track_recompile_new_shape_dynamic(cache, mlp) == 0.01
    assert shapes().track_total(cache, "mlp/compiled-dynamic/bf16/d768-h3072") == 7.0
    assert shapes().track_total(cache, "mlp/compiled/bf16/d768-h3072") == 3.0
    # full is standard plus the largest shapes: its probes are standard's and max-autotune's; quick's run on a
    # CPU, in fp32
    assert asv_compile.probe_cases("full")[:4] == asv_compile.probe_cases("standard")
    assert {c.dtype for c in asv_compile.probe_cases("quick")} == {"fp32"}


def test_machine_entry_splits_series_on_the_stack_not_on_the_host(tmp_path, monkeypatch):
    path = tmp_path / "machines.json"
    entry = asv_machine.register("box", path=path)
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["box"] == entry
    assert set(asv_machine.SPLIT_KEYS) <= set(entry) and entry["os"] == "Linux"
    from mlpbench import envinfo

    monkeypatch.setattr(envinfo, "environment", lambda: {
        "device": "cuda", "gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "triton": "3.6",
        "liger_kernel": "0.8.5", "kernels": "0.17.2", "cpu": "x"})
    monkeypatch.setattr(envinfo, "machine_slug", lambda: "h200")
    gpu = asv_machine.machine_entry()
    assert gpu["machine"] == "h200" and gpu["gpu"] == "NVIDIA H200"
    assert all(gpu[k] == asv_machine.ANY_HOST for k in asv_machine.HOST_FIELDS)


def _home(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return os.environ | {"HOME": str(home)}


def test_asv_machine_yes_registers_the_same_entry_as_mlpbench(tmp_path):
    repo, env = project_repo(tmp_path), _home(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((Path(env["HOME"]) / ".asv-machine.json").read_text())
    entry = asv_machine.machine_entry()
    assert doc[entry["machine"]] == entry


@pytest.mark.slow
@pytest.mark.parametrize("grouped", [False, True], ids=["plain", "grouped"])
def test_benchmarks_json_discovered_here_equals_the_committed_one(tmp_path, grouped):
    # ASV rewrites results/asv/benchmarks.json from what it discovers; `asv publish` draws only what
    # that file lists. The set is fixed, so a machine without a GPU discovers exactly the committed file;
    # so does `mlpbench asv` (grouped setup_caches), once it has put back each class's own key.
    from mlpbench.asv import run as asv_run
    from mlpbench.asv.tiers import GROUPED_ENV

    repo, env = project_repo(tmp_path), _home(tmp_path)
    env = env | {GROUPED_ENV: "1"} if grouped else {k: v for k, v in env.items() if k != GROUPED_ENV}
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=repo, env=env, check=True,
                   capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "asv", "run", "-E", f"existing:{sys.executable}", "--bench",
                           "just-discover"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    path = repo / "results" / "asv" / "benchmarks.json"
    assert asv_run.plain_setup_cache_keys(path) is grouped  # a plain run's file needs nothing
    made = path.read_bytes()
    committed = subprocess.run(["git", "show", "HEAD:results/asv/benchmarks.json"], cwd=ROOT,
                               capture_output=True, check=True).stdout
    assert made == committed, ("the benchmarks changed: regenerate results/asv/benchmarks.json with "
                               "`asv run -E existing:$(which python) --bench just-discover` and commit it")


@pytest.mark.slow
def test_asv_run_in_an_existing_environment_records_the_commit(tmp_path):
    repo, env = project_repo(tmp_path), _home(tmp_path)
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=repo, env=env, check=True,
                   capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-m", "asv", "run", "--environment", f"existing:{sys.executable}", "--set-commit-hash", head,
         "--record-samples", "--bench", r"^standard\.LinearHost\.track_host_time\('eager', 'fp32'"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    machine = asv_machine.machine_entry()["machine"]
    (result_file,) = (repo / "results" / "asv" / machine).glob(f"{head[:8]}-existing-*.json")
    doc = json.loads(result_file.read_text())
    assert doc["commit_hash"] == head and doc["params"]["machine"] == machine
    row = dict(zip(doc["result_columns"], doc["results"]["standard.LinearHost.track_host_time"]))
    assert row["version"] == asv_classes.VERSION
    values = dict(zip(itertools.product(*row["params"]), row["result"]))
    median = values[("'eager'", "'fp32'", "'t1024-i32-o64'")]
    assert 0 < median < 1
    (samples,) = [s for s in row["samples"] if s]
    assert len(samples) >= 5


@pytest.mark.slow
def test_plain_asv_run_in_a_virtualenv_it_makes_runs_our_kernel_from_the_installed_wheel(tmp_path):
    # ASV builds the project's wheel at the commit and installs it in a virtualenv of its own: the
    # kernel repository must travel in the wheel (it once did not, and every `ours` case failed).
    repo, env = project_repo(tmp_path), _home(tmp_path)
    (repo / "README.md").write_text("a second commit, so that HEAD^! names one\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "two")
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=repo, env=env, check=True,
                   capture_output=True)
    bench = r"^quick\.GeluMulTrainHost\.track_host_time\('(eager|ours)', 'fp32'"
    proc = subprocess.run([sys.executable, "-m", "asv", "run", "--record-samples", "--show-stderr", "--bench", bench,
                           "HEAD^!"], cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "failed" not in out.lower(), out[-4000:]
    # Our kernel loaded from site-packages, ran under the interpreter and matched float64, and was
    # then skipped from timing, as on every CPU (a kernel that failed to load fails the case instead).
    assert "skipped: NotImplementedError(\"correctness checked under TRITON_INTERPRET=1" in out, out[-4000:]
    machine = asv_machine.machine_entry()["machine"]
    (result_file,) = (repo / "results" / "asv" / machine).glob("*-virtualenv-*.json")
    doc = json.loads(result_file.read_text())
    assert doc["requirements"] == {"torch": "2.13.0"}
    # The torch the matrix names is the torch that ran, and the result says which build it was: read
    # by the environment's interpreter, not by ASV's own process.
    (site,) = (repo / ".asv" / "env").glob("*/lib/python*/site-packages")
    (installed,) = site.glob("torch-*.dist-info")
    ran = installed.name.removeprefix("torch-").removesuffix(".dist-info")
    assert ran.split("+")[0] == "2.13.0", ran
    assert doc["params"]["torch"] == ran
    assert doc["params"]["python"] == "{}.{}".format(*sys.version_info[:2])
    # A CPU box gets no CUDA build: no NVIDIA package in the environment.
    assert not [p.name for p in site.iterdir() if p.name.lower().startswith("nvidia")]
    row = dict(zip(doc["result_columns"], doc["results"]["quick.GeluMulTrainHost.track_host_time"]))
    values = dict(zip(itertools.product(*row["params"]), row["result"]))
    assert values[("'eager'", "'fp32'", "'t333-h3000'")] > 0


def test_a_benchmark_process_writes_codegen_records_beside_asvs_results_dir():
    # ASV passes no ASV_CONF_DIR to benchmark processes: the tier's module ASV imports names the
    # results root itself, and it must be the parent of asv.conf.json's results_dir (where the gate
    # looks for results/codegen.json).
    conf = json.loads("\n".join(l for l in (ROOT / "asv.conf.json").read_text().splitlines()
                                if not l.strip().startswith("//")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASV")}
    code = "import quick; print(quick.SiluMulHost.results_root)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT / conf["benchmark_dir"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert Path(proc.stdout.strip()) == (ROOT / conf["results_dir"]).parent
    assert BY_TIER["quick"]["SiluMulHost"].results_root is None  # classes built in a test write nowhere


def _asv_names() -> list[tuple[str, str]]:
    """(tier, name) for every benchmark combination, named as ASV names them for --bench (asv.benchmarks:
    `name(params)` with asv_runner's own parameter ids)."""
    from asv_runner.benchmarks._base import _unique_param_ids

    out = []
    for tier, classes in BY_TIER.items():
        for cls_name, cls in classes.items():
            ids = _unique_param_ids(cls.params)
            for bench in [b for b in dir(cls) if b.startswith("track_")]:
                for combo in itertools.product(*ids):
                    out.append((tier, f"{tier}.{cls_name}.{bench}({', '.join(combo)})"))
    return out


@pytest.mark.parametrize("tier", registry.TIERS)
def test_bench_cases_selects_the_cases_combinations_and_the_compile_classes_only(tier, monkeypatch):
    monkeypatch.delenv(asv_tiers.CASES_ENV, raising=False)
    regex = asv_run.bench_cases(tier)
    compile_names = set(asv_compile.compile_classes(tier))
    wanted = {c.id for c in registry.select(tier)}
    picked, other = set(), set()
    for t, name in _asv_names():
        if not re.search(regex, name):
            assert not (t == tier and name.split(".")[1] in compile_names), name  # compile classes run whole
            continue
        assert t == tier, name
        m = re.match(r"\w+\.(\w+?)(Device|Host|Codegen)\.\w+\('(\w+)', '(\w+)', '([\w-]+)'\)$", name)
        if m:
            op = {registry.class_name(o): o for o in registry.OPS}[m[1]]
            picked.add(f"{op}/{m[3]}/{m[4]}/{m[5]}")
        else:
            other.add(name.split(".")[1])
    assert picked == wanted and other <= compile_names
    # each case's every benchmark (device, host and, compiled, codegen) is there, not only some
    per_case = {}
    for t, name in _asv_names():
        if t == tier and re.search(regex, name) and "(" in name and name.split(".")[1] not in compile_names:
            key = (re.sub(r"(Device|Host|Codegen)$", "", name.split(".")[1]), name.split("(", 1)[1])
            per_case[key] = per_case.get(key, 0) + 1
    assert set(per_case.values()) <= {6, 7} and len(per_case) == len(wanted)
    # $MLPBENCH_CASES narrows it as it narrows what a setup_cache measures
    first = registry.select(tier)[0]
    monkeypatch.setenv(asv_tiers.CASES_ENV, "^" + re.escape(first.id) + "$")
    narrow = asv_run.bench_cases(tier)
    hits = {n for t, n in _asv_names() if re.search(narrow, n) and "(" in n and n.split(".")[1] not in compile_names}
    assert hits and all(repr(first.shape.id) in n and repr(first.variant) in n for n in hits)
    # a bad one is named, not a traceback
    monkeypatch.setenv(asv_tiers.CASES_ENV, "(")
    with pytest.raises(registry.SelectionError, match="MLPBENCH_CASES"):
        asv_run.bench_cases(tier)


def test_the_nightlys_history_names_the_family_and_a_digest_of_its_cases(monkeypatch):
    import argparse

    monkeypatch.delenv(asv_tiers.CASES_ENV, raising=False)
    args = argparse.Namespace(tier="quick", bench=None)
    key = asv_run.family(args, asv_run.bench_cases("quick"))
    assert key.startswith(r"^quick\. cases ") and len(key) < 40
    assert asv_run.family(args, r"^quick\.X") == r"^quick\.X"  # an expression of one's own, as given
    monkeypatch.setenv(asv_tiers.CASES_ENV, "^gelu_mul/")
    assert asv_run.family(args, asv_run.bench_cases("quick")) != key  # other cases, another night


def test_progress_says_each_cases_line_while_the_block_runs(monkeypatch):
    import time

    monkeypatch.delenv(asv_measure.PROGRESS_ENV, raising=False)
    said = []
    with asv_measure.progress(said.append):
        out = asv_measure.each(["a", "b"], "quick.x", lambda i: {"value": i} if i == "a" else (_ for _ in ()).throw(
            NotImplementedError("not here")))
        deadline = time.time() + 5
        while len(said) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(said) == 2  # said while the block still runs, not only at its end
    assert out == {"a": {"value": "a"}, "b": {"skip": "not here"}}
    assert said[0].startswith("[quick.x 1/2] a: measured") and "skipped (not here)" in said[1]
    assert asv_measure.PROGRESS_ENV not in os.environ


def test_a_setup_cache_process_imports_what_its_own_class_needs_only():
    from mlpbench.asv.suite import setup_cache_ops

    def argv(bench):
        return ["run.py", "setup_cache", "/repo/benchmarks", bench, "{}"]

    assert setup_cache_ops("standard", argv("standard.GeluMulDevice.track_device_time")) == ["gelu_mul"]
    assert setup_cache_ops("standard", argv("standard.GeluMulTrainHost.track_box_id")) == ["gelu_mul_train"]
    assert setup_cache_ops("standard", argv("standard.LlamaModelCodegen.track_codegen")) == ["llama_model"]
    assert setup_cache_ops("standard", argv("standard.CompileTime.track_cold_compile")) == []  # probes: own processes
    assert setup_cache_ops("standard", argv("quick.MlpDevice.track_device_time")) == []  # another family's
    # the server, discovery and benchmark processes import everything
    assert setup_cache_ops("standard", ["run.py", "run_server", "/repo/benchmarks", "/tmp/socket"]) is None
    assert setup_cache_ops("standard", ["pytest"]) is None


def test_grouped_classes_share_a_setup_cache_per_process_group_of_mlpbench_run(monkeypatch):
    from asv_runner.benchmarks._base import get_setup_cache_key

    from mlpbench.asv import suite as asv_suite
    from mlpbench import registry, run_suite
    from mlpbench.asv.tiers import GROUPED_ENV, cases

    def keys():
        return {name: get_setup_cache_key(cls.setup_cache) for name, cls in asv_suite.classes("standard").items()}

    monkeypatch.delenv(GROUPED_ENV, raising=False)
    plain = keys()
    monkeypatch.setenv(GROUPED_ENV, "1")
    grouped = keys()
    assert plain.keys() == grouped.keys()
    groups = run_suite.op_groups([c for op in registry.OPS for c in cases("standard", op)])
    assert len(groups) > 1
    for ops in groups:
        own = {grouped[f"{registry.class_name(op)}Device"] for op in ops}
        assert len(own) == 1  # one setup_cache for the group
        assert len({plain[f"{registry.class_name(op)}Device"] for op in ops}) == len(ops)  # one per op, plain
    assert len(set(grouped.values())) == len(groups) + 1  # and the compile tax's, one for its three classes
    assert len({plain[name] for name in asv_compile.CLASSES}) == 3  # one per class, plain
    # what a group's setup_cache would hand each of its classes, without measuring, as a GPU sees it
    from mlpbench import runner

    monkeypatch.setattr(runner, "default_device", lambda: "cuda")
    monkeypatch.setattr(runner, "timing_skip_reason", lambda case, device: None)
    for ops in groups:
        dry = asv_suite.classes("standard")[f"{registry.class_name(ops[0])}Device"].dry_cache()
        assert {i.split("/")[0] for i in dry} == set(ops)
        assert all("track_codegen" not in e for e in dry.values())
        compiled = [i for i in dry if registry.variant_of(registry.case_by_id(i)).compiles]
        assert compiled and all("codegen_fingerprint" in dry[i] or "skip" in dry[i] for i in compiled)
