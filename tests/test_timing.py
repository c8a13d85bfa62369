import statistics

import pytest
import torch

from mlpbench import timing

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="device time needs a CUDA GPU")


def test_back_to_back_host_times_are_per_call_samples_over_rotating_inputs():
    seen = []
    samples = timing.back_to_back_host_times(lambda x: seen.append(x), [(0,), (1,), (2,)], rounds=4, max_calls=30)
    assert len(samples) == 4 and all(s > 0 for s in samples)
    # one sizing call, then 4 rounds of the same number of calls, cycling through the input sets
    per_round = (len(seen) - 1) // 4
    assert 10 <= per_round <= 30 and len(seen) == 1 + 4 * per_round
    assert seen[1:4] == [0, 1, 2]


def test_back_to_back_host_time_is_the_time_per_call():
    import time

    samples = timing.back_to_back_host_times(lambda: time.sleep(0.002), [()], rounds=3, round_s=0.03)
    assert 0.002 <= statistics.median(samples) < 0.01  # slack for a loaded box; a round not divided by its calls would give >= 0.02


def test_input_sets_cover_twice_the_l2(monkeypatch):
    monkeypatch.setattr(timing, "l2_bytes", lambda device: 60 * 2**20)
    assert timing.input_sets_needed(200 * 2**20, "cuda") == 1
    assert timing.input_sets_needed(30 * 2**20, "cuda") == 4
    assert timing.input_sets_needed(1000, "cuda") == timing.MAX_INPUT_SETS


def test_peak_memory_is_none_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("checks the CPU path")
    assert timing.peak_memory_bytes(torch.add, (torch.ones(3), torch.ones(3))) is None
    assert timing.ceilings() == {}


@needs_gpu
def test_device_time_of_a_copy_is_near_the_copy_bandwidth():
    n = 2**28  # 1 GiB of float32
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    t = timing.device_time(lambda a, b: b.copy_(a), [(src, dst)])
    assert t.method.startswith("cuda-graph-replay")
    assert len(t.samples_s) == timing.REPLAYS
    gbps = 2 * n * 4 / t.median_s / 1e9
    assert 500 < gbps < 10_000  # an H200 copies ~4,200 GB/s; anything else means a broken timer
    assert statistics.stdev(t.samples_s) / t.median_s < 0.05


@needs_gpu
def test_device_time_rotates_input_sets_evenly():
    sets = [(torch.randn(1024, device="cuda"),) for _ in range(3)]
    t = timing.device_time(torch.neg, sets)
    assert t.input_sets == 3 and t.calls_per_replay % 3 == 0


@needs_gpu
def test_graph_capture_failure_falls_back_to_events_and_says_so():
    def uncapturable(x):
        return x.sum().item()  # a host sync inside the call cannot be captured

    t = timing.device_time(uncapturable, [(torch.randn(1024, device="cuda"),)])
    assert "graph capture failed" in t.method


@needs_gpu
def test_ceilings_are_measured_once_and_plausible():
    c = timing.ceilings()
    assert 1e12 < c["copy_bandwidth_Bps"] < 1e13
    assert c["gemm_bf16_flops"] > c["gemm_fp32_flops"]
    assert timing.ceilings() is c


@needs_gpu
def test_back_to_back_host_time_of_a_gpu_bound_call_is_its_device_time():
    # A 4096³ bf16 GEMM runs ~0.1 ms on an H200, far longer than its launch: queued back to back,
    # the host waits on the GPU, so the two figures agree.
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    dev = timing.device_time(torch.mm, [(a, a)]).median_s
    host = statistics.median(timing.back_to_back_host_times(torch.mm, [(a, a)]))
    assert 0.9 < host / dev < 1.25


def test_the_bandwidth_probes_compute_what_they_claim_under_the_interpreter():
    """The copy ceiling's Triton probes (mlpbench/bandwidth.py): a copy and a two-reads-one-write add,
    checked on a CPU through Triton's interpreter, with the bytes each claims to move."""
    from mlpbench import bandwidth

    device = "cuda" if torch.cuda.is_available() else "cpu"
    n = 3 * bandwidth.BLOCK + 5  # a ragged last block
    gen = torch.Generator(device=device).manual_seed(0)
    a, b = torch.randn(n, device=device, generator=gen), torch.randn(n, device=device, generator=gen)
    out = torch.empty_like(a)
    bandwidth.triton_copy(a, out)
    assert torch.equal(out, a)
    bandwidth.triton_add(a, b, out)
    assert torch.equal(out, a + b)
    names = {name: nbytes for name, _, nbytes in bandwidth.probes(n, device)}
    assert names == {"copy_": 8 * n, "triton_copy": 8 * n, "triton_2r1w": 12 * n}
    assert bandwidth.vendor_bandwidth("NVIDIA H200") == 4.8e12 and bandwidth.vendor_bandwidth("a CPU") is None
