import re

import pytest

from mlpbench import registry


def test_case_ids_are_unique_and_readable():
    ids = [c.id for c in registry.all_cases()]
    assert len(ids) == len(set(ids))
    for case_id in ids:
        assert re.fullmatch(r"[a-z_]+/[a-z]+/(fp32|bf16|fp16|fp8)/[a-z]\d+(-[a-z]\d+)*(-[a-z]+)?", case_id), case_id
    assert "mlp/compiled/bf16/t8192-d768-h3072" in ids


def test_every_shape_says_why_and_belongs_to_a_tier():
    for s in registry.SHAPES:
        assert len(s.why) > 10, s
        assert set(s.tiers) <= set(registry.TIERS)
        assert set(s.dtypes) <= set(registry.DTYPES)


def test_shape_ids_are_unique_per_op():
    keys = [(s.op, s.id) for s in registry.SHAPES]
    assert len(keys) == len(set(keys))


def test_blog_shapes_are_in_the_standard_tier():
    std = {c.id for c in registry.select("standard")}
    assert "linear/eager/bf16/t1024-i32-o64" in std
    assert "mlp/eager/bf16/t8192-d768-h3072" in std
    assert "gelu_mul/liger/bf16/t8192-h3072" in std


def test_standard_covers_every_op_variant_and_dtype():
    std = registry.select("standard")
    for op, spec in registry.OPS.items():
        # the dtypes the op's standard shapes declare (the model ops' are bf16 only)
        declared = {dt for s in spec.shapes if "standard" in s.tiers for dt in s.dtypes}
        for variant in spec.variants:
            got = {c.dtype for c in std if c.op == op and c.variant == variant.name}
            want = set(variant.only_dtypes or registry.DTYPES) & declared if variant.in_tier("standard") else set()
            if not variant.fp8:
                want.discard("fp8")  # no FP8 path, no fp8 cases
            assert got == want, (op, variant.name, got)


def test_a_variant_kept_out_of_a_tier_is_measured_in_the_full_tier():
    kept_out = [(op, v.name) for op, spec in registry.OPS.items() for v in spec.variants if not v.in_tier("standard")]
    assert ("mlp", "maxautotune") in kept_out  # its GEMM autotuning costs tens of seconds per case
    full = registry.select("full")
    for op, name in kept_out:
        assert any(c.op == op and c.variant == name for c in full), (op, name)
        assert not registry.select("standard", ops=[op], variants=[name])


def test_full_is_standard_plus_the_largest_shapes():
    standard, full = ({c.id for c in registry.select(t)} for t in ("standard", "full"))
    assert standard < full


def test_quick_tier_keeps_compiled_cases_few():
    quick = registry.select("quick")
    # Each compiled case costs 5–40 s of torch.compile on CI's CPU: 12 keeps the test command under 15 min.
    assert sum(registry.variant_of(c).compiles for c in quick) <= 12


@pytest.mark.parametrize("kwargs, bad", [
    ({"tier": "huge"}, "tier 'huge'"),
    ({"ops": ["conv"]}, "op 'conv'"),
    ({"variants": ["fast"]}, "variant 'fast'"),
    ({"dtypes": ["fp4"]}, "dtype 'fp4'"),
    ({"shapes": ["t1-x2"]}, "shape 't1-x2'"),
])
def test_select_names_the_bad_value_and_lists_valid_ones(kwargs, bad):
    with pytest.raises(registry.SelectionError, match=re.escape(bad)) as info:
        registry.select(**kwargs)
    assert "valid:" in str(info.value)


def test_filters_combine():
    got = registry.select("standard", ops=["gelu_mul"], variants=["ours"], dtypes=["bf16"])
    assert got and all(c.op == "gelu_mul" and c.variant == "ours" and c.dtype == "bf16" for c in got)


def test_case_by_id_round_trips_and_rejects_unknown():
    c = registry.all_cases()[5]
    assert registry.case_by_id(c.id) == c
    with pytest.raises(registry.SelectionError, match="unknown case id"):
        registry.case_by_id("mlp/eager/bf16/t0")


def test_token_sweep_for_the_overhead_crossover():
    sweep = {c.shape.as_dict()["t"] for c in registry.select("standard", ops=["mlp"], variants=["compiled"], dtypes=["bf16"])
             if c.shape.id.endswith("d768-h3072")}
    assert {1, 16, 64, 256, 1024, 2048, 4096, 8192, 16384} <= sweep


def test_the_registry_alone_spells_case_shape_and_sequence_ids():
    import re
    from pathlib import Path

    import mlpbench
    from mlpbench import registry

    case = registry.case_by_id("mlp/compiled/bf16/t8192-d768-h3072")
    assert registry.case_id(case.op, case.variant, case.dtype, case.shape.id) == case.id
    assert registry.dims_id(dict(case.shape.dims)) == case.shape.id == "t8192-d768-h3072"
    assert registry.sequence_id("mlp", "compiled", "bf16", case.shape, dynamic=True) == \
        "mlp/compiled-dynamic/bf16/d768-h3072"
    # no other module formats an id of four slash-separated parts itself
    spelled = re.compile(r'f"\{[^}]*\}/\{[^}]*\}/\{[^}]*\}/\{')
    root = Path(mlpbench.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "registry.py" and spelled.search(p.read_text())]
    assert offenders == []
