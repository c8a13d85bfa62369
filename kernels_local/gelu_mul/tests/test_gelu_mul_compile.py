"""Under torch.compile the ops are triton_ops: the compiled graph launches our kernels itself.

On a GPU the package registers its ops with torch.library.triton_op, and Inductor's generated code
launches the kernels (its code names them and never calls the op).  Under the CPU interpreter the
package registers custom_ops (Inductor cannot launch an interpreted kernel), so these tests register
the triton_ops in a namespace of their own and compile with aot_eager: Dynamo and AOTAutograd trace
as they do for Inductor, and the traced graph runs eagerly, the kernel launched through its wrapper.
"""

import importlib

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_TRACED = {}  # namespace -> the triton_ops registered there (once per process)


@pytest.fixture(scope="module")
def impl(kernel):
    return importlib.import_module(kernel.__name__ + "._gelu_mul")


@pytest.fixture
def ops(impl, monkeypatch):
    """The triton_ops the public function calls under torch.compile: the package's own on a GPU; under
    the interpreter, ones registered in `<namespace>_traced` and swapped in for this test."""
    torch._dynamo.reset()
    if not impl._INTERPRETED:
        return impl._ops
    ns = impl._NAMESPACE + "_traced"
    if ns not in _TRACED:
        impl._define_ops(ns, traced=True)
        _TRACED[ns] = getattr(torch.ops, ns)
    monkeypatch.setattr(impl, "_ops", _TRACED[ns])
    return _TRACED[ns]


def reference(gate, up):
    return F.gelu(gate.double(), approximate="tanh") * up.double()


def _kernels_of(op_name):
    """The kernels torch.library found in a triton_op's body (none for a custom_op)."""
    return torch._library.triton.get_triton_kernels_for_op(op_name)


def test_the_package_registers_triton_ops_where_triton_compiles(impl):
    """triton_op on a GPU (the kernels it launches are known to torch.library), custom_op under the
    interpreter (no kernels known: an opaque op)."""
    fwd, bwd = _kernels_of(f"{impl._NAMESPACE}::gelu_mul"), _kernels_of(f"{impl._NAMESPACE}::gelu_mul_backward")
    if impl._INTERPRETED:
        assert fwd == bwd == []
    else:
        assert fwd == [impl._gelu_mul_fwd_kernel] and bwd == [impl._gelu_mul_bwd_kernel]


def test_traced_ops_name_their_kernels(impl, ops):
    assert _kernels_of(f"{ops.name}::gelu_mul") == [impl._FWD_KERNEL]
    assert _kernels_of(f"{ops.name}::gelu_mul_backward") == [impl._BWD_KERNEL]


class Recorded:
    """torch.compile's backend for the test: aot_eager recording its graphs (CPU), or Inductor (GPU)."""

    def __init__(self):
        if DEVICE == "cuda":
            self.backend = "inductor"
        else:
            from torch._dynamo.testing import AotEagerAndRecordGraphs

            self.backend = AotEagerAndRecordGraphs()

    def check(self, impl, ops, codes, backward=False):
        """The Dynamo graph holds the op as one node; what runs is our kernel, not the op."""
        names = [("_gelu_mul_fwd_kernel", impl._FWD_KERNEL)] + ([("_gelu_mul_bwd_kernel", impl._BWD_KERNEL)]
                                                               if backward else [])
        if DEVICE == "cuda":
            code = "\n".join(codes)
            assert f"torch.ops.{ops.name}." not in code
            for name, _ in names:
                assert name in code
            return
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional

        (dynamo_graph,) = self.backend.graphs
        calls = [n.target for n in dynamo_graph.graph.nodes if n.op == "call_function"]
        assert [str(t) for t in calls if ops.name in str(t)] == [f"{ops.name}.gelu_mul"]
        aot = self.backend.fw_graphs + (self.backend.bw_graphs if backward else [])
        launched = [n for g in aot for n in g.graph.nodes if n.target is triton_kernel_wrapper_functional]
        kernels = [getattr(kernel_side_table.get_kernel(n.kwargs["kernel_idx"]), "fn", None) for n in launched]
        assert kernels == [kernel for _, kernel in names]
        assert not [n for g in aot for n in g.graph.nodes if ops.name in str(n.target)]


def _run(fn, *args):
    """(fn(*args), the generated code on a GPU)."""
    if DEVICE == "cuda":
        from torch._inductor.utils import run_and_get_code

        return run_and_get_code(fn, *args)
    return fn(*args), []


LAYOUTS = {
    "contiguous": lambda t: t,
    "merged halves": lambda t: torch.cat([t, t + 1], dim=-1).chunk(2, dim=-1)[0],  # strided rows, read in place
    "transposed": lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2),  # copied
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_forward(kernel, impl, ops, layout, dtype):
    rec = Recorded()
    fn = torch.compile(lambda g, u: kernel.gelu_mul(g, u) * 2, backend=rec.backend, fullgraph=True)
    gate = LAYOUTS[layout](torch.randn(3, 5, 96, device=DEVICE).to(dtype))
    up = LAYOUTS[layout](torch.randn(3, 5, 96, device=DEVICE).to(dtype))
    out, codes = _run(fn, gate, up)
    rec.check(impl, ops, codes)
    tol = 1e-5 if dtype == torch.float32 else 2**-7 + 2**-12
    torch.testing.assert_close(out.double(), 2 * reference(gate, up), rtol=tol, atol=1e-5)
    assert out.shape == gate.shape and out.dtype == dtype and out.is_contiguous()


@pytest.mark.slow
def test_compiled_forward_and_backward(kernel, impl, ops):
    rec = Recorded()
    fn = torch.compile(lambda g, u: kernel.gelu_mul(g, u), backend=rec.backend, fullgraph=True)
    both = torch.randn(6, 2 * 130, device=DEVICE, requires_grad=True)
    dy = torch.randn(6, 130, device=DEVICE)

    def step(both, dy):
        gate, up = both.chunk(2, dim=-1)  # strided halves: read, and their gradients written, in place
        out = fn(gate, up)
        out.backward(dy)
        return out

    out, codes = _run(step, both, dy)
    rec.check(impl, ops, codes, backward=True)
    ref = both.detach().double().requires_grad_()
    expected = reference(*ref.chunk(2, dim=-1))
    expected.backward(dy.double())
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both.grad.double(), ref.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_dynamic_token_counts_share_one_graph(kernel, ops):
    """With symbolic sizes the launch is planned with guards on their ranges, not on their values."""
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("inductor" if DEVICE == "cuda" else "aot_eager")
    fn = torch.compile(lambda g, u: kernel.gelu_mul(g, u), backend=counter, fullgraph=True, dynamic=True)
    for tokens in (3, 7, 700):
        gate, up = torch.randn(2, tokens, 96, device=DEVICE), torch.randn(2, tokens, 96, device=DEVICE)
        torch.testing.assert_close(fn(gate, up).double(), reference(gate, up), rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 1


def test_the_op_on_meta_and_real_tensors(kernel, ops):
    """The triton_op answers shapes on the meta device (its body is its own fake), and called with real
    tensors outside tracing it launches the kernel, the tuning override included."""
    g = torch.empty(4, 3, 8, device="meta", dtype=torch.bfloat16)
    assert ops.gelu_mul(g, g).shape == g.shape and ops.gelu_mul(g, g).device.type == "meta"
    dg, du = ops.gelu_mul_backward(g, g, g)
    assert dg.shape == du.shape == g.shape and dg.device.type == "meta"
    gate, up = torch.randn(5, 300, device=DEVICE), torch.randn(5, 300, device=DEVICE)
    for config in ((), (256, 2)):
        torch.testing.assert_close(ops.gelu_mul(gate, up, *config).double(), reference(gate, up), rtol=1e-5,
                                   atol=1e-5)
