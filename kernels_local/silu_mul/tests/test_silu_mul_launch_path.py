"""The eager path: planned once per key, no op dispatch, and on a GPU no Triton binding after the
first call (what an eager loop pays per call)."""

import importlib

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def impl(kernel):
    return importlib.import_module(kernel.__name__ + "._silu_mul")


@pytest.fixture
def no_op_dispatch(impl, monkeypatch):
    """Fails the test if a call reaches the torch.library ops."""
    class Refuse:
        def __getattr__(self, name):
            raise AssertionError(f"the eager path dispatched through the op {name}")

    monkeypatch.setattr(impl, "_ops", Refuse())


def reference(gate, up):
    return F.silu(gate.double()) * up.double()


@pytest.mark.parametrize("shape", [(1, 16384), (37, 781), (5, 3, 130)])
def test_eager_calls_skip_the_op(kernel, no_op_dispatch, shape):
    gate = torch.randn(shape, device=DEVICE)
    up = torch.randn(shape, device=DEVICE)
    for _ in range(2):  # the planning call, then the planned one
        torch.testing.assert_close(kernel.silu_mul(gate, up).double(), reference(gate, up), rtol=1e-5, atol=1e-5)


def test_eager_backward_skips_the_op(kernel, no_op_dispatch):
    both = torch.randn(6, 2 * 130, device=DEVICE)
    leaf = both.requires_grad_()
    gate, up = leaf.chunk(2, dim=-1)  # strided halves, read in place
    dy = torch.randn(6, 130, device=DEVICE)
    kernel.silu_mul(gate, up).backward(dy)
    ref = both.detach().double().requires_grad_()
    reference(*ref.chunk(2, dim=-1)).backward(dy.double())
    torch.testing.assert_close(leaf.grad.double(), ref.grad, rtol=1e-5, atol=1e-5)


def test_a_plan_is_made_once_per_key(kernel, impl, monkeypatch):
    made = []
    real = impl._in_place_plan
    monkeypatch.setattr(impl, "_in_place_plan", lambda tensors: made.append(1) or real(tensors))
    impl._FORWARD_PLANS.clear()
    gate, up = torch.randn(3, 40, device=DEVICE), torch.randn(3, 40, device=DEVICE)
    for _ in range(3):
        kernel.silu_mul(gate, up)
    kernel.silu_mul(gate[:, :20], up[:, :20])  # another key: strided rows
    assert len(made) == 2


def test_bad_input_is_still_named(kernel):
    with pytest.raises(ValueError, match="same shape"):
        kernel.silu_mul(torch.randn(3, 4, device=DEVICE), torch.randn(3, 5, device=DEVICE))


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA device: the interpreter has no compiled kernel to keep")
def test_later_calls_launch_the_compiled_kernel(kernel, impl):
    gate, up = torch.randn(1, 16384, device=DEVICE), torch.randn(1, 16384, device=DEVICE)
    kernel.silu_mul(gate, up)
    before = impl.launcher(impl._silu_mul_fwd_kernel).fast_calls
    out = kernel.silu_mul(gate, up)
    assert impl.launcher(impl._silu_mul_fwd_kernel).fast_calls == before + 1
    torch.testing.assert_close(out.double(), reference(gate, up), rtol=1e-5, atol=1e-5)
