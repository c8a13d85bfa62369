"""`mlpbench ab`: pooling and verdicts on fabricated samples, and the command on a clone of this
repository with a slowdown planted in one case's host path."""

import json
import math
import os
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
import yaml

from mlpbench.judging import ab

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
    assert row["verdict"] == "unchanged"
    assert row["threshold"] == pytest.approx(ab.between(base[CASE], head[CASE], "track_host_time"))
    one, other = ab.pool([[_record(CASE)]])[CASE], ab.pool([[_record(CASE, 1)]])[CASE]
    assert ab.between(one, other, "track_host_time") is None  # one round a side: no spread to see


def test_samples_that_straddle_two_states_do_not_hide_a_slowdown_the_rounds_agree_on():
    # a third of every round's samples sit in a clock state 3% faster: three robust CVs of them read
    # about 6.7%, over the 6% slowdown, but the rounds' medians agree: the noise between processes is small
    def rounds(scale, seeds):
        recs = []
        for seed in seeds:
            jitter = 1 + 0.001 * np.random.default_rng(seed).standard_normal(40)
            two = np.where(np.arange(40) % 10 < 3, 0.97, 1.0) * jitter * 1e-5 * scale
            recs.append([_record(CASE, seed) | {"host_time_samples_s": list(two)}])
        return ab.pool(recs, machines=["cpu-x"] * len(seeds))

    (row,) = ab.judge(rounds(1.0, (0, 2, 4)), rounds(1.06, (1, 3, 5)))
    assert row["verdict"] == "regression" and row["threshold_from"] != "within-run noise"
    (same,) = ab.judge(rounds(1.0, (0, 2, 4)), rounds(1.0, (1, 3, 5)))
    assert same["verdict"] == "unchanged"
    # one round a side: no spread between processes is known, and the within-run term stands
    (one,) = ab.judge(rounds(1.0, (0,)), rounds(1.06, (1,)))
    assert one["threshold_from"] == "within-run noise" and one["verdict"] == "unchanged"


def test_on_a_gpu_device_time_and_back_to_back_host_time_are_judged_on_one_box():
    rows = _rows(head_scale=1.1, gpu=True)
    assert [(r["metric"], r["verdict"]) for r in rows] == [("device time", "regression"),
                                                           ("back-to-back host time", "unchanged")]
    assert rows[1]["boxes"] == "same box" and rows[1]["threshold_from"] in ("host floor", "within-run noise")
    text = ab.markdown(rows, "a" * 40, "b" * 40, 3)
    assert text.startswith(ab.MARKER) and f"| {CASE} | device time |" in text and "| regression |" in text


def test_peak_memory_and_kernels_per_call_are_counted_per_round_and_judged_by_the_threshold():
    def rounds(peaks, kernels=3):
        return ab.pool([[_record(CASE, r, gpu=True) | {"peak_memory_bytes": p, "kernels_per_call": kernels}]
                        for r, p in enumerate(peaks)], machines=["gpu-x"] * len(peaks))

    def row(base, head, metric):
        return next(r for r in ab.judge(base, head) if r["metric"] == metric)

    same = row(rounds([5e6, 5e6, 5e6]), rounds([5e6, 5e6, 5e6]), "peak memory")
    assert same["verdict"] == "unchanged" and same["samples"] == [3, 3] and same["ci_high"] == 1.0
    assert same["test"].startswith("threshold only (counted per round)")
    up = row(rounds([5e6] * 3), rounds([5.5e6, 5.5e6, 5.4e6]), "peak memory")
    assert up["verdict"] == "regression" and up["ratio"] == pytest.approx(1.1) and ab.failing([up])
    assert up["ci_low"] == pytest.approx(5.4 / 5) and up["ci_high"] == pytest.approx(1.1)
    # one round out of line: the median decides, the interval shows the round
    odd = row(rounds([5e6] * 3), rounds([5e6, 5e6, 6e6]), "peak memory")
    assert odd["verdict"] == "unchanged" and odd["ci_high"] == pytest.approx(1.2)
    more = row(rounds([5e6] * 3), rounds([5e6] * 3, kernels=4), "kernels per call")
    assert more["verdict"] == "regression" and more["threshold_from"] == "floor"
    assert "| peak memory | 5.00 MB | 5.50 MB |" in ab.markdown([up], "a" * 40, "b" * 40, 3)
    # a CPU run counts nothing (no device time): no counted rows
    assert {r["metric"] for r in _rows()} == {"host time"}


def test_a_count_that_identical_code_gives_in_some_process_is_no_regression():
    # Inductor fused a compiled MLP into 4 kernels in one process and 5 in the others, for one commit:
    # medians 4.5 and 5 read 1.11 over a 3% floor, but head only matches what a base round counted
    def rounds(kernels):
        return ab.pool([[_record(COMPILED, r, gpu=True) | {"peak_memory_bytes": 5e6, "kernels_per_call": k}]
                        for r, k in enumerate(kernels)], machines=["gpu-x"] * len(kernels))

    def row(base, head):
        return next(r for r in ab.judge(rounds(base), rounds(head)) if r["metric"] == "kernels per call")

    mixed = row([4, 5], [5, 5])
    assert mixed["verdict"] == "unchanged" and not ab.failing([mixed])
    assert mixed["ci_low"] == 1.0 and mixed["ci_high"] == 1.25 and "the rounds overlap" in mixed["cause"]
    assert row([4, 4], [5, 5])["verdict"] == "regression"  # every head round above every base round
    assert row([5, 5], [4, 5])["verdict"] == "unchanged" and row([5, 5], [4, 4])["verdict"] == "improvement"


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


def test_a_case_base_reported_and_head_never_did_fails():
    (row,) = ab.judge(ab.pool([[_record(CASE)]]), {})
    assert row["verdict"] == ab.MISSING and ab.failing([row])
    base = ab.pool([[]], [[{"case": CASE, "outcome": "skipped", "reason": "no GPU"}]])
    (row,) = ab.judge(base, {})
    assert row["verdict"] == ab.MISSING and ab.failing([row])


def test_the_median_of_k_offsets_spreads_as_theory_says():
    # one or two rounds: the median is the mean; three: Var(median of 3 normals) = 0.4487 (order statistics)
    assert ab.median_spread(1) == ab.median_spread(2) == 1.0
    assert ab.median_spread(3) == pytest.approx((3 * 0.4487) ** 0.5, abs=0.005)
    # many rounds: toward √(π/2), the median's asymptotic cost against the mean
    assert ab.median_spread(41) == pytest.approx((math.pi / 2) ** 0.5, abs=0.02)


def test_a_spread_estimated_from_few_rounds_takes_students_multiple():
    # √2·t(1 − p, ν) with p = Φ(−3/√2) ≈ 1.7%: between t's 97.5% and 99% points (4 dof: 2.776, 3.747)
    assert 2.776 * 2 ** 0.5 < ab.own_multiple(4) < 3.747 * 2 ** 0.5
    assert ab.own_multiple(2) > ab.own_multiple(4) > ab.own_multiple(14) > ab.own_multiple(200)
    assert ab.own_multiple(200) == pytest.approx(3.0, abs=0.05)  # known, it is the A/A multiple
    # a side without rounds of this metric gives no spread, however many the other has
    full = ab.pool([[_record(CASE, r)] for r in range(4)])[CASE]
    assert ab.spread(ab.Side(), full, "track_host_time") is None and ab.spread(full, full, "track_host_time")


def test_a_runs_own_spread_is_pooled_over_its_rounds_with_that_multiple():
    base = ab.pool([[_record(CASE, r, scale)] for r, scale in enumerate((0.97, 1.0, 1.03))])
    head = ab.pool([[_record(CASE, 9 + r, scale)] for r, scale in enumerate((0.97, 1.0, 1.03))])
    logs = [[math.log(m) for m in side[CASE].medians["track_host_time"]] for side in (base, head)]
    s = (sum((v - sum(x) / 3) ** 2 for x in logs for v in x) / 4) ** 0.5
    assert ab.between(base[CASE], head[CASE], "track_host_time") == pytest.approx(
        ab.own_multiple(4) * s * ab.median_spread(3) / 3 ** 0.5)


def test_the_machines_figure_and_the_runs_own_spread_are_pooled_by_their_degrees_of_freedom(tmp_path):
    from mlpbench.judging import between_runs

    base = ab.pool([[_record(CASE, r, scale)] for r, scale in enumerate((0.97, 1.0, 1.03))])
    head = ab.pool([[_record(CASE, 9 + r, scale)] for r, scale in enumerate((0.97, 1.0, 1.03))])
    s, nu, k = ab.spread(base[CASE], head[CASE], "track_host_time")
    assert (nu, k) == (4, 3)
    # an A/A figure of 3 × 1% from 3 degrees of freedom, pooled with the run's own s from 4
    want = ab.own_multiple(7) * ((3 * 0.01 ** 2 + 4 * s ** 2) / 7) ** 0.5 * ab.median_spread(3) / 3 ** 0.5
    assert ab.between(base[CASE], head[CASE], "track_host_time", 0.03, 3) == pytest.approx(want)
    # without its degrees of freedom the figure is taken as exact: the larger of it pooled and the run's own
    assert ab.between(base[CASE], head[CASE], "track_host_time", 0.03, None) == pytest.approx(
        max(ab.pooled(0.03, 3), ab.between(base[CASE], head[CASE], "track_host_time")))
    # the figure alone, one round a side: Student's t at its own 3 degrees of freedom, wider than 3 × 1%
    one, other = ab.pool([[_record(CASE)]]), ab.pool([[_record(CASE, 1)]])
    assert ab.between(one[CASE], other[CASE], "track_host_time", 0.03, 3) == pytest.approx(ab.own_multiple(3) * 0.01)
    assert ab.own_multiple(3) * 0.01 > 0.03
    # and what ab.judge reads from a between-runs file that records them (device time, one box)
    between_runs.write(between_runs.path_for(tmp_path, "cpu-x"), "cpu-x", [], {
        CASE: {"allowance": 0.5, between_runs.ONE_BOX: {"allowance": 0.03, "dof": 3}}})
    gb = ab.pool([[_record(CASE, 2 * r, sc, True)] for r, sc in enumerate((0.97, 1.0, 1.03))], machines=["cpu-x"] * 3)
    gh = ab.pool([[_record(CASE, 2 * r + 1, sc, True)] for r, sc in enumerate((0.97, 1.0, 1.03))], machines=["cpu-x"] * 3)
    row = next(r for r in ab.judge(gb, gh, results_root=tmp_path) if r["metric"] == "device time")
    assert row["threshold"] == pytest.approx(ab.between(gb[CASE], gh[CASE], "track_device_time", 0.03, 3))


def test_pooled_rounds_shrink_the_between_process_allowance_by_root_k_down_to_the_floor():
    assert ab.pooled(0.06, 2) == pytest.approx(0.06 / 2 ** 0.5) and ab.pooled(None, 4) is None
    assert ab.pooled(0.06, 4) == pytest.approx(0.06 * ab.median_spread(4) / 2)
    # an A/A allowance of 4.5% (one process against one other): a 4% slowdown over 3 rounds a side
    # is found (threshold 4.5% × 1.16 / √3 = 3.0%), over 1 round a side it is not
    from mlpbench.judging import between_runs

    def rec(seed, scale):  # rounds of tight device samples (0.2%): the allowance sets the threshold
        return _record(CASE, seed, scale, True) | {"device_time_samples_s": _samples(1e-4 * scale, 20, 0.002, seed)}

    def device(k, scale, root):
        base = ab.pool([[rec(2 * r, 1.0)] for r in range(k)], machines=["cpu-x"] * k)
        head = ab.pool([[rec(2 * r + 1, scale)] for r in range(k)], machines=["cpu-x"] * k)
        return next(r for r in ab.judge(base, head, results_root=root) if r["metric"] == "device time")

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        between_runs.write(between_runs.path_for(Path(tmp), "cpu-x"), "cpu-x", [], {
            CASE: {"allowance": 0.5, between_runs.ONE_BOX: {"allowance": 0.045}}})
        three, one = device(3, 1.04, Path(tmp)), device(1, 1.04, Path(tmp))
        assert three["verdict"] == "regression" and three["threshold"] == pytest.approx(0.045 * 1.1613 / 3 ** 0.5, rel=0.01)
        assert one["verdict"] == "unchanged" and one["threshold"] == pytest.approx(0.045)
        assert device(16, 1.04, Path(tmp))["threshold"] == pytest.approx(0.02)  # the floor


def test_a_runs_own_noise_is_read_from_each_round_not_from_the_rounds_pooled():
    # tight rounds at offsets of ±3%: pooled, their spread would read as a noisy run (3 × its robust CV)
    base = ab.pool([[_record(CASE, r, scale)] for r, scale in enumerate((0.97, 1.0, 1.03))])
    head = ab.pool([[_record(CASE, 9 + r, scale)] for r, scale in enumerate((0.97, 1.0, 1.03))])
    side = base[CASE]
    assert max(side.noise["track_host_time"]) < 0.015
    from mlpbench.judging import gate

    own = ab.between(side, head[CASE], "track_host_time")  # the rounds' offsets, about 9%
    # read from the pooled samples, the within-run term would exceed it and set the threshold
    assert 3 * gate._noise(side.samples["track_host_time"]) > own > 0.05
    (row,) = ab.judge(base, head)
    assert row["threshold_from"] == "between-run noise" and row["threshold"] == pytest.approx(own)


# --- ab.measure with git, the worktrees and the processes stood in for -----------------------------

def _fake_rounds(monkeypatch, rc=lambda name, k: 0, outcomes=lambda name, k: []):
    """ab.measure's git and `mlpbench run` faked: each round writes its log and reports one record of
    CASE; returns the results folders measured, in order."""
    calls = []
    monkeypatch.setattr(ab, "_git", lambda repo, *a: subprocess.CompletedProcess(a, 0, "", ""))
    monkeypatch.setattr(ab, "_preflight", lambda *a: None)

    def measure(tree, out, tier, args):
        calls.append(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "log.txt").write_text("Traceback: boom\n")
        name, k = out.name.rsplit("-", 1)
        return rc(name, int(k)), "Traceback: boom\n"

    monkeypatch.setattr(ab, "_measure", measure)
    monkeypatch.setattr(ab, "_read", lambda out: ([_record(CASE, len(calls))], outcomes(*out.name.rsplit("-", 1)),
                                                  "cpu-x"))
    return calls


def _args(rounds=2, results=None):
    return Namespace(op=None, variant=None, dtype=None, shape=None, rounds=rounds, results=results)



def test_paired_ratios_are_judged_beside_the_other_times_listed_not_gated():
    def rounds(scale, seed0):
        out = []
        for r in range(3):
            info = _record(CASE, seed0 + r, gpu=True)
            info["host_time_back_to_back_vs_eager_samples"] = _samples(0.8 * scale, 9, spread=0.005, seed=seed0 + r)
            out.append([info])
        return ab.pool(out, machines=["h200-x"] * 3)

    rows = ab.judge(rounds(1.0, 0), rounds(1.05, 10))
    paired = next(r for r in rows if r["metric"] == ab.PAIRED[0])
    assert paired["samples"] == [27, 27] and paired["ratio"] == pytest.approx(1.05, abs=0.01)
    # 5% slower, past the 2% floor and its interval above 1: said, but never a failure
    assert paired["verdict"] == "slower (not gated)" and not ab.failing(rows)
    assert [r["verdict"] for r in rows if r["metric"] != ab.PAIRED[0]] == ["unchanged", "unchanged"]
    text = ab.markdown(rows, "b" * 40, "h" * 40, 3)
    assert re.search(rf"\| {CASE} \| {ab.PAIRED[0]} \| 0\.80\d× eager \| 0\.84\d× eager \| 1\.04", text), text


def test_paired_rounds_pass_paired_to_each_run(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(ab.subprocess, "run", lambda cmd, **k: seen.append(cmd) or subprocess.CompletedProcess(cmd, 0))
    ab._measure(tmp_path, tmp_path / "base-1", "quick", Namespace(**vars(_args(1)), paired=True))
    ab._measure(tmp_path, tmp_path / "base-2", "quick", _args(1))
    assert "--paired" in seen[0] and "--paired" not in seen[1]

SHAS = {"base": "b" * 40, "head": "h" * 40}


def test_rounds_alternate_abba(monkeypatch, tmp_path):
    calls = _fake_rounds(monkeypatch)
    sides = ab.measure(_args(4), tmp_path, SHAS, tmp_path, "quick")
    assert [p.name for p in calls] == ["base-1", "head-1", "head-2", "base-2", "base-3", "head-3", "head-4", "base-4"]
    assert sides["base"][CASE].rounds == sides["head"][CASE].rounds == 4


def test_a_round_that_exits_1_with_no_failed_case_is_a_crash_exit_2(monkeypatch, tmp_path):
    _fake_rounds(monkeypatch, rc=lambda name, k: int(name == "head" and k == 2))
    with pytest.raises(ab.ABInputError, match=r"at head .* round 2/2 exited 1 with no failed case") as err:
        ab.measure(_args(2, tmp_path / "kept"), tmp_path, SHAS, tmp_path, "quick")
    assert str(tmp_path / "kept" / "head-2" / "log.txt") in str(err.value) and "boom" in str(err.value)
    # exit 1 where an outcome says a case failed is a verdict, not a crash
    _fake_rounds(monkeypatch, rc=lambda name, k: int(name == "head"),
                 outcomes=lambda name, k: [{"case": CASE, "outcome": "failed", "reason": "boom"}] * (name == "head"))
    sides = ab.measure(_args(2), tmp_path, SHAS, tmp_path / "w", "quick")
    (row,) = ab.judge(sides["base"], sides["head"])
    assert row["verdict"] == "failed at head: boom" and ab.failing([row])


def test_a_relative_results_folder_is_made_absolute_and_a_used_one_refused(monkeypatch, tmp_path):
    calls = _fake_rounds(monkeypatch)
    monkeypatch.chdir(tmp_path)
    ab.measure(_args(1, Path("kept")), tmp_path, SHAS, tmp_path / "w", "quick")
    assert calls == [tmp_path / "kept" / "base-1", tmp_path / "kept" / "head-1"]
    (tmp_path / "again" / "head-2").mkdir(parents=True)  # an empty one is fine
    ab.measure(_args(2, Path("again")), tmp_path, SHAS, tmp_path / "w", "quick")
    n = len(calls)
    with pytest.raises(ab.ABInputError, match="base-1 already holds results") as err:
        ab.measure(_args(1, Path("kept")), tmp_path, SHAS, tmp_path / "w", "quick")
    assert str(tmp_path / "kept") in str(err.value) and len(calls) == n  # refused before measuring


def test_one_round_is_warned_of(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(ab, "resolve", lambda repo, rev: rev * 10)
    monkeypatch.setattr(ab, "measure", lambda *a: {"base": {}, "head": {}})
    monkeypatch.setattr(ab, "judge", lambda *a, **k: [])
    args = Namespace(base="b", head="h", tier="quick", rounds=1, threshold=None, repo=tmp_path, markdown=None,
                     json=False)
    assert ab.run(args, tmp_path) == 0
    assert "--rounds 1" in capsys.readouterr().err
    args.rounds = 2
    assert ab.run(args, tmp_path) == 0 and "warning" not in capsys.readouterr().err
    # --paired where nothing could pair (a CPU) says so rather than leave the rows missing unexplained
    args.paired = True
    assert ab.run(args, tmp_path) == 0 and "--paired: no case recorded a paired ratio" in capsys.readouterr().err


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
    assert doc["permissions"] == {"contents": "read", "pull-requests": "write"}
    checkout = job["steps"][0]["with"]
    assert checkout["fetch-depth"] == 0 and checkout["persist-credentials"] is False
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "--base ${{ github.event.pull_request.base.sha }}" in runs
    # head: the merge commit checked out, so base's newer commits are on both sides
    assert "--head ${{ github.sha }}" in runs and "--markdown ab.md" in runs
    assert ab.MARKER in runs and "-X PATCH" in runs and "-X POST" in runs


def test_ab_reads_device_times_spread_within_boxes_not_across_them(tmp_path):
    # base and head run on one box: a step between boxes in the A/A runs must not hide a 10% slowdown
    from mlpbench.judging import between_runs

    between_runs.write(between_runs.path_for(tmp_path, "cpu-x"), "cpu-x", [], {
        CASE: {"allowance": 0.5, between_runs.ONE_BOX: {"allowance": 0.01}}})
    base = ab.pool([[_record(CASE, 2 * r, 1.0, True)] for r in range(3)], machines=["cpu-x"] * 3)
    head = ab.pool([[_record(CASE, 2 * r + 1, 1.1, True)] for r in range(3)], machines=["cpu-x"] * 3)
    device = next(r for r in ab.judge(base, head, results_root=tmp_path) if r["metric"] == "device time")
    assert device["verdict"] == "regression" and device["threshold"] < 0.5
