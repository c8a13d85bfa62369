"""_fast_launch: Launcher's bookkeeping, on stand-ins for a @triton.jit function and the compiled
kernel it returns (no GPU needed): what is launched, and when Triton's own path is taken again."""

import importlib.util
from pathlib import Path

import pytest
import torch
import triton.language as tl

# The one source each kernel repository's copy is written from (kernels_local/build.py).
SOURCE = Path(__file__).resolve().parents[1] / "common" / "_fast_launch.py"


@pytest.fixture
def fast_launch(monkeypatch):
    spec = importlib.util.spec_from_file_location("fast_launch_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "JITFunction", FakeJit)
    return module


class FakeCompiled:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        assert len(grid) == 3, grid  # a compiled kernel reads all three grid dimensions
        return lambda *args: self.log.append(("compiled", grid, args))


class FakeJit:
    arg_names = ["x", "n", "BLOCK", "FLAG"]

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.log.append(("triton", grid, args, kwargs))
            return FakeCompiled(self.log)
        return run


class OnGpu:
    """A tensor argument as far as the launcher looks: its device."""
    device = torch.device("cuda", 0)


def test_second_call_of_a_plan_launches_the_compiled_kernel(fast_launch):
    kernel, x = FakeJit(), OnGpu()
    launch = fast_launch.Launcher(kernel)
    for _ in range(2):
        launch((4,), (x, 32), {"BLOCK": 8, "FLAG": True}, num_warps=4)
    assert kernel.log[0] == ("triton", (4,), (x, 32), {"BLOCK": 8, "FLAG": True, "num_warps": 4})
    assert kernel.log[1] == ("compiled", (4, 1, 1), (x, 32, 8, True))
    assert launch.fast_calls == 1


@pytest.mark.parametrize("other", [
    ((OnGpu(), 1), {"BLOCK": 8, "FLAG": True}, {"num_warps": 4}),  # an int Triton specialises as 1
    ((OnGpu(), 33), {"BLOCK": 8, "FLAG": True}, {"num_warps": 4}),  # not divisible by 16
    ((OnGpu(), 2**40), {"BLOCK": 8, "FLAG": True}, {"num_warps": 4}),  # beyond 32 bits
    ((OnGpu(), 32), {"BLOCK": 16, "FLAG": True}, {"num_warps": 4}),  # another constexpr
    ((OnGpu(), 32), {"BLOCK": 8, "FLAG": True}, {"num_warps": 8}),  # another option
])
def test_what_triton_specialises_on_goes_through_triton_again(fast_launch, other):
    kernel = FakeJit()
    launch = fast_launch.Launcher(kernel)
    args, constexprs, options = other
    launch((4,), (args[0], 32), {"BLOCK": 8, "FLAG": True}, num_warps=4)
    launch((4,), args, constexprs, **options)
    assert [entry[0] for entry in kernel.log] == ["triton", "triton"]


def test_the_same_key_with_new_values_stays_fast(fast_launch):
    kernel, x = FakeJit(), OnGpu()
    launch = fast_launch.Launcher(kernel)
    launch((4,), (x, 32), {"BLOCK": 8, "FLAG": True}, num_warps=4)
    launch((7, 2), (x, 48), {"BLOCK": 8, "FLAG": True}, num_warps=4)  # 48: still divisible by 16
    assert kernel.log[1] == ("compiled", (7, 2, 1), kernel.log[1][2])
    assert kernel.log[1][2][1] == 48


def test_a_stand_in_kernel_is_always_called_through_triton(fast_launch):
    class NotJit(FakeJit):
        pass

    fast_launch.JITFunction = type("Other", (), {})
    kernel = NotJit()
    launch = fast_launch.Launcher(kernel)
    for _ in range(2):
        launch((4,), (OnGpu(), 32), {"BLOCK": 8, "FLAG": True}, num_warps=4)
    assert [entry[0] for entry in kernel.log] == ["triton", "triton"]


def test_one_launcher_per_kernel(fast_launch):
    a, b = FakeJit(), FakeJit()
    assert fast_launch.launcher(a) is fast_launch.launcher(a)
    assert fast_launch.launcher(a) is not fast_launch.launcher(b)


# --- traceable: what a triton_op body hands to torch.library.wrap_triton ---------------------------

def _add_one(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


def test_traceable_keeps_a_compiled_kernel(fast_launch):
    kernel = object()
    assert fast_launch.traceable(kernel) is kernel


def test_traceable_gives_an_interpreted_kernel_a_jit_stand_in_that_runs_in_the_interpreter(fast_launch):
    """wrap_triton accepts only a JITFunction: the stand-in is one, and its launches (what the graph's
    kernel wrapper makes when it runs) go to Triton's interpreter, on CPU tensors."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    interpreted = InterpretedFunction(_add_one)
    stand_in = fast_launch.traceable(interpreted)
    assert isinstance(stand_in, JITFunction) and stand_in.interpreted is interpreted
    assert hash(stand_in) == hash(fast_launch.traceable(interpreted))  # hashed by source, as torch's side table does
    x = torch.arange(10.0)
    out = torch.zeros(10)
    stand_in[(3,)](x, out, 10, BLOCK=4)
    assert torch.equal(out, x + 1)
    wrapped = torch.library.wrap_triton(stand_in)
    assert type(wrapped).__name__ == "TraceableTritonKernelWrapper"
