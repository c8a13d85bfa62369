"""The kinds of variant ops share: eager PyTorch, torch.compile, a Liger kernel, our kernel.

Op modules build their variants from these, so a variant's name, role and run-time needs are said
once; what differs per op (which Liger op, which of our repositories) is the argument.
"""

from __future__ import annotations

import importlib
from typing import Callable

from . import Variant

LIGER_CPU_REASON = ("Liger's GeGLU kernels call libdevice tanh, which Triton's CPU interpreter "
                    "(TRITON_INTERPRET=1) cannot run; liger cases need a GPU")
LIGER_SWIGLU_CPU_REASON = ("Liger's SwiGLU kernel fails under Triton's CPU interpreter (TRITON_INTERPRET=1: it "
                           "calls .to() on a scalar argument); liger cases need a GPU")


def _torch() -> str:
    import torch

    return f"torch {torch.__version__}"


def eager(note: str = "") -> Variant:
    """The op as PyTorch runs it without compiling: every op's baseline. In fp8 its base is the op's
    eager fp8 module (torch._scaled_mm with row-wise scales, quantization and act·mul in PyTorch:
    mlpbench/ops/_fp8.py), run as it is."""
    make = lambda base, device, **_: (base, _torch() + note)  # noqa: E731
    return Variant("eager", "baseline", make, origin="PyTorch eager" + note, fp8=make)


def compiled(name: str = "compiled", *, only_shapes=None, only_dtypes=None, only_tiers=None, fp8: bool = True,
             **compile_kwargs) -> Variant:
    """torch.compile of the eager base (Inductor), specialised to the case's static shape as in the blog;
    in fp8 (`fp8`: whether it is measured there), of the eager fp8 module.

    Built, compiled and autotuned hermetically (mlpbench/compile/codegen.py) by the runner."""
    mode = compile_kwargs.get("mode")

    def make(base, device, dynamic: bool = False, **_):
        import torch

        # Cases share code objects (an op's eager function, a model class's forward), and Dynamo
        # keeps its cache per code object: without a reset, a second shape would turn into one
        # dynamic-shape graph and, past Dynamo's recompile limit (8), later cases would silently
        # run eagerly.
        torch._dynamo.reset()
        return (torch.compile(base, dynamic=dynamic, **compile_kwargs),
                f"{_torch()} + torch.compile (Inductor{', mode=' + mode if mode else ''})")

    return Variant(name, "compiler", make,
                   origin="torch.compile, Inductor" + (f" mode={mode!r}" if mode else " default mode"),
                   compile_mode=mode, only_shapes=only_shapes, only_dtypes=only_dtypes, only_tiers=only_tiers,
                   fp8=make if fp8 else None)


def maxautotune(**where) -> Variant:
    """torch.compile(mode="max-autotune-no-cudagraphs"): what users try after the default. It also
    autotunes GEMM templates while it compiles, tens of seconds per MLP shape on one GPU at a time, hence
    `where` (only_shapes, only_dtypes) and the full tier only: the standard tier is the one run before and
    after every change, and it has a time budget (docs/method.md)."""
    return compiled("maxautotune", mode="max-autotune-no-cudagraphs", only_tiers=("full",), fp8=False, **where)


def liger(make: Callable, what: str, module: str, *, hub_layer: tuple[str, str] | None = None,
          cpu_reason: str = LIGER_CPU_REASON) -> Variant:
    """A Liger kernel: `make(base, device)` returns the callable; `what` names Liger's op or layer,
    `module` the module `make` imports it from.

    `hub_layer`: (our layer name, Liger's layer name) to take from the Hub when
    MLPBENCH_LIGER_SOURCE=hub (None: the op needs the package). `cpu_reason`: why the kernel cannot
    run under Triton's CPU interpreter.
    """
    from .. import sources

    def make_with_source(base, device, **_):
        if sources.liger_source() == "hub":
            return sources.liger_hub_layer(base, *hub_layer), sources.liger_description()
        return make(base, device), sources.liger_description()

    def skip_reason():
        if sources.liger_source() == "hub" and hub_layer is None:
            return (f"MLPBENCH_LIGER_SOURCE=hub provides Liger's MLP layers only; {what} "
                    "needs the liger-kernel package")
        return None

    return Variant("liger", "peer", make_with_source, origin=f"Liger-Kernel: {what}", triton=True,
                   requires="liger_kernel", cpu_reason=cpu_reason,
                   skip_reason=skip_reason, preload=lambda: importlib.import_module(module))


def ours(make: Callable, repo: str, name: str = "ours", what: str = "our Triton kernel",
         fp8: tuple[Callable, str] | None = None) -> Variant:
    """Our kernel from kernels_local/<repo>, loaded with `kernels`: `make(base, device)` gives the callable.

    `fp8`: (make_fp8, fp8_repo) for its FP8 path: make_fp8(base, device) gives (the callable, a note
    for its source) from the op's eager fp8 base, with kernels_local/<fp8_repo>; it skips, with the
    reason, while that repository lacks the FP8 functions (_fp8.kernel_reason)."""
    from .. import sources
    from . import _fp8

    path = reason = None
    origin = f"kernels_local/{repo} ({what}, loaded with `kernels`)"
    if fp8:
        fp8_make, fp8_repo = fp8

        def path(base, device, **_):
            fn, note = fp8_make(base, device)
            return fn, sources.local_kernel_source(fp8_repo) + note

        def reason():
            return _fp8.kernel_reason(fp8_repo)

        origin += f"; fp8: kernels_local/{fp8_repo}'s FP8 dual GEMM"
    return Variant(name, "ours", lambda base, device, **_: (make(base, device), sources.local_kernel_source(repo)),
                   origin=origin, triton=True, preload=lambda: sources.local_kernel(repo), fp8=path,
                   fp8_skip_reason=reason)
