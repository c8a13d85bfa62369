"""Benchmarks for `kernels benchmark ./kernels_local/gelu_mul`.

The runner looks for setup_<name> / benchmark_<name> / verify_<name> methods; they are
generated from WORKLOADS below, one set per workload and class.  verify_* returns the
float64 reference in the output dtype, because the runner compares with
`torch.allclose(out, ref, atol=1e-2)`: up is drawn from U(-1/4, 1/4) so that outputs stay
below 2 in magnitude, where one bf16 ulp (2**-7) is under that atol.  gate is N(0, 1),
which covers the whole curved part of GeLU.

On CPU (Triton interpreter, TRITON_INTERPRET=1) the shapes are tiny: the run checks the
plumbing there, its timings mean nothing.
"""

import torch
import torch.nn.functional as F

from kernels.benchmark import Benchmark

# name -> (GPU shape, CPU shape, dtype, merged): merged workloads read gate and up as the
# two halves of one [t, 2h] tensor (strided rows), as from a fused gate/up projection.
WORKLOADS = {
    "decode_bf16": ((1, 14336), (1, 4096), torch.bfloat16, False),
    "prefill_bf16": ((8192, 14336), (8, 1024), torch.bfloat16, False),
    "prefill_merged_bf16": ((8192, 14336), (8, 1024), torch.bfloat16, True),
    "prefill_fp16": ((8192, 14336), (8, 1024), torch.float16, False),
    "large_fp32": ((4096, 8192), (8, 512), torch.float32, False),
    "irregular_bf16": ((1823, 781), (7, 333), torch.bfloat16, False),
}
BACKWARD_WORKLOADS = ("decode_bf16", "prefill_bf16", "prefill_merged_bf16")


def _inputs(device, name, requires_grad=False):
    gpu_shape, cpu_shape, dtype, merged = WORKLOADS[name]
    t, h = cpu_shape if device == "cpu" else gpu_shape
    gate = torch.randn(t, h, device=device, dtype=dtype)
    up = (torch.rand(t, h, device=device) * 0.5 - 0.25).to(dtype)
    if merged:  # one tensor holding gate | up, split into two row-strided views
        gate, up = torch.cat([gate, up], dim=1).chunk(2, dim=1)
    return gate.requires_grad_(requires_grad), up.requires_grad_(requires_grad)


def _reference(gate, up):
    return F.gelu(gate.double(), approximate="tanh") * up.double()


class GeluMulForward(Benchmark):
    seed = 42

    def _setup(self, name):
        self.gate, self.up = _inputs(self.device, name)

    def _run(self):
        self.out = self.kernel.gelu_mul(self.gate, self.up)

    def _verify(self):
        return _reference(self.gate, self.up).to(self.out.dtype)


class GeluMulBackward(Benchmark):
    """Forward + fused backward through autograd; out = d_gate (d_up is checked in verify)."""

    seed = 42

    def _setup(self, name):
        self.gate, self.up = _inputs(self.device, name, requires_grad=True)
        self.grad = torch.randn(self.gate.shape, device=self.device, dtype=self.gate.dtype)

    def _run(self):
        y = self.kernel.gelu_mul(self.gate, self.up)
        self.out, self.d_up = torch.autograd.grad(y, (self.gate, self.up), self.grad)

    def _verify(self):
        gate = self.gate.detach().double().requires_grad_()
        up = self.up.detach().double().requires_grad_()
        d_gate, d_up = torch.autograd.grad(_reference(gate, up), (gate, up), self.grad.double())
        # The runner compares only `out`; d_up is held to one output ulp (2**-7
        # relative for bf16) plus float32 error here.
        torch.testing.assert_close(self.d_up.double(), d_up, rtol=2**-7, atol=1e-5)
        return d_gate.to(self.out.dtype)


def _add_workloads(cls, names):
    for name in names:
        setattr(cls, f"setup_{name}", lambda self, name=name: self._setup(name))
        setattr(cls, f"benchmark_{name}", lambda self: self._run())
        setattr(cls, f"verify_{name}", lambda self: self._verify())


_add_workloads(GeluMulForward, WORKLOADS)
_add_workloads(GeluMulBackward, BACKWARD_WORKLOADS)
