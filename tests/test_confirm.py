"""Same-box confirmation and bisection of the nightly's regressions, with the measurer faked: a
fabricated verdict list, a temporary linear git history, no benchmark process."""

import argparse
import json
import math
import subprocess

import pytest

from mlpbench.judging import confirm, gate
from mlpbench import nightly
from mlpbench.results import Point

A = "linear/eager/fp32/t1024-i32-o64"  # reproduces on this box
B = "linear/eager/bf16/t1024-i32-o64"  # does not
MACHINE = "cibox"


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _history(repo, n: int) -> list[str]:
    """A linear history of n + 1 commits, "change number 0" (the base) to "change number n"; shas, oldest first."""
    repo.mkdir(exist_ok=True)
    _git(repo, "init", "-q")
    shas = []
    for k in range(n + 1):
        (repo / "file.txt").write_text(f"{k}\n")
        _git(repo, "add", "file.txt")
        _git(repo, "commit", "-qm", f"change number {k}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return shas


def _verdict(case: str, verdict: str = "regression", method: str = "track_device_time") -> gate.Verdict:
    return gate.Verdict(MACHINE, f"standard.LinearDevice.{method}", case, 1.0, 1.2, 1.2, 1.1, 1.3, 0.02, verdict,
                        "bootstrap")


def _row(verdict: str, ci_high: float | None = None) -> dict:
    """An ab row: a regression's interval above 1, an unchanged one's tight about 1 (or ci_high)."""
    high = ci_high if ci_high is not None else 1.3 if verdict == "regression" else 1.01
    return {"verdict": verdict, "ratio": (1 + high) / 2, "ci_low": 1 - (high - 1), "ci_high": high, "threshold": 0.02}


class FakeMeasurer:
    """Says "regression" for a target from commit `bad_from` (index into `shas`) on, for cases in `cases`;
    `tick` is called on each measurement."""

    def __init__(self, shas: list[str], bad_from: dict[str, int], tick=None):
        self.shas, self.bad_from, self.calls, self.tick = shas, bad_from, [], tick

    def __call__(self, base, head, targets):
        self.calls.append((base, head, [t.case for t in targets]))
        if self.tick:
            self.tick()
        at = self.shas.index(head)
        return {t.key: _row("regression" if t.case in self.bad_from and at >= self.bad_from[t.case] else "unchanged")
                for t in targets}


def test_a_reproduced_regression_is_confirmed_and_one_that_is_not_is_box_noise(tmp_path):
    shas = _history(tmp_path / "repo", 1)
    fake = FakeMeasurer(shas, {A: 1})
    verdicts = [_verdict(A), _verdict(B), _verdict("linear/eager/fp16/t1024-i32-o64", "unchanged")]
    found = confirm.confirm(verdicts, shas[0], shas[1], fake, repo=tmp_path / "repo")
    assert {c.param: c.status for c in found} == {A: confirm.CONFIRMED, B: confirm.NOISE}
    assert len(fake.calls) == 1 and sorted(fake.calls[0][2]) == sorted([A, B])  # the flagged cases only
    confirmed = next(c for c in found if c.param == A)
    assert confirmed.first_bad == shas[1] and confirmed.first_bad_subject == "change number 1"
    assert confirmed.bisect_steps == 0  # adjacent: nothing to search
    assert [v.param for v in confirm.failing(verdicts, found)] == [A]


def test_what_cannot_be_measured_again_stays_a_regression(tmp_path):
    shas = _history(tmp_path / "repo", 1)

    def broken(base, head, targets):
        raise RuntimeError("worktree failed")

    verdicts = [_verdict(A, method="time_host"), _verdict(B)]
    found = confirm.confirm(verdicts, shas[0], shas[1], broken, repo=tmp_path / "repo")
    assert [c.status for c in found] == [confirm.UNMEASURED] * 2
    assert "does not measure time_host" in found[0].reason and "worktree failed" in found[1].reason
    assert len(confirm.failing(verdicts, found)) == 2


@pytest.mark.parametrize("k", [1, 2, 4, 6, 7])
def test_bisection_names_the_first_bad_commit_in_log_n_comparisons(tmp_path, k):
    n = 7
    shas = _history(tmp_path / "repo", n)
    fake = FakeMeasurer(shas, {A: k})
    found = confirm.confirm([_verdict(A)], shas[0], shas[-1], fake, repo=tmp_path / "repo")
    (c,) = found
    assert c.status == confirm.CONFIRMED
    assert c.first_bad == shas[k] and c.first_bad_subject == f"change number {k}"
    assert c.bisect_steps == len(fake.calls) - 1 <= math.ceil(math.log2(n))  # one confirmation, then the search
    assert all(base == shas[0] for base, _, _ in fake.calls)  # every step against the gate's base
    assert f"{shas[k][:8]} \"change number {k}\"" in confirm.markdown(found)


def test_cases_that_part_ways_are_bisected_apart(tmp_path):
    shas = _history(tmp_path / "repo", 8)
    fake = FakeMeasurer(shas, {A: 2, B: 7})
    found = confirm.confirm([_verdict(A), _verdict(B)], shas[0], shas[-1], fake, repo=tmp_path / "repo")
    assert {c.param: c.first_bad for c in found} == {A: shas[2], B: shas[7]}


def _night(tmp_path, monkeypatch, reproduce: set[str], *, no_confirm=False, tick=None):
    """nightly.run with ASV, the gate and the measurer stood in for: A and B flagged by the gate."""
    shas = _history(tmp_path / "repo", 1)
    base, head = shas
    repo = tmp_path / "repo"
    monkeypatch.setattr(nightly.asv_run, "command", lambda args: (["asv", "run", "--bench", "x"], head, MACHINE))
    monkeypatch.setattr(nightly, "_step", lambda name, cmd, cwd: True)
    monkeypatch.setattr(nightly.gate, "load", lambda folder: [Point(MACHINE, c, d, "standard.LinearDevice.track_device_time",
                                                                    A, "v1", 1.0, None) for d, c in enumerate(shas)])
    monkeypatch.setattr(nightly.gate, "compare", lambda *a, **k: [_verdict(A), _verdict(B)])
    monkeypatch.setattr(nightly.gate, "host_on_one_box", lambda points, verdicts, *a, **k: (verdicts, None))
    fake = FakeMeasurer(shas, {c: 1 for c in reproduce}, tick)
    monkeypatch.setattr(confirm, "ab_measurer", lambda *a, **k: fake)
    args = argparse.Namespace(repo=repo, summary=tmp_path / "summary.md", no_publish=True, threshold=None,
                              tier=None, no_confirm=no_confirm, json=tmp_path / "verdicts.json")
    return nightly.run(args), (tmp_path / "summary.md").read_text(), json.loads(args.json.read_text()), fake, repo, head


def test_the_nightly_fails_on_a_confirmed_regression(tmp_path, monkeypatch):
    rc, summary, doc, fake, repo, head = _night(tmp_path, monkeypatch, {A})
    assert rc == 1
    assert "### Same-box confirmation" in summary and confirm.CONFIRMED in summary and confirm.NOISE in summary
    by = {v["param"]: v["confirmation"]["status"] for v in doc["verdicts"]}
    assert by == {A: confirm.CONFIRMED, B: confirm.NOISE}
    assert confirm.load(repo / "results", MACHINE) == {
        (head, "standard.LinearDevice.track_device_time", A): confirm.CONFIRMED,
        (head, "standard.LinearDevice.track_device_time", B): confirm.NOISE}


def test_the_nightly_passes_when_no_regression_reproduces(tmp_path, monkeypatch):
    rc, summary, doc, fake, _, _ = _night(tmp_path, monkeypatch, set())
    assert rc == 0 and summary.count(confirm.NOISE) == 2 and len(fake.calls) == 1


def test_no_confirm_fails_on_the_gate_alone(tmp_path, monkeypatch):
    rc, summary, doc, fake, _, _ = _night(tmp_path, monkeypatch, set(), no_confirm=True)
    assert rc == 1 and not fake.calls and "Same-box confirmation" not in summary
    assert all(v["confirmation"] is None for v in doc["verdicts"])


def test_the_regressions_page_drops_box_noise(tmp_path, monkeypatch):
    from mlpbench.asv import regressions as asv_regressions

    results = tmp_path / "results"
    confirm.save(results, MACHINE, "h" * 40, [confirm.Confirmation("standard.LinearDevice.track_device_time", B,
                                                                   "b" * 40, "h" * 40, confirm.NOISE)])
    points = [Point(MACHINE, c, d, "standard.LinearDevice.track_device_time", A, "v1", 1.0, None)
              for d, c in enumerate(["b" * 40, "h" * 40])]
    monkeypatch.setattr(gate, "load", lambda folder: points)
    monkeypatch.setattr(gate, "history", lambda *a, **k: [("h" * 40, _verdict(A)), ("h" * 40, _verdict(B))])
    steps = asv_regressions.gate_steps(results / "asv")
    assert list(steps) == [(MACHINE, "standard.LinearDevice.track_device_time", A)]


def test_the_ab_measurer_measures_exactly_the_flagged_cases(tmp_path, monkeypatch):
    """ab_measurer with ab's worktrees and processes stood in for: one selection per op and dtype with
    its flagged variants and shapes (rounds are shared), each target answered by its own metric's row."""
    from mlpbench.judging import ab

    other, third = "gelu_mul/eager/fp32/t333-h3000", "gelu_mul/eager/fp32/t8192-h3072"
    fourth = "linear/compiled/bf16/t1024-i32-o64"  # another variant of A's op and dtype: A's selection
    calls = []
    monkeypatch.setattr(ab, "resolve", lambda repo, rev: rev)
    monkeypatch.setattr(ab, "measure", lambda args, repo, shas, work, tier: calls.append(
        (args.op, args.variant, args.dtype, args.shape, tier)) or {"base": {}, "head": {}})
    rows = {A: "regression", B: "unchanged", third: "improvement", fourth: "unchanged"}
    monkeypatch.setattr(ab, "judge", lambda b, h, thr, **k: [{"case": c, "metric": "device time", "verdict": v}
                                                             for c, v in rows.items()])
    targets = [t for t in (confirm.target(_verdict(c)) for c in (A, B, other, third, fourth))
               if isinstance(t, confirm.Target)]
    said = {k: r["verdict"] for k, r in confirm.ab_measurer(tmp_path)("b", "h", targets).items()}
    assert sorted(calls) == [(["gelu_mul"], ["eager"], ["fp32"], ["t333-h3000", "t8192-h3072"], "standard"),
                             (["linear"], ["compiled", "eager"], ["bf16"], ["t1024-i32-o64"], "standard"),
                             (["linear"], ["eager"], ["fp32"], ["t1024-i32-o64"], "standard")]
    assert said == {(A, "track_device_time"): "regression", (B, "track_device_time"): "unchanged",
                    (fourth, "track_device_time"): "unchanged",
                    (other, "track_device_time"): "not measured", (third, "track_device_time"): "improvement"}


def test_a_regression_ab_does_not_rule_out_is_inconclusive_and_still_fails(tmp_path):
    """Box noise only where ab's interval's upper bound is below 1 + the gate's threshold (2% here)."""
    shas = _history(tmp_path / "repo", 1)

    def wide(base, head, targets):  # unchanged by ab's own (wider) threshold, but up to +5% not ruled out
        return {t.key: _row("unchanged", 1.05 if t.case == A else 1.01) for t in targets}

    found = confirm.confirm([_verdict(A), _verdict(B)], shas[0], shas[1], wide, repo=tmp_path / "repo")
    assert {c.param: c.status for c in found} == {A: confirm.INCONCLUSIVE, B: confirm.NOISE}
    assert [v.param for v in confirm.failing([_verdict(A), _verdict(B)], found)] == [A]
    assert "1 inconclusive" in confirm.markdown(found) and "1.0500" in confirm.markdown(found)


def test_an_unjudged_metric_is_not_answered_by_another_metrics_row(tmp_path, monkeypatch):
    """Only a case-level row (metric "—") answers for every metric of its case."""
    from mlpbench.judging import ab

    monkeypatch.setattr(ab, "resolve", lambda repo, rev: rev)
    monkeypatch.setattr(ab, "measure", lambda *a: {"base": {}, "head": {}})
    monkeypatch.setattr(ab, "judge", lambda *a, **k: [
        {"case": A, "metric": "device time", **_row("regression")},
        {"case": B, "metric": "—", "verdict": "failed at head: boom"}])
    host = [confirm.target(_verdict(c, method="track_host_time")) for c in (A, B)]
    said = confirm.ab_measurer(tmp_path)("b", "h", host)
    assert said[(A, "track_host_time")]["verdict"] == "not measured"
    assert said[(B, "track_host_time")]["verdict"] == "failed at head: boom"
    found = confirm.confirm([_verdict(A, method="track_host_time")], "b", "h", confirm.ab_measurer(tmp_path))
    assert [c.status for c in found] == [confirm.UNMEASURED]


def test_peak_memory_that_identical_code_moved_between_processes_is_box_noise(tmp_path):
    """A night's peak memory can differ from another process's for identical code; counted again per
    round on this box (ab.COUNTED), equal rounds clear it and a real rise confirms it."""
    from mlpbench.judging import ab

    shas = _history(tmp_path / "repo", 1)

    def rounds(case, peaks):
        return [[{"case": case, "op": "linear", "variant": "eager", "dtype": "fp32", "shape_id": "t1024-i32-o64",
                  "box_id": 7, "device_time_samples_s": [1e-4 * (1 + 1e-3 * j) for j in range(20)],
                  "peak_memory_bytes": peak}] for peak in peaks]

    def measure(base, head, targets):
        b = ab.pool(rounds(A, [1e6] * 3) + rounds(B, [2e6] * 3))
        h = ab.pool(rounds(A, [1e6] * 3) + rounds(B, [2.2e6, 2.2e6, 2.2e6]))
        got = {(r["case"], r["metric"]): r for r in ab.judge(b, h)}
        return {t.key: got[(t.case, "peak memory")] for t in targets}

    verdicts = [_verdict(A, method="track_peak_memory"), _verdict(B, method="track_peak_memory")]
    found = confirm.confirm(verdicts, shas[0], shas[1], measure, repo=tmp_path / "repo")
    assert {c.param: c.status for c in found} == {A: confirm.NOISE, B: confirm.CONFIRMED}
    assert "interval up to 1.0000" in next(c for c in found if c.param == A).reason


def test_bisection_follows_the_first_parent_line(tmp_path):
    """A merged branch's commits are never midpoints: only base's first-parent descendants up to head."""
    repo = tmp_path / "repo"
    base = _history(repo, 0)[0]
    _git(repo, "branch", "side")
    main = []
    for name in ("m1", "m2"):
        (repo / f"{name}.txt").write_text(name)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", name)
        main.append(_git(repo, "rev-parse", "HEAD"))
    _git(repo, "checkout", "-q", "side")
    side = []
    for name in ("s1", "s2", "s3"):
        (repo / f"{name}.txt").write_text(name)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", name)
        side.append(_git(repo, "rev-parse", "HEAD"))
    _git(repo, "checkout", "-q", "-")
    _git(repo, "merge", "-q", "--no-ff", "side", "-m", "merge side")
    merge = _git(repo, "rev-parse", "HEAD")
    (repo / "m3.txt").write_text("m3")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "m3")
    line = [*main, merge, _git(repo, "rev-parse", "HEAD")]
    fake = FakeMeasurer(line, {A: 2})  # the merge brought it
    (c,) = confirm.confirm([_verdict(A)], base, line[-1], fake, repo=repo)
    assert c.first_bad == merge and c.first_bad_subject == "merge side"
    assert not {head for _, head, _ in fake.calls} & set(side)


def test_a_midpoint_that_cannot_be_measured_stops_the_bisection(tmp_path):
    shas = _history(tmp_path / "repo", 7)
    fake = FakeMeasurer(shas, {A: 6})

    def flaky(base, head, targets):
        if head != shas[-1]:
            raise RuntimeError("the midpoint does not build")
        return fake(base, head, targets)

    (c,) = confirm.confirm([_verdict(A)], shas[0], shas[-1], flaky, repo=tmp_path / "repo")
    assert c.status == confirm.CONFIRMED and c.first_bad is None
    assert "not bisected: RuntimeError: the midpoint does not build" in c.reason


def test_the_nights_wall_time_leaves_out_the_confirmation(tmp_path, monkeypatch):
    """A long confirmation neither counts in the night's recorded wall time nor sets off the warning."""
    from types import SimpleNamespace

    clock = [0.0]
    monkeypatch.setattr(nightly, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    kept = nightly.history_path(tmp_path / "repo", MACHINE)
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps([{"commit": "a" * 40, "bench": "x", "wall_s": 1.0, "date": "2026-12-01"}]))

    def tick():
        clock[0] += 1000.0

    rc, summary, *_ = _night(tmp_path, monkeypatch, {A}, tick=tick)
    assert rc == 1 and "**Warning:**" not in summary, summary
    assert json.loads(kept.read_text())[-1]["wall_s"] == 0
