"""nn.Linear: the blog's first step, one GEMM with the bias in its epilogue."""

from __future__ import annotations

from . import FP8, HALF, Op, shape
from ._fp8 import torchao
from ._kinds import compiled, eager


def build(case, device, make):
    import torch
    import torch.nn.functional as F
    from torch import nn

    from .. import workloads as w
    from . import FP8, _fp8

    if case.dtype == FP8:
        return _fp8.linear_workload(case, device, make)

    t, i, o = (case.shape.as_dict()[k] for k in ("t", "i", "o"))
    dtype = w.TORCH_DTYPES[case.dtype]
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the device: CPU init of large weights takes seconds
        lin = nn.Linear(i, o, bias=True).to(dtype=dtype).requires_grad_(False)
    fn, source = make(lin)
    w64, b64 = lin.weight.double(), lin.bias.double()
    es = w.element_size(case)
    return w.Workload(
        case, fn,
        make_inputs=lambda seed: (w.randn((t, i), dtype, device, w.generator(seed, device)),),
        reference=lambda inp: (F.linear(inp[0].double(), w64, b64),),
        flops=2 * t * i * o + t * o,  # the GEMM, plus the bias add done in its epilogue
        bytes=es * (t * i + i * o + o + t * o),  # x, W, b read once; y written once
        source=source,
    )


# t = tokens (batch × sequence), i/o = in/out features. Append shapes only: a changed id loses the
# history behind it.
OP = Op(
    name="linear",
    what="nn.Linear(in, out, bias=True) on [tokens, in]",
    dims=("t", "i", "o"),
    bound="compute",
    rank=0,
    # fp8: eager (torch._scaled_mm, x quantized in PyTorch), compiled, torchao; no kernel of ours (ours
    # would be eager's two steps with our quantize kernel in front).
    variants=(eager(), compiled(), torchao()),
    shapes=(
        shape(("quick", "standard", "full"), "the blog's nn.Linear example (--batch 1024 --in_dim 32 --out_dim 64)",
              t=1024, i=32, o=64),
        shape(("standard", "full"), "a model-sized projection (Llama-3-8B attention output)", (*HALF, FP8),
              t=8192, i=4096, o=4096),
        shape(("standard", "full"), "decode: one token through a 4096×4096 projection; host-bound", (*HALF, FP8),
              t=1, i=4096, o=4096),
    ),
    build=build,
)
