"""Memory-bandwidth probes for the copy ceiling: the best of a few honest ways to stream memory.

A ceiling that a kernel beats was measured low, not the kernel super-physical: our GeLU·mul read
101–102% of a ceiling taken from `copy_` alone. So the ceiling is the fastest of
- `copy_`: PyTorch's copy kernel (one read, one write per element),
- `triton_copy`: a streaming Triton copy with large blocks,
- `triton_2r1w`: a Triton kernel shaped like GeLU·mul, out = a + b (two reads, one write),
each rated as bytes read plus written over device time, and the winner is named with the figure.
Imported only where a GPU (or Triton's interpreter, in the tests) runs Triton.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Vendor figures for peak memory bandwidth, shown beside the measured ceiling (never used to rate).
VENDOR_BANDWIDTH_BPS = {"H200": 4.8e12, "H100 80GB HBM3": 3.35e12, "A100-SXM4-80GB": 2.039e12}


def vendor_bandwidth(gpu_name: str) -> float | None:
    hits = [bw for name, bw in VENDOR_BANDWIDTH_BPS.items() if name in (gpu_name or "")]
    return hits[0] if len(hits) == 1 else None


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def _add_kernel(a, b, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


# 16 KiB of float32 per program and tensor, 8 warps: each thread moves four 16-byte vectors per tensor.
BLOCK, WARPS = 4096, 8


def triton_copy(src, dst) -> None:
    n = src.numel()
    _copy_kernel[(triton.cdiv(n, BLOCK),)](src, dst, n, BLOCK=BLOCK, num_warps=WARPS)


def triton_add(a, b, out) -> None:
    n = a.numel()
    _add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK, num_warps=WARPS)


def probes(numel: int, device: str = "cuda"):
    """(name, callable, bytes moved per call) for each method, on fresh buffers of `numel` floats."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(numel, device=device, generator=gen)
    b = torch.randn(numel, device=device, generator=gen)
    out = torch.empty_like(a)
    es = a.element_size()
    return [
        ("copy_", lambda: out.copy_(a), 2 * numel * es),
        ("triton_copy", lambda: triton_copy(a, out), 2 * numel * es),
        ("triton_2r1w", lambda: triton_add(a, b, out), 3 * numel * es),
    ]
