"""Paired back-to-back host time (`mlpbench run --paired`): a case's rounds interleaved with its op's
eager case's, so the host's drift between stretches of a process cancels in their ratio."""

from types import SimpleNamespace

import pytest

from mlpbench import registry, runner, timing
from mlpbench.record import Record


class Clock:
    """A stand-in for time.perf_counter that the timed functions advance: timing without a scheduler."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def costs(self, seconds):
        def fn(*_):
            self.now += seconds
        return fn


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=c))  # timing's clock only
    return c


def test_rounds_alternate_in_pairs_whose_order_alternates():
    order = []
    mine, ref = (lambda *_: order.append("a")), (lambda *_: order.append("b"))
    a, b = timing.paired_back_to_back_host_times(mine, [()], ref, [()], rounds=4, round_s=0, max_calls=10)
    assert len(a) == len(b) == 4
    # one sizing call each, then rounds of ten calls: a b | b a | a b | b a
    rounds = "".join(order[2:][::10])
    assert order[:2] == ["a", "b"] and rounds == "abbaabba"


def test_the_ratio_of_pairs_follows_the_cost_while_the_host_drifts(clock):
    # the host slows down threefold after the second pair (one sizing call each, then rounds of ten
    # calls); each pair sees one speed, so every ratio stays 2
    calls = {"n": 0}

    def host(cost):
        def fn(*_):
            calls["n"] += 1
            clock.now += cost * (3.0 if calls["n"] > 42 else 1.0)
        return fn

    a, b = timing.paired_back_to_back_host_times(host(200e-6), [()], host(100e-6), [()], rounds=6,
                                                 round_s=0, max_calls=10)
    ratios = [x / y for x, y in zip(a, b)]
    assert max(a) == pytest.approx(3 * min(a))  # the drift shows in the plain figure ...
    assert ratios == pytest.approx([2.0] * 6)  # ... not in the pairs' ratios


def _prepared(case_id, fn):
    case = registry.case_by_id(case_id)
    return runner.Prepared(case, "cuda", SimpleNamespace(fn=fn), 0.0, [()])


def test_paired_metrics_are_record_fields_with_the_reference_named(clock):
    case = next(c.id for c in registry.all_cases() if c.op == "mlp" and c.variant == "ours")
    ref_id = registry.case_id("mlp", "eager", *case.split("/")[2:])
    p, ref = _prepared(case, clock.costs(150e-6)), _prepared(ref_id, clock.costs(100e-6))
    got = runner.paired_metrics(p, ref)
    Record().set(**got)  # every key is a record field
    assert got["host_time_back_to_back_vs_eager"] == pytest.approx(1.5)
    assert len(got["host_time_back_to_back_vs_eager_samples"]) == 5 and ref_id in got["host_time_back_to_back_vs_eager_method"]
    assert runner.paired_metrics(p, None) == {}


def test_the_reference_is_the_eager_case_of_the_same_dtype_and_shape(monkeypatch):
    case = next(c for c in registry.all_cases() if c.op == "swiglu_mlp" and c.variant == "dualgemm")
    built = []
    monkeypatch.setattr(runner, "prepare", lambda c, device, n: built.append((c.id, device, n)) or c)
    ref = runner.paired_reference(case, "cuda", 3)
    assert ref.id == registry.case_id("swiglu_mlp", "eager", case.dtype, case.shape.id)
    assert built == [(ref.id, "cuda", 3)]  # built and checked like any case, with as many input sets
    eager = registry.case_by_id(ref.id)
    assert runner.paired_reference(eager, "cuda", 3) is None  # the eager case has no reference
    assert runner.paired_reference(case, "cpu", 3) is None  # no back-to-back host time on a CPU


def test_mlpbench_run_passes_paired_to_pytest(monkeypatch, tmp_path, capsys):
    from mlpbench import run_suite

    seen = {}

    def fake_measure(args, argv, *rest):
        seen["argv"] = argv
        return 0

    monkeypatch.setattr(run_suite, "_measure", fake_measure)
    from mlpbench import cli

    cli.main(["run", "--paired", "--op", "silu_mul", "--results", str(tmp_path)])
    assert "--paired" in seen["argv"]
    if runner.default_device() != "cuda":  # said where a user looks, not silently ignored
        assert "--paired: back-to-back host time is taken on a GPU only" in capsys.readouterr().out


@pytest.mark.slow
def test_real_workloads_of_one_case_pair_up():
    # the quick tier's SiLU·mul, ours (under the interpreter here) against eager, built and checked as cases
    ours = next(c for c in registry.select("quick", ops=["silu_mul"], variants=["ours"]))
    eager = registry.case("silu_mul", "eager", ours.dtype, ours.shape.id)
    p, ref = runner.prepare(ours, "cpu"), runner.prepare(eager, "cpu")
    got = runner.paired_metrics(p, ref)
    assert got["host_time_back_to_back_vs_eager"] > 0 and len(got["host_time_back_to_back_vs_eager_samples"]) == 5
    assert eager.id in got["host_time_back_to_back_vs_eager_method"]
