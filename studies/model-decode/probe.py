"""The MLP in its model under torch.compile (GPU), two probes:

    python studies/model-decode/probe.py explain   # graph count of each model variant under Dynamo
                                                   # at the standard dims, and the errors
    python studies/model-decode/probe.py host      # where the host time of a compiled kernelized
                                                   # decode call goes (llama, t=1)
"""
import sys
import time

from mlpbench import environment

environment.prepare()  # before torch and huggingface_hub read it
import torch  # noqa: E402

from mlpbench import sources  # noqa: E402
from mlpbench.ops import _model, gemma_model, llama_model  # noqa: E402


def explain():
    from mlpbench.ops._gated import DUAL_GEMM_REPO

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for op in (llama_model, gemma_model):
        M = op.MODEL
        dims = [s for s in op.OP.shapes if "standard" in s.tiers][1].as_dict()
        torch.manual_seed(0)
        with torch.device(dev):
            lm = M.classes()[0](M.config_for(dims))
        lm = lm.to(torch.bfloat16).eval().requires_grad_(False)
        dual = _model.kernelized(lm, M, M.layer, DUAL_GEMM_REPO, dev, for_compile=True)
        sources.local_kernel(DUAL_GEMM_REPO).interleave_gate_up(dual)
        for name, m in (("original", lm), ("ours", _model.kernelized(lm, M, M.layer, M.repo, dev, for_compile=True)), ("dualgemm", dual)):
            for t in (1, 2048):
                ids = torch.randint(0, 8192, (1, t), device=dev)
                torch._dynamo.reset()
                t0 = time.time()
                ex = torch._dynamo.explain(m)(input_ids=ids, use_cache=False)
                targets = sorted({str(n.target) for g in ex.graphs for n in g.graph.nodes if n.op == "call_function" and "." in str(n.target) and "built-in" not in str(n.target)})
                print(f"{op.OP.name} {name} t={t}: graphs {ex.graph_count} breaks {ex.graph_break_count} ops {ex.op_count} {time.time()-t0:.1f}s {ex.break_reasons[:2]} {[x for x in targets if 'gate' in x or 'mul' in x]}", flush=True)
        del lm, dual
        torch.cuda.empty_cache() if dev == "cuda" else None


def host_probe():
    M = llama_model.MODEL
    dims = dict(t=1, d=4096, h=14336, l=2)
    torch.manual_seed(0)
    with torch.device("cuda"):
        lm = M.classes()[0](M.config_for(dims))
    lm = lm.to(torch.bfloat16).eval().requires_grad_(False)
    ids = torch.randint(0, 8192, (1, 1), device="cuda")
    def host(fn, n=300):
        for _ in range(20): fn()
        torch.cuda.synchronize(); s = []
        for _ in range(n):
            t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); s.append(time.perf_counter() - t0)
        s.sort(); return s[len(s)//2] * 1e6
    res = {}
    for name in ("compiled", "ourscompiled"):
        m = lm if name == "compiled" else _model.kernelized(lm, M, M.layer, M.repo, "cuda", for_compile=True)
        c = _model._compile(m, False)
        f = lambda: c(input_ids=ids, use_cache=False).logits
        f()
        print(name, "host us", host(f), flush=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            for _ in range(20): f()
            torch.cuda.synchronize()
        print(p.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=70))
    k = sources.local_kernel(M.repo)
    g = torch.randn(1, 14336, device="cuda", dtype=torch.bfloat16); u = torch.randn_like(g)
    op = getattr(torch.ops, k.__name__).silu_mul
    print("public silu_mul us", host(lambda: k.silu_mul(g, u), 1000))
    print("torch.ops silu_mul us", host(lambda: op(g, u), 1000))
    print("torch.ops default us", host(lambda: op.default(g, u), 1000))
    print("F.silu*u us", host(lambda: torch.nn.functional.silu(g) * u, 1000))


if __name__ == "__main__":
    probes = {"explain": explain, "host": host_probe}
    if len(sys.argv) != 2 or sys.argv[1] not in probes:
        raise SystemExit(__doc__)
    probes[sys.argv[1]]()
