"""scripts/elementwise_sweep.py on the CPU: a candidate's launch table is the one the kernel uses while
the candidate is called, the kernel's own table is back afterwards, and the float64 check can fail."""

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from mlpbench import sources

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("elementwise_sweep", ROOT / "scripts" / "elementwise_sweep.py")
sweep = importlib.util.module_from_spec(spec)
sys.modules["elementwise_sweep"] = sweep
spec.loader.exec_module(sweep)


@pytest.mark.parametrize("op", sorted(sweep.OPS))
def test_a_candidate_sets_the_table_while_called_and_restores_it(op):
    repo, module, _liger, act, _shapes = sweep.OPS[op]
    kernel = sources.local_kernel(repo)
    impl = importlib.import_module(kernel.__name__ + "." + module)
    own = impl._CONFIG_TABLE
    fn = getattr(kernel, op)
    gate, up = torch.randn(3, 1000), torch.rand(3, 1000) - 0.5
    fn(gate, up)  # a plan made with the kernel's own table, which the candidate must not reuse
    with sweep.Candidate(impl, module, fn, (4096, 16)) as candidate:
        # silu_mul's table gives bytes per program, gelu_mul's elements per program (float32 here)
        got = impl._launch_config(4) if module == "_silu_mul" else impl._launch_config(1 << 20, 4)
        assert got == ((4096, 16) if module == "_silu_mul" else (1024, 16))
        assert sweep._check(candidate, gate, up, act) <= sweep.TOLERANCE[torch.float32]
    assert impl._CONFIG_TABLE is own and not impl._FORWARD_PLANS


def test_the_check_fails_on_a_wrong_result():
    gate, up = torch.randn(4, 64), torch.rand(4, 64) - 0.5
    with pytest.raises(AssertionError, match="exceeds"):
        sweep._check(lambda g, u: F.silu(g) * u, gate, up, lambda g: F.gelu(g, approximate="tanh"))
