"""The one registry of benchmark cases: every op module's shapes × variants × dtypes, and their tiers.

Everything that runs or reads benchmarks (the pytest-benchmark suite, the ASV classes, the CLI, the
report, the gate) asks this module for its cases; none keeps a list of its own. What an op is lives
in its module under mlpbench/ops/.

Case ids such as ``mlp/compiled/bf16/t8192-d768-h3072`` key the history that ASV and
pytest-benchmark keep. Append shapes; never edit or reorder an existing one, because a changed id
loses the history behind it. Importing this module imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ops import DTYPES, HALF, ROLES, TIERS, Op, Shape, Variant, dims_id, discover

__all__ = ["DTYPES", "HALF", "TIERS", "OPS", "SHAPES", "Case", "Op", "Shape", "Variant",
           "SelectionError", "all_cases", "all_variants", "select", "case_by_id", "case_id", "sequence_id", "dims_id",
           "class_name", "variant_of", "why_no_case"]

OPS: dict[str, Op] = discover()
# The variant suffix of a changing-shapes run whose compiler variant runs with dynamic=True
# ('mlp/compiled-dynamic/bf16/d768-h3072'; sequence_id), and the dim a changing-shapes run varies.
DYNAMIC = "-dynamic"
TOKENS = "t"
SHAPES: tuple[Shape, ...] = tuple(s for op in OPS.values() for s in op.shapes)


@dataclass(frozen=True)
class Case:
    op: str
    variant: str
    dtype: str
    shape: Shape = field(compare=False)

    @property
    def id(self) -> str:
        return case_id(self.op, self.variant, self.dtype, self.shape.id)


def case_id(op: str, variant: str, dtype: str, shape_id: str) -> str:
    """The one spelling of a case id, op/variant/dtype/shape: results and ASV's history are keyed on
    it, so it never changes. Everything else looks ids up here."""
    return f"{op}/{variant}/{dtype}/{shape_id}"


def sequence_id(op: str, variant: str, dtype: str, shape: Shape, dynamic: bool = False) -> str:
    """A changing-shapes run's id: the case id with the shape's dims less the token count, the
    variant marked DYNAMIC when it compiles with dynamic=True (`mlp/compiled-dynamic/bf16/d768-h3072`)."""
    return case_id(op, variant + (DYNAMIC if dynamic else ""), dtype, dims_id(dict(shape.dims), without=TOKENS))


def all_cases() -> list[Case]:
    """Every case of every tier, in registry order."""
    return [Case(s.op, v.name, dt, s) for s in SHAPES for v in OPS[s.op].variants for dt in s.dtypes
            if v.measured_at(s, dt)]


def variant_of(case: Case) -> Variant:
    return OPS[case.op].variant(case.variant)


class SelectionError(ValueError):
    """A selection named a value that is not in the registry."""


def _check(kind: str, values, valid) -> None:
    bad = [v for v in values if v not in valid]
    if bad:
        raise SelectionError(f"unknown {kind} {', '.join(map(repr, bad))}; valid: {', '.join(valid)}")


def all_variants() -> tuple[str, ...]:
    """Every variant name, in table order: baselines, then compilers, peers' kernels, ours."""
    ranked = sorted((ROLES.index(v.role), k, v.name) for op in OPS.values() for k, v in enumerate(op.variants))
    return tuple(dict.fromkeys(name for _, _, name in ranked))


def select(tier: str = "quick", ops=None, variants=None, dtypes=None, shapes=None) -> list[Case]:
    """Cases of `tier` (those whose shape lists it), filtered by op, variant, dtype and shape id.

    Raises SelectionError naming any value the registry does not know, with the valid ones.
    """
    _check("tier", [tier], TIERS)
    _check("op", ops or [], tuple(OPS))
    _check("variant", variants or [], all_variants())
    _check("dtype", dtypes or [], DTYPES)
    _check("shape", shapes or [], tuple(dict.fromkeys(s.id for s in SHAPES)))
    return [
        c for c in all_cases()
        if tier in c.shape.tiers and variant_of(c).in_tier(tier)
        and (not ops or c.op in ops)
        and (not variants or c.variant in variants)
        and (not dtypes or c.dtype in dtypes)
        and (not shapes or c.shape.id in shapes)
    ]


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def why_no_case(tier: str = "quick", ops=None, variants=None, dtypes=None, shapes=None) -> str:
    """Why a valid selection (select's arguments) matches no case of `tier`, as one line: each value
    given that is in other tiers, not this one, named with those tiers ("shape t8192-d768-h3072 is in
    tiers standard and full, not quick"), and the smallest tier in which the whole selection matches
    ("add --tier standard")."""
    given = {"op": ops or [], "variant": variants or [], "dtype": dtypes or [], "shape": shapes or []}
    key = {"op": lambda c: c.op, "variant": lambda c: c.variant, "dtype": lambda c: c.dtype,
           "shape": lambda c: c.shape.id}

    def in_tier(c: Case, t: str) -> bool:
        return t in c.shape.tiers and variant_of(c).in_tier(t)

    # A variant or shape belongs to ops: with --op given, only those ops' cases count for it.
    cases = all_cases()
    reasons = []
    for kind, values in given.items():
        pool = [c for c in cases if kind == "op" or not ops or c.op in ops]
        for value in values:
            mine = [c for c in pool if key[kind](c) == value]
            tiers = [t for t in TIERS if any(in_tier(c, t) for c in mine)]
            of = f" of op {_and(ops)}" if kind != "op" and ops else ""
            if not mine:
                reasons.append(f"op{'s' if len(ops) > 1 else ''} {_and(ops)} {'have' if len(ops) > 1 else 'has'} "
                               f"no {kind} {value}" if of else f"no case has {kind} {value}")
            elif tier not in tiers:
                reasons.append(f"{kind} {value}{of} is in tier{'s' if len(tiers) > 1 else ''} {_and(tiers)}, "
                               f"not {tier}")
    if not reasons:
        reasons.append("no case has all of " + "; ".join(f"{k} {', '.join(v)}" for k, v in given.items() if v))
    other = next((t for t in TIERS if t != tier and select(t, ops, variants, dtypes, shapes)), None)
    hint = f"; add --tier {other}" if other else ""
    return f"the selection matches no case of tier {tier}: {'; '.join(reasons)}{hint}"


def case_by_id(case_id: str) -> Case:
    for c in all_cases():
        if c.id == case_id:
            return c
    example = all_cases()[-1].id
    raise SelectionError(f"unknown case id {case_id!r}; ids look like {example!r} (op/variant/dtype/shape)")


def case(op: str, variant: str, dtype: str, shape_id: str) -> Case:
    """The case named by its four parts (ASV's parameters): SelectionError when it is not one."""
    return case_by_id(case_id(op, variant, dtype, shape_id))


def shape_of(op: str, shape_id: str) -> Shape | None:
    """The registry shape of `op` with id `shape_id`, or None (a shape since removed)."""
    return next((s for s in OPS[op].shapes if s.id == shape_id), None) if op in OPS else None


def class_name(op: str) -> str:
    """The op's name in ASV class names: gelu_mul_train → GeluMulTrain."""
    return "".join(part.capitalize() for part in op.split("_"))
