"""`mlpbench ab`: pooling and verdicts on fabricated samples, and the command on a clone of this
repository with a slowdown planted in one case's host path."""

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
import yaml

from mlpbench import ab

ROOT = Path(__file__).resolve().parent.parent
CASE = "silu_mul/eager/fp32/t64-h448"  # quick tier, eager: its host time is all host path
COMPILED = "silu_mul/compiled/fp32/t64-h448"


def _samples(median, n=40, spread=0.01, seed=0):
    return list(median * (1 + spread * np.random.default_rng(seed).standard_normal(n)))


def _record(case, seed=0, scale=1.0, gpu=False):
    op, variant, dtype, shape = case.split("/")
    info = {"case": case, "op": op, "variant": variant, "dtype": dtype, "shape_id": shape, "box_id": 7}
    if gpu:
        return info | {"device_time_samples_s": _samples(1e-4 * scale, 20, seed=seed),
                       "host_time_back_to_back_samples_s": _samples(2e-5, 5, seed=seed + 50),
                       "host_time_samples_s": _samples(3e-5, seed=seed + 99)}
    return info | {"host_time_samples_s": _samples(1e-5 * scale, seed=seed)}


def _rows(base_scale=1.0, head_scale=1.0, k=3, gpu=False, threshold=None):
    base = ab.pool([[_record(CASE, 2 * r, base_scale, gpu)] for r in range(k)], machines=["cpu-x"] * k)
    head = ab.pool([[_record(CASE, 2 * r + 1, head_scale, gpu)] for r in range(k)], machines=["cpu-x"] * k)
    return ab.judge(base, head, threshold)


def test_pooling_keeps_every_rounds_samples_and_the_gate_judges_them():
    base = ab.pool([[_record(CASE, r)] for r in range(3)], machines=["cpu-x"] * 3)
    assert base[CASE].rounds == 3 and len(base[CASE].samples["track_host_time"]) == 120
    (row,) = _rows(head_scale=1.2)
    assert row["case"] == CASE and row["metric"] == "host time" and row["verdict"] == "regression"
    assert row["samples"] == [120, 120] and row["rounds"] == [3, 3] and row["ci_low"] > 1
    assert row["threshold_from"] in ("floor", "within-run noise") and ab.failing([row])
    assert [r["verdict"] for r in _rows()] == ["unchanged"]
    assert [r["verdict"] for r in _rows(head_scale=0.8)] == ["improvement"]
    # --threshold: a 20% slowdown under a 30% threshold is not one
    (row,) = _rows(head_scale=1.2, threshold=0.30)
    assert row["verdict"] == "unchanged" and row["threshold_from"] == "given"


def test_the_rounds_own_spread_widens_the_threshold():
    # each round's samples are tight, but head's rounds move (the gate's within-run rule reads base's
    # samples only): a slowdown within that spread is not one
    base = ab.pool([[_record(CASE, r)] for r in range(3)])
    head = ab.pool([[_record(CASE, 9 + r, 1.06 * scale)] for r, scale in enumerate((1.08, 0.93, 1.0))])
    (row,) = ab.judge(base, head)
    assert row["threshold_from"] == "between-run noise" and row["ci_low"] > 1 and row["ratio"] > 1.02
    assert row["verdict"] == "unchanged" and row["threshold"] == ab.between(base[CASE], head[CASE], "track_host_time")
    one, other = ab.pool([[_record(CASE)]])[CASE], ab.pool([[_record(CASE, 1)]])[CASE]
    assert ab.between(one, other, "track_host_time") is None  # one round a side: no spread to see


def test_on_a_gpu_device_time_and_back_to_back_host_time_are_judged_on_one_box():
    rows = _rows(head_scale=1.1, gpu=True)
    assert [(r["metric"], r["verdict"]) for r in rows] == [("device time", "regression"),
                                                           ("back-to-back host time", "unchanged")]
    assert rows[1]["boxes"] == "same box" and rows[1]["threshold_from"] in ("host floor", "within-run noise")
    text = ab.markdown(rows, "a" * 40, "b" * 40, 3)
    assert text.startswith(ab.MARKER) and f"| {CASE} | device time |" in text and "| regression |" in text


def test_failures_and_cases_of_one_side_are_listed_and_only_a_head_failure_fails():
    base = ab.pool([[_record(CASE)]], [[{"case": COMPILED, "outcome": "failed", "reason": "CorrectnessError"}]])
    head = ab.pool([[_record(CASE, 1), _record(COMPILED, 1)]])
    rows = {r["case"]: r for r in ab.judge(base, head)}
    assert rows[COMPILED]["verdict"] == "failed at base: CorrectnessError" and not ab.failing([rows[COMPILED]])
    head = ab.pool([[_record(CASE, 1)]], [[{"case": CASE, "outcome": "failed", "reason": "boom"}]])
    (row,) = ab.judge(ab.pool([[_record(CASE)]]), head)
    assert row["verdict"] == "failed at head: boom" and ab.failing([row])
    (row,) = ab.judge({}, ab.pool([[_record(CASE)]]))
    assert row["verdict"] == "only at head" and not ab.failing([row])


# --- the command, on a clone ----------------------------------------------------------------------

def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A clone of this repository whose HEAD makes silu_mul's eager variant sleep before each call."""
    repo = tmp_path_factory.mktemp("ab") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    kinds = repo / "mlpbench" / "ops" / "_kinds.py"
    text = kinds.read_text()
    old = "lambda base, device, **_: (base, _torch() + note)"
    assert old in text, "the planted slowdown needs eager's make in mlpbench/ops/_kinds.py"
    kinds.write_text(text.replace(old, "lambda base, device, **_: (_slow(base), _torch() + note)")
                     + "\n\ndef _slow(f):\n    import time\n\n    def slow(*args):\n        time.sleep(0.001)\n"
                       "        return f(*args)\n    return slow\n")
    _git(repo, "commit", "-qam", "planted slowdown")
    return repo


def _ab(repo, tmp, *args):
    env = os.environ | {"TMPDIR": str(tmp)}  # where ab's worktrees go, to check they are removed
    return subprocess.run([sys.executable, "-m", "mlpbench.cli", "ab", "--repo", str(repo), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def _clean(repo, tmp):
    assert _git(repo, "worktree", "list").count("\n") == 1, _git(repo, "worktree", "list")
    assert not list(Path(tmp).glob("mlpbench-ab-*"))


SELECT = ("--op", "silu_mul", "--variant", "eager", "--dtype", "fp32", "--rounds", "2")


@pytest.mark.slow
def test_a_planted_slowdown_at_head_regresses_and_exits_1(clone, tmp_path):
    out = _ab(clone, tmp_path, "--base", "HEAD~1", "--head", "HEAD", *SELECT, "--json",
              "--markdown", str(tmp_path / "ab.md"))
    assert out.returncode == 1, out.stdout + out.stderr
    (row,) = json.loads(out.stdout)
    assert row["case"] == CASE and row["metric"] == "host time" and row["verdict"] == "regression"
    assert row["rounds"] == [2, 2] and row["ratio"] > 1.5
    assert f"| {CASE} | host time |" in (tmp_path / "ab.md").read_text()
    assert out.stderr.count("round") == 4  # base, head, base, head
    _clean(clone, tmp_path)


@pytest.mark.slow
def test_the_same_revision_on_both_sides_exits_0(clone, tmp_path):
    # a wide threshold: on a small shared CI box, load moves host time between processes a lot
    out = _ab(clone, tmp_path, "--base", "HEAD", "--head", "HEAD", *SELECT, "--threshold", "50")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"| {CASE} | host time |" in out.stdout and "| unchanged |" in out.stdout
    _clean(clone, tmp_path)


def test_bad_input_exits_2_naming_the_bad_value(clone, tmp_path):
    out = _ab(clone, tmp_path, "--base", "no-such-rev", "--head", "HEAD")
    assert out.returncode == 2 and "'no-such-rev'" in out.stderr
    out = _ab(clone, tmp_path, "--base", "HEAD", "--head", "HEAD", "--op", "no_such_op", "--tier", "quick")
    assert out.returncode == 2 and "no_such_op" in out.stderr, out.stderr
    _clean(clone, tmp_path)


def test_worktrees_are_removed_when_interrupted(clone, tmp_path, monkeypatch):
    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(ab, "_measure", interrupted)
    args = Namespace(op=["silu_mul"], variant=["eager"], dtype=["fp32"], shape=None, rounds=1, results=None)
    shas = {"base": ab.resolve(clone, "HEAD~1"), "head": ab.resolve(clone, "HEAD")}
    with pytest.raises(KeyboardInterrupt):
        ab.measure(args, clone, shas, tmp_path, "quick")
    assert _git(clone, "worktree", "list").count("\n") == 1
    assert not (tmp_path / "tree-base").exists() and not (tmp_path / "tree-head").exists()


def test_the_ab_workflow_posts_one_comment_per_pull_request_from_a_gpu_runner():
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "ab.yml").read_text())
    on = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as a boolean
    assert set(on["pull_request"]["types"]) == {"labeled", "synchronize"}
    job = doc["jobs"]["ab"]
    assert "'benchmark'" in job["if"] and {"self-hosted", "gpu"} <= set(job["runs-on"])
    assert doc["permissions"]["pull-requests"] == "write" and job["steps"][0]["with"]["fetch-depth"] == 0
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "--base ${{ github.event.pull_request.base.sha }}" in runs
    assert "--head ${{ github.event.pull_request.head.sha }}" in runs and "--markdown ab.md" in runs
    assert ab.MARKER in runs and "-X PATCH" in runs and "-X POST" in runs
