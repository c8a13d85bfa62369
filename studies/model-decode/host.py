"""Where the host time of a compiled kernelized decode call goes (llama, t=1)."""
import time
from mlpbench import environment
environment.prepare()  # before torch and huggingface_hub read it
import torch
from mlpbench import sources
from mlpbench.ops import llama_model, _model
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
