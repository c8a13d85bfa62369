"""Graph count of each model variant under Dynamo at the standard dims (GPU), and the errors."""
import sys, time, copy
from mlpbench import environment
environment.prepare()
import torch
from mlpbench import sources
from mlpbench.ops import llama_model, gemma_model, _model
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
