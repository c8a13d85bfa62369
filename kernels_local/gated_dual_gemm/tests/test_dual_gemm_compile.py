"""Under torch.compile gate_up_act_mul(_interleaved) are triton_ops: on the unfused path (few tokens:
decode) the compiled graph runs the GEMMs and launches our act·mul kernel itself; the fused path
calls gate_up_act_mul_fused, an opaque op, whose kernel takes tensor descriptors made on the host.

On a GPU the package registers triton_ops and Inductor's generated code shows what runs.  Under the
CPU interpreter the package registers custom_ops (Inductor cannot launch an interpreted kernel), so
these tests register the triton_ops in a namespace of their own and compile with aot_eager: Dynamo
and AOTAutograd trace as they do for Inductor, and the traced graph runs eagerly.
"""

import importlib

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ACTS = {"gelu_tanh": lambda g: F.gelu(g, approximate="tanh"), "silu": F.silu}
_TRACED = {}  # namespace -> the triton_ops registered there (once per process)


@pytest.fixture(scope="module")
def impl(kernel):
    return importlib.import_module(kernel.__name__ + "._dual_gemm")


@pytest.fixture
def ops(impl, monkeypatch):
    """The ops the public functions call under torch.compile: the package's own on a GPU; under the
    interpreter, triton_ops registered in `<namespace>_traced` and swapped in for this test."""
    torch._dynamo.reset()
    if not impl._INTERPRETED:
        return impl._ops
    ns = impl._NAMESPACE + "_traced"
    if ns not in _TRACED:
        impl._define_ops(ns, traced=True)
        _TRACED[ns] = getattr(torch.ops, ns)
    monkeypatch.setattr(impl, "_ops", _TRACED[ns])
    return _TRACED[ns]


def inputs(m, k, n, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(dtype).to(DEVICE)
    wg = (torch.randn(n, k, generator=gen) * 2 / k**0.5).to(dtype).to(DEVICE)
    wu = (torch.randn(n, k, generator=gen) / k**0.5).to(dtype).to(DEVICE)
    return x, wg, wu


def reference(x, wg, wu, act):
    x, wg, wu = (t.detach().double() for t in (x, wg, wu))
    return ACTS[act](x @ wg.T) * (x @ wu.T)


def rel_err(actual, expected):
    return (actual.double() - expected).norm().item() / (expected.norm().item() or 1.0)


def _kernels_of(op_name):
    """The kernels torch.library found in a triton_op's body (none for a custom_op)."""
    return torch._library.triton.get_triton_kernels_for_op(op_name)


def test_the_package_registers_triton_ops_where_triton_compiles(impl):
    """triton_ops on a GPU (torch.library knows the act·mul kernels their shared body launches),
    custom_ops under the interpreter (no kernels known: opaque ops)."""
    ns = impl._NAMESPACE
    for op in ("gate_up_act_mul", "gate_up_act_mul_interleaved"):
        found = {id(k) for k in _kernels_of(f"{ns}::{op}")}
        assert found == (set() if impl._INTERPRETED else {id(impl._act_mul_kernel), id(impl._act_mul_pairs_kernel)})


class Recorded:
    """torch.compile's backend for the test: aot_eager recording its graphs (CPU), or Inductor (GPU)."""

    def __init__(self):
        if DEVICE == "cuda":
            self.backend = "inductor"
        else:
            from torch._dynamo.testing import AotEagerAndRecordGraphs

            self.backend = AotEagerAndRecordGraphs()

    def check(self, ops, codes, op, kernel=None, fused=False):
        """The Dynamo graph holds `op` as one node; what runs is `kernel` (a wrap_triton launch) next to
        the GEMMs, or with `fused` the fused op, and never `op` itself."""
        if DEVICE == "cuda":
            code = "\n".join(codes)
            if fused:
                assert f"torch.ops.{ops.name}.gate_up_act_mul_fused" in code
            else:
                assert f"torch.ops.{ops.name}." not in code and kernel.fn.__name__ in code
            assert f"torch.ops.{ops.name}.{op}." not in code
            return
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional

        (dynamo_graph,) = self.backend.graphs
        calls = [str(n.target) for n in dynamo_graph.graph.nodes if n.op == "call_function"]
        assert [t for t in calls if ops.name in t] == [f"{ops.name}.{op}"]
        (graph,) = self.backend.fw_graphs
        targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
        if fused:
            assert [str(t) for t in targets if ops.name in str(t)] == [f"{ops.name}.gate_up_act_mul_fused.default"]
            assert triton_kernel_wrapper_functional not in targets
        else:
            assert not [t for t in targets if ops.name in str(t)]
            launched = [n for n in graph.graph.nodes if n.target is triton_kernel_wrapper_functional]
            assert [kernel_side_table.get_kernel(n.kwargs["kernel_idx"]).fn for n in launched] == [kernel]


def _run(fn, *args):
    """(fn(*args), the generated code on a GPU)."""
    if DEVICE == "cuda":
        from torch._inductor.utils import run_and_get_code

        return run_and_get_code(fn, *args)
    return fn(*args), []


@pytest.mark.slow
@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("interleaved", [False, True], ids=["two weights", "interleaved"])
@pytest.mark.parametrize("tokens", [1, 5])
def test_compiled_unfused_path_launches_the_act_mul_kernel(kernel, impl, ops, act, interleaved, tokens):
    rec = Recorded()
    x, wg, wu = inputs(tokens, 64, 200, torch.bfloat16)
    x = x.view(1, tokens, 64)  # a model's [batch, tokens, dim]
    if interleaved:
        fn = torch.compile(lambda x, w: kernel.gate_up_act_mul_interleaved(x, w, act), backend=rec.backend,
                           fullgraph=True)
        out, codes = _run(fn, x, kernel.interleave(wg, wu))
        rec.check(ops, codes, "gate_up_act_mul_interleaved", impl._ACT_MUL_PAIRS_KERNEL)
    else:
        fn = torch.compile(lambda x, wg, wu: kernel.gate_up_act_mul(x, wg, wu, act), backend=rec.backend,
                           fullgraph=True)
        out, codes = _run(fn, x, wg, wu)
        rec.check(ops, codes, "gate_up_act_mul", impl._ACT_MUL_KERNEL)
    assert out.shape == (1, tokens, 200) and out.dtype == torch.bfloat16
    assert rel_err(out, reference(x, wg, wu, act)) <= 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("interleaved", [False, True], ids=["two weights", "interleaved"])
def test_compiled_fused_path_calls_the_fused_op(kernel, ops, interleaved):
    rec = Recorded()
    x, wg, wu = inputs(320, 32, 96, torch.bfloat16)  # 320 rows: fused_pays
    if interleaved:
        fn = torch.compile(lambda x, w: kernel.gate_up_act_mul_interleaved(x, w), backend=rec.backend, fullgraph=True)
        out, codes = _run(fn, x, kernel.interleave(wg, wu))
    else:
        fn = torch.compile(lambda x, wg, wu: kernel.gate_up_act_mul(x, wg, wu), backend=rec.backend, fullgraph=True)
        out, codes = _run(fn, x, wg, wu)
    rec.check(ops, codes, "gate_up_act_mul_interleaved" if interleaved else "gate_up_act_mul", fused=True)
    assert rel_err(out, reference(x, wg, wu, "gelu_tanh")) <= 1e-2


@pytest.mark.slow
def test_dynamic_token_counts(kernel, ops):
    """Symbolic token counts: one graph for the unfused path, another once fused_pays."""
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("inductor" if DEVICE == "cuda" else "aot_eager")
    fn = torch.compile(lambda x, w: kernel.gate_up_act_mul_interleaved(x, w, "silu"), backend=counter,
                       fullgraph=True, dynamic=True)
    _, wg, wu = inputs(1, 32, 96, torch.bfloat16)
    w = kernel.interleave(wg, wu)
    for tokens in (3, 7, 320):
        x = inputs(tokens, 32, 96, torch.bfloat16, seed=tokens)[0]
        assert rel_err(fn(x, w), reference(x, wg, wu, "silu")) <= 1e-2
    assert counter.frame_count == 2


@pytest.mark.slow
def test_compiled_backward(kernel, ops):
    fn = torch.compile(lambda x, wg, wu: kernel.gate_up_act_mul(x, wg, wu, "silu"), backend=Recorded().backend,
                       fullgraph=True)
    x, wg, wu = (t.float().requires_grad_() for t in inputs(5, 32, 48, torch.float32))
    dy = torch.randn(5, 48, device=DEVICE)
    fn(x, wg, wu).backward(dy)
    leaves = [t.detach().double().requires_grad_() for t in (x, wg, wu)]
    (ACTS["silu"](leaves[0] @ leaves[1].T) * (leaves[0] @ leaves[2].T)).backward(dy.double())
    for got, want in zip((x, wg, wu), leaves):
        assert rel_err(got.grad, want.grad) <= 1e-5


def test_the_ops_on_meta_and_real_tensors(kernel, ops):
    """The triton_ops answer shapes on the meta device (their bodies are their own fakes), and called
    with real tensors outside tracing they run the eager path."""
    x = torch.empty(2, 5, 32, device="meta", dtype=torch.bfloat16)
    w = torch.empty(48, 32, device="meta", dtype=torch.bfloat16)
    for fused in (-1, 0, 1):
        assert ops.gate_up_act_mul(x, w, w, "silu", fused, []).shape == (2, 5, 48)
        assert ops.gate_up_act_mul_interleaved(x, w, "silu", fused, []).shape == (2, 5, 24)
    x, wg, wu = inputs(5, 32, 48, torch.bfloat16)
    for fused in (0, 1):
        assert rel_err(ops.gate_up_act_mul(x, wg, wu, "silu", fused, []), reference(x, wg, wu, "silu")) <= 1e-2
        out = ops.gate_up_act_mul_interleaved(x, kernel.interleave(wg, wu), "silu", fused, [])
        assert rel_err(out, reference(x, wg, wu, "silu")) <= 1e-2
