"""Faults a night run meets: bad input, killed or interrupted runs, concurrent runs, corrupt files."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from mlpbench import atomic, tables

ROOT = Path(__file__).resolve().parent.parent
RUN = [sys.executable, "-m", "mlpbench.cli", "run", "--tier", "quick"]


def _result_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if not p.name.endswith(".outcomes.json"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def earlier_result(tmp_path_factory) -> Path:
    """A results folder holding one complete run, as a night's earlier result."""
    folder = tmp_path_factory.mktemp("results")
    proc = subprocess.run(RUN + ["--op", "linear", "--variant", "eager", "--dtype", "fp32", "--results", str(folder)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = _result_files(folder)
    return path


def _copy_folder(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.parent.glob("*"):
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def _start_and_wait_for(args, marker: str, timeout=240) -> subprocess.Popen:
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout
    for line in proc.stdout:
        if marker in line:
            return proc
        if time.time() > deadline:
            break
    proc.kill()
    raise AssertionError(f"never saw {marker!r}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_run_stopped_midway_loses_no_earlier_result(earlier_result, tmp_path, sig):
    folder = _copy_folder(earlier_result, tmp_path / "machine")
    before = _sha(folder / earlier_result.name)
    proc = _start_and_wait_for(
        RUN + ["--op", "gelu_mul", "--variant", "eager", "--results", str(tmp_path)],
        marker="PASSED",  # the first case is done; the next ones are running
    )
    proc.send_signal(sig)
    proc.wait(timeout=120)
    assert _sha(folder / earlier_result.name) == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every file left in the folder must load cleanly
        df = tables.load_pytest_json(_result_files(tmp_path))
    assert "linear/eager/fp32/t1024-i32-o64" in set(df["case"])
    # Whatever the stopped run left is either a complete result or nothing a loader reads.
    for path in _result_files(tmp_path):
        json.loads(path.read_text())


def test_two_runs_into_one_folder_at_once_both_land(tmp_path):
    args = RUN + ["--op", "gelu_mul", "--variant", "eager", "--dtype", "fp32", "--results", str(tmp_path)]
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    files = _result_files(tmp_path)
    assert len(files) == 2
    df = tables.load_pytest_json(files)
    assert len(df) == 2 and set(df["case"]) == {"gelu_mul/eager/fp32/t333-h3000"}


def test_corrupt_truncated_and_foreign_files_are_skipped_by_name(earlier_result, tmp_path):
    good = tmp_path / "good.json"
    good.write_bytes(earlier_result.read_bytes())
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(earlier_result.read_bytes()[:500])
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"hello": "world"}))
    binary = tmp_path / "binary.json"
    binary.write_bytes(os.urandom(64))
    with pytest.warns(UserWarning) as seen:
        df = tables.load_pytest_json([good, truncated, foreign, binary, tmp_path / "missing.json"])
    named = " ".join(str(w.message) for w in seen)
    for bad in ("truncated.json", "foreign.json", "binary.json", "missing.json"):
        assert bad in named
    assert list(df["case"]) == ["linear/eager/fp32/t1024-i32-o64"]


def test_atomic_write_leaves_old_or_new(tmp_path):
    path = tmp_path / "r.json"
    atomic.write_json(path, {"v": 1})
    atomic.write_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_generated_section_replaces_only_the_text_between_its_markers(tmp_path):
    begin, end = atomic.section_markers("gen.py")
    page = tmp_path / "README.md"
    page.write_text(f"# Study\n\nBy hand.\n\n{begin}\nold\n{end}\n\nAfter.\n")
    atomic.write_section(page, "gen.py", "# Table\n\n| a |\n")
    assert page.read_text() == f"# Study\n\nBy hand.\n\n{begin}\n\n# Table\n\n| a |\n\n{end}\n\nAfter.\n"
    assert atomic.read_section(page, "gen.py") == "# Table\n\n| a |\n"
    before = page.read_text()
    atomic.write_section(page, "gen.py", atomic.read_section(page, "gen.py"))
    assert page.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["README.md"]
    for text in ("no markers\n", f"{end}\n{begin}\n", f"{begin}\n{end}\n{begin}\n{end}\n"):
        page.write_text(text)
        with pytest.raises(ValueError, match=f"{page}: no section for gen.py"):
            atomic.write_section(page, "gen.py", "x\n")
        assert page.read_text() == text
    with pytest.raises(ValueError, match="missing.md"):
        atomic.read_section(tmp_path / "missing.md", "gen.py")


def test_failed_and_skipped_cases_are_recorded_with_reasons(tmp_path):
    # With Liger from the Hub, its GeLU·mul op has no source: a skip on every machine, GPU or not.
    proc = subprocess.run(RUN + ["--op", "gelu_mul", "--variant", "liger", "--dtype", "fp32", "--results", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"MLPBENCH_LIGER_SOURCE": "hub"})
    assert proc.returncode == 0
    (outcomes,) = tmp_path.rglob("*.outcomes.json")
    (entry,) = json.loads(outcomes.read_text())["outcomes"]
    assert entry["case"] == "gelu_mul/liger/fp32/t333-h3000" and entry["outcome"] == "skipped"
    assert "MLPBENCH_LIGER_SOURCE=hub" in entry["reason"] and "needs the liger-kernel package" in entry["reason"]
    assert "Not timed:" in proc.stdout


@pytest.mark.parametrize("env, args, message", [
    ({"MLPBENCH_LIGER_SOURCE": "pypi"}, [], "MLPBENCH_LIGER_SOURCE='pypi'; valid: package, hub"),
    ({}, ["--results", "/proc/version"], "cannot write results to /proc/version"),
])
def test_bad_settings_exit_2_naming_them(env, args, message):
    proc = subprocess.run(RUN + ["--op", "linear"] + args, cwd=ROOT, capture_output=True, text=True,
                          env=os.environ | env, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_no_network_unless_asked():
    code = "import os; from mlpbench import environment; environment.prepare(); print(os.environ.get('HF_HUB_OFFLINE'))"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "MLPBENCH_HUB")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip()
    assert out == "1"
    out = subprocess.run([sys.executable, "-c", code], env=env | {"MLPBENCH_HUB": "1"},
                         capture_output=True, text=True).stdout.strip()
    assert out == "None"


def test_hub_kernels_are_pinned_and_untrusted_code_is_refused():
    from mlpbench import sources

    assert isinstance(sources.LIGER_HUB_VERSION, int)
    import inspect

    src = inspect.getsource(sources)
    assert "trust_remote_code=True" not in src


pytest_plugins = ["pytester"]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="out-of-memory recovery needs a CUDA GPU")
def test_after_an_out_of_memory_case_later_cases_still_run(pytester):
    """A deliberately oversized shape (768 GB of bf16 inputs) runs first; the next case must pass."""
    import shutil

    shutil.copy(ROOT / "benchmarks" / "test_cases.py", pytester.path / "test_cases.py")
    pytester.makeconftest("""
pytest_plugins = ["mlpbench.pytest_plugin"]
from mlpbench import registry

huge = registry._shape("gelu_mul", "standard", "deliberately larger than any GPU", t=2**20, h=2**17)
registry.SHAPES = (huge,) + registry.SHAPES
""")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--tier=standard", "--op=gelu_mul", "--variant=eager", "--dtype=bf16",
        "--shape=t1048576-h131072", "--shape=t8192-h3072", "-v", "--benchmark-disable",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*t1048576-h131072* FAILED*", "*t8192-h3072* PASSED*"])
    result.stdout.fnmatch_lines(["*OutOfMemoryError*"])


def test_a_results_document_is_written_compact_and_reads_back_the_same(tmp_path):
    data = {"benchmarks": [{"extra_info": {"device_time_samples_s": [1e-4, 2.5e-4], "case": "a/b/c/d"}}],
            "version": "5.2.3"}
    atomic.write_json(tmp_path / "run.json", data, compact=True)
    atomic.write_json(tmp_path / "doc.json", data)
    compact, indented = (tmp_path / "run.json").read_text(), (tmp_path / "doc.json").read_text()
    assert "\n" not in compact and " " not in compact and "\n" in indented
    assert json.loads(compact) == json.loads(indented) == data
