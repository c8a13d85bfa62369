"""The compile tax probes, on a CPU: fresh processes, empty caches, the figures they report."""

import pytest

from mlpbench.compile.compile_probe import TOKEN_SEQUENCE, probe


def test_changing_shapes_runs_every_token_count_and_sums_them():
    r = probe("gelu_mul/eager/fp32/t333-h3000", sequence=True)
    assert r["tokens"] == list(TOKEN_SEQUENCE) and len(TOKEN_SEQUENCE) >= 10
    assert len(r["step_s"]) == len(TOKEN_SEQUENCE)
    assert r["total_s"] == pytest.approx(sum(r["step_s"]))


@pytest.mark.slow
def test_dynamic_shapes_compile_once_and_static_recompiles():
    static = probe("gelu_mul/compiled/fp32/t333-h3000")
    dynamic = probe("gelu_mul/compiled/fp32/t333-h3000", dynamic=True)
    assert static["cold_compile_s"] > 0.2 and dynamic["cold_compile_s"] > 0.2
    # A new token count costs a full compile with static shapes and next to nothing with dynamic ones.
    assert static["recompile_s"] > 10 * max(dynamic["recompile_s"], 1e-3)
    assert dynamic["dynamic"] is True and static["dynamic"] is False


def test_probe_refuses_a_case_that_does_not_compile():
    with pytest.raises(RuntimeError, match="is not a compiled case"):
        probe("gelu_mul/eager/fp32/t333-h3000")


@pytest.mark.slow
def test_probes_started_ahead_wait_until_all_are_ready_then_run_one_at_a_time():
    import time

    from mlpbench.compile import compile_probe

    seq = ("gelu_mul/eager/fp32/t333-h3000", False, True)
    bad = ("gelu_mul/eager/fp32/t333-h3000", False, False)  # not compiled: fails before it is ready
    t0 = time.perf_counter()
    with compile_probe.started([seq, seq, bad]):
        waiting = compile_probe._WAITING[seq]
        assert len(waiting) == 2 and all(p.is_ready for p in waiting)  # imported and warm, nothing timed yet
        assert all(p.proc.poll() is None for p in waiting)  # waiting for their go
        first, second = waiting
        r = compile_probe.probe(*seq[:1], sequence=True)
        assert r["total_s"] == pytest.approx(sum(r["step_s"]))
        assert first.proc.poll() is not None  # killed once it had spoken
        assert second.proc.poll() is None  # still waiting
        with pytest.raises(RuntimeError, match="is not a compiled case"):
            compile_probe.probe(bad[0])
    assert second.proc.poll() is not None  # left unused: stopped with the block
    assert not compile_probe._WAITING[seq]
    assert time.perf_counter() - t0 < 120
