"""The eager path: planned once per key, no op dispatch, and on a GPU no Triton binding after the
first call (what an eager loop, a decode step say, pays per call)."""

import importlib

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def impl(kernel):
    return importlib.import_module(kernel.__name__ + "._dual_gemm")


@pytest.fixture
def no_op_dispatch(impl, monkeypatch):
    """Fails the test if a call reaches the torch.library ops."""
    class Refuse:
        def __getattr__(self, name):
            raise AssertionError(f"the eager path dispatched through the op {name}")

    monkeypatch.setattr(impl, "_ops", Refuse())


def weights(k, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, k, generator=gen) / k**0.5).to(DEVICE) for _ in range(2)]


def reference(x, wg, wu):
    x, wg, wu = x.double(), wg.double(), wu.double()
    return F.silu(x @ wg.T) * (x @ wu.T)


@pytest.mark.parametrize("fused", [None, True, False])
@pytest.mark.parametrize("lead", [(1,), (2, 17)])
def test_eager_calls_skip_the_op(kernel, no_op_dispatch, fused, lead):
    wg, wu = weights(32, 48)
    w = kernel.interleave(wg, wu)
    x = torch.randn(*lead, 32, device=DEVICE)
    for _ in range(2):  # the planning call, then the planned one
        for out in (kernel.gate_up_act_mul(x, wg, wu, "silu", fused=fused),
                    kernel.gate_up_act_mul_interleaved(x, w, "silu", fused=fused)):
            assert out.shape == (*lead, 48)
            torch.testing.assert_close(out.double(), reference(x, wg, wu), rtol=1e-4, atol=1e-4)


def test_gradients_skip_the_op_too(kernel, no_op_dispatch):
    """A call that wants a gradient trains through a torch.autograd.Function, both passes without
    the op's dispatch, from two weights and from interleaved ones."""
    wg, wu = weights(16, 24)
    w = kernel.interleave(wg, wu).requires_grad_()
    wg.requires_grad_()
    x = torch.randn(3, 16, device=DEVICE, requires_grad=True)
    dy = torch.randn(3, 24, device=DEVICE)
    got = torch.autograd.grad(kernel.gate_up_act_mul(x, wg, wu, "silu"), (x, wg), dy)
    got_interleaved = torch.autograd.grad(kernel.gate_up_act_mul_interleaved(x, w, "silu"), (x, w), dy)
    x64, wg64, wu64 = (t.detach().double().requires_grad_() for t in (x, wg, wu))
    want = torch.autograd.grad(reference(x64, wg64, wu64), (x64, wg64, wu64), dy.double())
    for g, e in zip((*got, got_interleaved[0], got_interleaved[1][0::2], got_interleaved[1][1::2]),
                    (want[0], want[1], want[0], want[1], want[2])):
        torch.testing.assert_close(g.double(), e, rtol=1e-4, atol=1e-4)


def test_a_plan_is_made_once_per_key(kernel, impl, monkeypatch):
    made = []
    real = impl._make_plan
    monkeypatch.setattr(impl, "_make_plan", lambda *a: made.append(1) or real(*a))
    impl._PLANS.clear()
    wg, wu = weights(16, 24)
    x = torch.randn(3, 16, device=DEVICE)
    for _ in range(3):
        kernel.gate_up_act_mul(x, wg, wu)
    kernel.gate_up_act_mul(x[:2], wg, wu)  # another key
    assert len(made) == 2


def test_a_training_plan_is_made_once_per_key(kernel, impl, monkeypatch):
    """Training calls on the fused path are planned too: checks and launch plan once per key."""
    made = []
    real = impl._make_train_plan
    monkeypatch.setattr(impl, "_make_train_plan", lambda *a: made.append(1) or real(*a))
    impl._TRAIN_PLANS.clear()
    wg, wu = (w.to(torch.bfloat16) for w in weights(16, 24))
    w = kernel.interleave(wg, wu).requires_grad_()
    x = torch.randn(kernel.MIN_FUSED_TOKENS, 16, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(x.shape[0], 24, device=DEVICE, dtype=torch.bfloat16)
    grads = [torch.autograd.grad(kernel.gate_up_act_mul_interleaved(x, w, "silu"), (x, w), dy) for _ in range(3)]
    assert len(made) == 1 and all(torch.equal(g[1], grads[0][1]) for g in grads)
    x64, wg64, wu64 = (t.detach().double().requires_grad_() for t in (x, wg, wu))
    want = torch.autograd.grad(reference(x64, wg64, wu64), (x64, wg64, wu64), dy.double())
    for g, e in ((grads[0][0], want[0]), (grads[0][1][0::2], want[1]), (grads[0][1][1::2], want[2])):
        assert (g.double() - e).norm() / e.norm() <= 2e-2


def test_bad_input_is_still_named(kernel):
    wg, wu = weights(16, 24)
    with pytest.raises(ValueError, match="last dimension"):
        kernel.gate_up_act_mul(torch.randn(3, 15, device=DEVICE), wg, wu)


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA device: the interpreter has no compiled kernel to keep")
@pytest.mark.parametrize("tokens", [1, 512])  # the unfused path, the fused one
def test_later_calls_launch_the_compiled_kernel(kernel, impl, tokens):
    wg, wu = (w.to(torch.bfloat16) for w in weights(768, 3072))
    w = kernel.interleave(wg, wu)
    x = torch.randn(tokens, 768, device=DEVICE, dtype=torch.bfloat16)
    kernel.gate_up_act_mul_interleaved(x, w)
    name = "_gate_up_interleaved_kernel" if kernel.fused_pays(tokens, x.dtype) else "_act_mul_pairs_kernel"
    before = impl.launcher(getattr(impl, name)).fast_calls
    out = kernel.gate_up_act_mul_interleaved(x, w)
    assert impl.launcher(getattr(impl, name)).fast_calls == before + 1
    ref = F.gelu(x.double() @ wg.double().T, approximate="tanh") * (x.double() @ wu.double().T)
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2
