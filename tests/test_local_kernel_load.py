"""Each kernel repository under kernels_local/ loads by its path, as a user calls it after
`bash scripts/setup.sh`: `kernels.get_local_kernel(Path("kernels_local/NAME"))`.

kernels looks for build/<variant>/ in the folder it is given. No build/ is committed:
scripts/setup.sh writes each one with `kernels_local/build.py --all`,
from torch-ext/. These tests check the checkout as built, so they fail, with the command to run, where
that build/ is missing or older than torch-ext/. On a CPU the Triton kernels run under the interpreter
(the root conftest sets TRITON_INTERPRET=1); no GPU is needed.
"""

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import kernels

from mlpbench import kernel_build

ROOT = Path(__file__).resolve().parents[1]
KERNELS_LOCAL = ROOT / "kernels_local"
REPOS = sorted(p.parent.name for p in KERNELS_LOCAL.glob("*/build.toml"))
BUILD = "python kernels_local/build.py --all (scripts/setup.sh runs it)"

# Elementwise kernels cheap enough to call under the interpreter: function name and float64 reference.
CALLS = {
    "gelu_mul": ("gelu_mul", lambda g, u: F.gelu(g, approximate="tanh") * u),
    "silu_mul": ("silu_mul", lambda g, u: F.silu(g) * u),
}


def _exported(name: str) -> list[str]:
    """The names torch-ext/<package>/__init__.py lists in __all__."""
    init = KERNELS_LOCAL / name / "torch-ext" / name / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{init} has no __all__")


def _load(name: str):
    repo = KERNELS_LOCAL / name
    diffs = kernel_build.differences(repo)
    assert not diffs, f"{repo / 'build' / kernel_build.VARIANT} is missing or stale ({diffs[:3]}): run {BUILD}"
    return kernels.get_local_kernel(repo)


def test_every_repository_is_found():
    assert REPOS and set(CALLS) <= set(REPOS)


@pytest.mark.parametrize("name", REPOS)
def test_get_local_kernel_loads_the_checkout_build(name):
    module = _load(name)
    variant = KERNELS_LOCAL / name / "build" / kernel_build.VARIANT
    assert Path(module.__file__).resolve() == (variant / "__init__.py").resolve()
    exported = _exported(name)
    assert exported
    missing = [attr for attr in exported if not hasattr(module, attr)]
    assert not missing, f"{name}: loaded module lacks {missing}"
    functions = [attr for attr in exported if callable(getattr(module, attr))]
    assert functions, f"{name}: no function among {exported}"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_loaded_kernel_computes(name):
    function, reference = CALLS[name]
    module = _load(name)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g, u = torch.randn(3, 40, device=device), torch.randn(3, 40, device=device)
    torch.testing.assert_close(getattr(module, function)(g, u).double(), reference(g.double(), u.double()),
                               rtol=1e-5, atol=1e-5)
