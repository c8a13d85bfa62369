"""Believable CPU figures: a CPU case is built and timed with a bounded thread count that its record
states, and a host-time figure that counts scheduler ticks or sits far above its fastest call is
marked noisy, as a wide spread is."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlpbench.asv import measure as asv_measure
from mlpbench import runner, tables

# On a GPU the thread count is left as it is (runner.measuring_threads): these check the CPU's rule.
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a CPU run; this machine has a GPU")

ROOT = Path(__file__).resolve().parent.parent
TICK = tables.TICK_S
CASE = "linear/eager/fp32/t1024-i32-o64"


def _ticks(n=40):
    # a descheduled 32 µs call: woken on the 4th tick, now and then the 3rd; a few µs of jitter
    return [(3 if k % 7 == 0 else 4) * TICK + 30e-6 + 1e-6 * (k % 5) for k in range(n)]


def _clean(median, n=40):
    return [median * (1 + 0.002 * (k % 9 - 4)) for k in range(n)]


def _iqr(samples):
    import numpy as np

    q1, q3 = np.percentile(samples, [25, 75])
    return float(q3 - q1)


def _why(samples):
    s = sorted(samples)
    return tables.noise(s[len(s) // 2], _iqr(s), s[0], samples)


def test_samples_on_scheduler_ticks_are_noisy_though_their_spread_is_small():
    samples = _ticks()
    median = sorted(samples)[len(samples) // 2]
    assert _iqr(samples) <= tables.NOISY_SPREAD * median and median < tables.NOISY_OVER_MIN * min(samples)
    assert "ms ticks" in _why(samples)


@pytest.mark.parametrize("median", [31.9e-6, 2.5 * TICK, 10.3 * TICK])
def test_clean_samples_are_not_noisy(median):
    # short calls, and long ones that do not last whole ticks
    assert _why(_clean(median)) == ""


def test_a_median_far_above_the_minimum_is_noisy():
    samples = [30e-6] * 3 + [95e-6 + 1e-7 * k for k in range(37)]  # a tight IQR, far above the fastest call
    assert _iqr(samples) <= tables.NOISY_SPREAD * 95e-6
    assert _why(samples).startswith("median 3.2× min")
    assert _why([30e-6] * 3 + _clean(40e-6, 37)) == ""  # 1.3× its minimum: believable


def _record(variant, samples, device_samples=None):
    s = sorted(samples)
    info = {"case": f"linear/{variant}/fp32/t1024-i32-o64", "op": "linear", "variant": variant, "dtype": "fp32",
            "shape_id": "t1024-i32-o64", "flops": 4_194_304, "bytes": 401_664, "host_time_s": s[len(s) // 2],
            "host_time_samples_s": samples}
    if device_samples:
        info |= {"device_time_s": sorted(device_samples)[len(device_samples) // 2],
                 "device_time_samples_s": device_samples}
    return {"stats": {"median": s[len(s) // 2], "iqr": _iqr(s), "min": s[0]}, "extra_info": info}


def _load(tmp_path, records):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {"mlpbench": {"machine": "cpu-x86-64"}}, "benchmarks": records}))
    return tables.load_pytest_json([path])


def test_the_tables_mark_a_tick_figure_and_the_ratio_built_on_it(tmp_path):
    # the run: eager at four ticks, compiled quiet, and a speedup in the hundreds unmarked
    df = _load(tmp_path, [_record("eager", _ticks()), _record("compiled", _clean(60e-6))])
    text = tables.op_tables(df)
    eager = next(line for line in text.splitlines() if line.startswith("| eager |"))
    compiled = next(line for line in text.splitlines() if line.startswith("| compiled |"))
    assert "(noisy:" in eager and "ms ticks)" in eager
    assert "(noisy" not in compiled.split("|")[5] and compiled.rstrip(" |").endswith("× (noisy)")
    assert "1 of 2 figures are noisy" in text


def test_device_time_is_not_judged_by_host_ticks(tmp_path):
    # tight device samples that happen to lie on 4 ms multiples, with a quiet host: nothing marked
    device = [2 * TICK * (1 + 1e-4 * (k % 3)) for k in range(20)]
    df = _load(tmp_path, [_record("eager", _clean(9.1e-3), device)])
    row = df.iloc[0]
    assert row["device_noise"] == "" and not row["noisy"]


def test_the_thread_bound_is_applied_on_a_cpu_and_put_back(monkeypatch):
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    assert runner.cpu_threads() == 3
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with runner.measuring_threads("cpu"):
            assert torch.get_num_threads() == 3
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), runner.measuring_threads("cpu"):
            raise RuntimeError("a case that fails")
        assert torch.get_num_threads() == 2
        with runner.measuring_threads("cuda"):
            assert torch.get_num_threads() == 2  # a GPU run keeps torch's own setting
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert runner.cpu_threads() == 1  # never zero


@cpu_only
def test_an_asv_measurement_records_its_thread_count_and_leaves_the_setting_alone():
    before = torch.get_num_threads()
    info = asv_measure.measure_case(CASE)
    assert torch.get_num_threads() == before
    assert info["threads"] == runner.cpu_threads()
    assert f"intra-op threads: {runner.cpu_threads()};" in info["timing_method"]


@cpu_only
def test_a_cpu_run_records_its_thread_count_and_some_of_its_rounds(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "run", "--tier", "quick", "--op", "linear", "--variant", "eager",
         "--dtype", "fp32", "--results", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = [f for f in tmp_path.glob("*/*-quick-*.json") if not f.name.endswith(".outcomes.json")]
    (info,) = [b["extra_info"] for b in json.loads(path.read_text())["benchmarks"]]
    assert info["threads"] == runner.cpu_threads()
    assert f"intra-op threads: {runner.cpu_threads()};" in info["timing_method"]
    samples = info["host_time_samples_s"]
    assert 5 <= len(samples) <= 100 and all(s > 0 for s in samples)
