"""Ops as modules: each op's module says everything about it, and nothing else names an op or a variant."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlpbench import registry
from mlpbench.ops import ROLES, Op, Variant, shape

PACKAGE = Path(registry.__file__).resolve().parent


def _string_constants(path: Path):
    """(line, text) of every string constant in the module that is not a docstring."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_op_or_variant_name_is_a_literal_outside_its_op_module():
    """The registry, runner, ASV suite, tables, report, gate and pages read ops from mlpbench/ops/."""
    names = set(registry.OPS) | set(registry.all_variants())
    found = []
    for path in sorted([*PACKAGE.glob("*.py"), *PACKAGE.glob("report/*.py")]):
        for line, text in _string_constants(path):
            pieces = set(text.split("/"))
            if text in names or (("/" in text) and pieces & names):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}")
    assert not found, "op or variant names outside mlpbench/ops/:\n" + "\n".join(found)


def test_the_checker_above_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""mentions mlp in prose: fine"""\nx = "mlp"\ny = f"mlp/{x}"\n')
    assert [t for _, t in _string_constants(bad)] == ["mlp", "mlp/"]


def test_every_op_module_defines_a_complete_op():
    for op in registry.OPS.values():
        assert isinstance(op, Op)
        assert op.variants[0].role == "baseline" and all(v.role in ROLES for v in op.variants)
        assert op.shapes and all(s.op == op.name and len(s.why) > 10 for s in op.shapes)
        assert any("quick" in s.tiers for s in op.shapes), f"{op.name}: no quick shape, so CI never checks it"
        assert callable(op.build) and op.what


def test_ops_are_discovered_from_their_modules_in_rank_order():
    ranks = [op.rank for op in registry.OPS.values()]
    assert ranks == sorted(ranks)
    assert {"swiglu_mlp", "silu_mul"} <= set(registry.OPS)


def test_an_op_rejects_shapes_with_the_wrong_dims():
    base = Variant("eager", "baseline", lambda b, d, **_: (b, ""), origin="x")
    with pytest.raises(ValueError, match=r"must give dims \('t', 'h'\)"):
        Op(name="x", what="x", dims=("t", "h"), bound="memory", variants=(base,), rank=0, build=None,
           shapes=(shape(("quick",), "a shape with a d it should not have", t=1, d=2),))
    with pytest.raises(ValueError, match="first the baseline"):
        Op(name="x", what="x", dims=("t",), bound="memory", rank=0, build=None, shapes=(),
           variants=(Variant("ours", "ours", lambda b, d, **_: (b, ""), origin="x"),))
    with pytest.raises(ValueError, match="role 'fast'"):
        Variant("v", "fast", lambda b, d, **_: (b, ""), origin="x")


def test_a_shape_lists_its_tiers_and_a_standard_shape_is_a_full_one():
    assert shape(("quick", "standard", "full"), "a shape in every tier", t=1).tiers == ("quick", "standard", "full")
    for bad in ("quick", (), ("quick", "quick"), ("large",), ("standard",)):
        with pytest.raises(ValueError, match="tiers"):
            shape(bad, "a shape with bad tiers", t=1)


def test_importing_mlpbench_leaves_the_environment_alone_and_its_entry_points_prepare_it():
    # Run in a clean environment: the settings are written by environment.prepare() and
    # interpret_triton_without_gpu(), which the entry points call, never by an import.
    code = ("import os, sys; before = dict(os.environ)\n"
            "import mlpbench, mlpbench.registry, mlpbench.workloads, mlpbench.runner\n"
            "import mlpbench.asv.suite, mlpbench.asv.skips, mlpbench.cli\n"
            "changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}\n"
            "assert not changed, changed\n"
            "from mlpbench import environment\n"
            "environment.prepare(); environment.interpret_triton_without_gpu()\n"
            "print(*(os.environ.get(k) for k in sys.argv[1:]))")
    names = ["PYTORCH_NVML_BASED_CUDA_CHECK", "HF_HUB_OFFLINE", "TRITON_INTERPRET"]
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def run(env):
        proc = subprocess.run([sys.executable, "-c", code, *names], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return dict(zip(names, proc.stdout.split()))

    import torch

    interpret = "None" if torch.cuda.is_available() else "1"
    assert run(clean) == dict(zip(names, ["1", "1", interpret]))
    assert run(clean | {"MLPBENCH_HUB": "1"})["HF_HUB_OFFLINE"] == "None"  # the Hub reachable when asked
    assert run(clean | {"HF_HUB_OFFLINE": "0"})["HF_HUB_OFFLINE"] == "0"  # an explicit value wins


def test_reading_the_registry_imports_no_torch():
    code = ("import sys; from mlpbench import registry; registry.all_cases(); "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, "
            "[m for m in sys.modules if m.startswith(('torch', 'triton'))][:5]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_new_ops_cover_their_models_at_the_standard_tier():
    std = {c.id for c in registry.select("standard")}
    assert {"swiglu_mlp/ours/bf16/t8192-d4096-h14336", "swiglu_mlp/liger/fp16/t4096-d3584-h18944",
            "swiglu_mlp/compiled/bf16/t1-d4096-h14336", "swiglu_mlp/eager/fp32/t333-d768-h3000",
            "silu_mul/ours/bf16/t8192-h14336", "silu_mul/liger/fp16/t1-h14336"} <= std


@pytest.mark.parametrize("case_id", ["gelu_mul/eager/fp32/t8192-h3072-merged", "gelu_mul/ours/fp32/t8192-h3072-merged",
                                     "gelu_mul_train/ours/fp32/t8192-h3072"])
def test_the_merged_layout_gives_row_strided_halves_and_passes_the_float64_check(case_id):
    import dataclasses

    from mlpbench import workloads

    big = registry.case_by_id(case_id)
    # CPU-sized, and merged (gelu_mul_train's merged cases are not in the registry yet: unmeasured on a GPU)
    case = dataclasses.replace(big, shape=dataclasses.replace(big.shape, dims=(("t", 5), ("h", 96)), layout="merged"))
    wl = workloads.build(case, "cpu")
    gate, up = wl.make_inputs(0)[:2]
    assert gate.shape == up.shape == (5, 96) and gate.stride() == up.stride() == (192, 1)
    assert up.data_ptr() - gate.data_ptr() == 96 * gate.element_size()  # one [5, 192] tensor
    assert workloads.check(wl) <= workloads.TOLERANCE["fp32"]
