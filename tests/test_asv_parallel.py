"""Every GPU of a box for one `asv run` (mlpbench/asv/parallel.py), on a CPU with fake devices: the
split keeps an op's classes together and selects each benchmark once; part result files merge into the
one ASV file per commit; one real run of two parts is accepted by `asv publish`."""

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from project_copy import project_repo

from mlpbench.asv import machine as asv_machine, offline as asv_offline, parallel as asv_parallel, suite as asv_suite
from mlpbench import registry

NAMES = [(f"{tier}.{cls_name}", f"{tier}.{cls_name}.{m}({', '.join(repr(v) for v in values)})")
         for tier in registry.TIERS for cls_name, cls in asv_suite.classes(tier).items()
         for m in sorted(vars(cls)) if m.startswith(("track_", "time_"))
         for values in itertools.product(*cls.params)]


def _stem(cls: str) -> str:
    return cls.removesuffix("Device").removesuffix("Host").removesuffix("Codegen")


@pytest.mark.parametrize("bench, n", [(r"^quick\.", 3), (r"^standard\.", 4), (r"^(quick|full)\.", 8),
                                      (r"^quick\.(SiluMul|GeluMul|Linear)Host\.track_host_time\('eager'", 2),
                                      (r"^quick\.", 1)])
def test_split_keeps_an_ops_classes_together_and_selects_each_benchmark_once(bench, n):
    parts = asv_parallel.split(bench, n)
    assert 1 <= len(parts) <= n
    assert all(p.startswith("^") for p in parts)
    part_of_class = {}
    for cls, name in NAMES:
        hits = [k for k, p in enumerate(parts) if re.search(p, name)]
        assert len(hits) == (1 if re.search(bench, name) else 0), (name, parts)
        if hits:
            part_of_class[cls] = hits[0]
    by_op = {}
    for cls, k in part_of_class.items():
        by_op.setdefault(_stem(cls), set()).add(k)
    assert all(len(ks) == 1 for ks in by_op.values()), by_op
    if n > 1 and len(by_op) > 1:
        assert len(parts) == min(n, len(by_op))


def test_gpu_count_is_overridden_for_fake_devices(monkeypatch):
    monkeypatch.setenv(asv_parallel.GPUS_ENV, "3")
    assert asv_parallel.gpu_count() == 3
    monkeypatch.delenv(asv_parallel.GPUS_ENV)
    assert asv_parallel.gpu_count() >= 1


# --- merging fabricated part files ---------------------------------------------------------------

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
           "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
COMMIT = "ab" * 20
ENV = "existing-py_usr_bin_python3"


def _row(value: float, started: int) -> list:
    # one parameter combination, as ASV writes a track_* benchmark with samples (trailing Nones dropped)
    return [[value], [["'eager'"]], "v1", started, 1.5, None, None, None, None, None, None, [[value, value * 1.1]]]


def _doc(rows: dict, durations: dict, commit: str = COMMIT, params: dict | None = None) -> dict:
    return {"commit_hash": commit, "env_name": ENV, "date": 1700000000000,
            "params": params or {"machine": "box", "torch": "2.13.0", "python": "3.11"},
            "python": "/usr/bin/python3", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
            "results": rows, "durations": durations, "version": 2}


def _write(folder: Path, doc: dict) -> Path:
    path = folder / "box" / f"{doc['commit_hash'][:8]}-{doc['env_name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


A = {"quick.SiluMulHost.track_host_time": _row(1e-3, 1700000001000)}
B = {"quick.GeluMulHost.track_host_time": _row(2e-3, 1700000002000)}
C = {"quick.LinearHost.track_host_time": _row(3e-3, 1600000000000)}


def test_two_part_files_merge_into_the_file_one_run_would_have_written(tmp_path):
    one = _write(tmp_path / "p0", _doc(A, {"<build>": 0.0, "<setup_cache silu:1>": 4.0}))
    two = _write(tmp_path / "p1", _doc(B, {"<build>": 0.001, "<setup_cache gelu:1>": 5.0}))
    into = tmp_path / "results" / "box" / one.name
    asv_parallel.merge([one, two], into)
    both = _doc(A | B, {"<build>": 0.001, "<setup_cache silu:1>": 4.0, "<setup_cache gelu:1>": 5.0})
    assert json.loads(into.read_text()) == both


@pytest.mark.parametrize("seeded", [True, False], ids=["parts-started-from-it", "parts-alone"])
def test_parts_merge_into_the_commits_existing_file_keeping_what_they_did_not_run(tmp_path, seeded):
    # record() starts each part from a copy of the commit's file, as one `asv run` loads it; either way
    # what no part ran stays, and what a part ran again replaces the old entry.
    old_a = {"quick.SiluMulHost.track_host_time": _row(9.0, 1600000000000)}
    into = _write(tmp_path / "results", _doc(C | old_a, {"<build>": 0.0, "<setup_cache linear:1>": 7.0}))
    seed = C | old_a if seeded else {}
    one = _write(tmp_path / "p0", _doc(seed | A, {"<build>": 0.0}))
    two = _write(tmp_path / "p1", _doc(seed | B, {"<build>": 0.0}))
    asv_parallel.merge([one, two], into)
    assert json.loads(into.read_text()) == _doc(C | A | B, {"<build>": 0.0, "<setup_cache linear:1>": 7.0})



@pytest.mark.parametrize("other", [{"commit": "cd" * 20}, {"params": {"machine": "box", "torch": "2.12.0",
                                                                       "python": "3.11"}}])
def test_parts_that_disagree_are_refused_naming_both_files(tmp_path, other):
    one = _write(tmp_path / "p0", _doc(A, {}))
    two = _write(tmp_path / "p1", _doc(B, {}, **other))
    two = two.rename(two.with_name(one.name))  # same file name: only the contents disagree
    into = tmp_path / "results" / "box" / one.name
    with pytest.raises(asv_parallel.MergeError) as exc:
        asv_parallel.merge([one, two], into)
    assert str(one) in str(exc.value) and str(two) in str(exc.value)
    assert not into.exists()


# --- one real run of two parts on fake devices ---------------------------------------------------


@pytest.mark.slow
def test_record_on_two_fake_gpus_merges_both_parts_into_one_file_that_asv_publishes(tmp_path, monkeypatch, capsys):
    assets = asv_offline.default_cache_dir()
    repo = project_repo(tmp_path)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLPBENCH_ASV_ASSETS", str(assets))
    monkeypatch.setenv(asv_parallel.GPUS_ENV, "2")
    monkeypatch.setenv("MLPBENCH_CASES", r"^(silu_mul|gelu_mul)/eager/fp32/")  # each setup_cache measures two cases
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes"], cwd=repo, check=True, capture_output=True)
    machine = asv_machine.machine_entry()["machine"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    bench = r"^quick\.(SiluMul|GeluMul)Host\.track_host_time\('eager', 'fp32'"
    cmd = [sys.executable, "-m", "asv", "run", "--environment", f"existing:{sys.executable}", "--set-commit-hash",
           head, "--machine", machine, "--bench", bench, "--record-samples"]
    n = asv_parallel.gpu_count()
    assert n == 2 and len(asv_parallel.split(bench, n)) == 2

    assert asv_parallel.record(cmd, repo, n) == 0, capsys.readouterr().out[-4000:]
    out = capsys.readouterr().out
    assert out.count("record part ") == 4, out[-4000:]  # each part started and finished
    (result_file,) = (repo / "results" / "asv" / machine).glob(f"{head[:8]}-existing-*.json")
    doc = json.loads(result_file.read_text())
    assert doc["commit_hash"] == head and doc["params"]["machine"] == machine
    for op in ("SiluMulHost", "GeluMulHost"):
        row = dict(zip(doc["result_columns"], doc["results"][f"quick.{op}.track_host_time"]))
        assert any(v is not None and v > 0 for v in row["result"]), (op, row)
    assert (repo / "results" / "asv" / machine / "machine.json").is_file()
    assert (repo / "results" / "asv" / "benchmarks.json").is_file()
    assert not list(repo.glob(".asv-part-*")) and not list((repo / ".asv").glob("parallel-*"))

    try:
        asv_offline.fetch_assets(assets)
    except asv_offline.AssetError as exc:
        pytest.skip(f"the dashboard's assets are not cached in {assets} (no network?): {exc}")
    proc = subprocess.run([sys.executable, "-m", "asv", "publish"], cwd=repo, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_the_nightly_records_through_one_asv_run_per_gpu(tmp_path, monkeypatch):
    """nightly.run with ASV and the gate stood in for: on two (fake) GPUs its record step is record()."""
    import argparse

    from mlpbench import nightly

    head, calls = "c" * 40, []
    monkeypatch.setenv(asv_parallel.GPUS_ENV, "2")
    monkeypatch.setattr(nightly.asv_run, "command", lambda args: (["asv", "run", "--bench", r"^quick\."], head, "cibox"))
    monkeypatch.setattr(nightly, "_step", lambda name, cmd, cwd: True)
    monkeypatch.setattr(asv_parallel, "record", lambda cmd, repo, n, say=print: calls.append((cmd, n)) or 0)
    monkeypatch.setattr(nightly.gate, "load", lambda folder: [])
    args = argparse.Namespace(repo=tmp_path, summary=tmp_path / "summary.md", no_publish=True, threshold=None,
                              no_confirm=True)
    nightly.run(args)
    assert calls == [(["asv", "run", "--bench", r"^quick\.", "--record-samples", "--show-stderr"], 2)]
    assert "ASV run" not in (tmp_path / "summary.md").read_text()
