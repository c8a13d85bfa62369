"""Benchmarks for `kernels benchmark ./kernels_local/gelu_mul`.

Each workload is setup_<name> / benchmark_<name> / verify_<name>.  verify_*
computes the float64 reference and returns it in the output dtype, because the
runner compares with `torch.allclose(out, ref, atol=1e-2)`, which needs equal
dtypes.  With a fixed atol, a one-ulp rounding difference must stay below 1e-2,
so `up` is drawn from U(-1/4, 1/4): outputs stay below 2 in magnitude, where a
bf16 ulp is 2**-7.  gate is N(0, 1), which covers the whole curved part of GeLU.

On CPU (Triton interpreter, TRITON_INTERPRET=1) the shapes are tiny: there the
run checks the plumbing, its timings mean nothing.
"""

import torch
import torch.nn.functional as F

from kernels.benchmark import Benchmark

# name -> (GPU shape, CPU shape, dtype)
WORKLOADS = {
    "decode_bf16": ((1, 14336), (1, 4096), torch.bfloat16),
    "prefill_bf16": ((8192, 14336), (8, 1024), torch.bfloat16),
    "prefill_fp16": ((8192, 14336), (8, 1024), torch.float16),
    "large_fp32": ((4096, 8192), (8, 512), torch.float32),
    "irregular_bf16": ((1823, 781), (7, 333), torch.bfloat16),
}


def _inputs(device, name, requires_grad=False):
    gpu_shape, cpu_shape, dtype = WORKLOADS[name]
    shape = cpu_shape if device == "cpu" else gpu_shape
    gate = torch.randn(shape, device=device, dtype=dtype)
    up = (torch.rand(shape, device=device, dtype=torch.float32) * 0.5 - 0.25).to(dtype)
    return gate.requires_grad_(requires_grad), up.requires_grad_(requires_grad)


def _reference(gate, up):
    return F.gelu(gate.double(), approximate="tanh") * up.double()


class GeluMulForward(Benchmark):
    seed = 42

    def _setup(self, name):
        self.gate, self.up = _inputs(self.device, name)
        self.out = torch.empty_like(self.gate)

    def _run(self):
        self.kernel.gelu_mul(self.gate, self.up, out=self.out)

    def _verify(self):
        with torch.no_grad():
            return _reference(self.gate, self.up).to(self.out.dtype)

    def setup_decode_bf16(self):
        self._setup("decode_bf16")

    def benchmark_decode_bf16(self):
        self._run()

    def verify_decode_bf16(self):
        return self._verify()

    def setup_prefill_bf16(self):
        self._setup("prefill_bf16")

    def benchmark_prefill_bf16(self):
        self._run()

    def verify_prefill_bf16(self):
        return self._verify()

    def setup_prefill_fp16(self):
        self._setup("prefill_fp16")

    def benchmark_prefill_fp16(self):
        self._run()

    def verify_prefill_fp16(self):
        return self._verify()

    def setup_large_fp32(self):
        self._setup("large_fp32")

    def benchmark_large_fp32(self):
        self._run()

    def verify_large_fp32(self):
        return self._verify()

    def setup_irregular_bf16(self):
        self._setup("irregular_bf16")

    def benchmark_irregular_bf16(self):
        self._run()

    def verify_irregular_bf16(self):
        return self._verify()


class GeluMulBackward(Benchmark):
    """Forward + fused backward through autograd; out = d_gate (d_up is checked in verify)."""

    seed = 42

    def _setup(self, name):
        self.gate, self.up = _inputs(self.device, name, requires_grad=True)
        self.grad = torch.randn_like(self.gate)
        self.out = torch.empty_like(self.gate)

    def _run(self):
        y = self.kernel.gelu_mul(self.gate, self.up)
        self.out, self.d_up = torch.autograd.grad(y, (self.gate, self.up), self.grad)

    def _verify(self):
        gate = self.gate.detach().double().requires_grad_()
        up = self.up.detach().double().requires_grad_()
        d_gate, d_up = torch.autograd.grad(_reference(gate, up), (gate, up), self.grad.double())
        # The runner compares only `out`; d_up is checked here against a bound of
        # one output ulp (2**-7 relative for bf16) plus float32 error.
        torch.testing.assert_close(self.d_up.double(), d_up, rtol=2**-7, atol=1e-5)
        return d_gate.to(self.out.dtype)

    def setup_prefill_bf16(self):
        self._setup("prefill_bf16")

    def benchmark_prefill_bf16(self):
        self._run()

    def verify_prefill_bf16(self):
        return self._verify()

    def setup_decode_bf16(self):
        self._setup("decode_bf16")

    def benchmark_decode_bf16(self):
        self._run()

    def verify_decode_bf16(self):
        return self._verify()
