"""Ops as modules: each file in this package says everything about one op.

An op module defines `OP = Op(...)`: what it computes, its shapes (with the why for each) and their
tiers, its variants (how each is built, what it needs to run here, where it comes from), the float64
reference, FLOPs and fewest bytes moved, whether it is memory- or compute-bound, and which figures
the report draws for it. Its expected launch structure lives beside it in `expectations.toml`.

Everything else (registry, runner, pytest plugin, ASV suite, tables, report, gate) reads ops from
here and never names an op or a variant. Adding an op is adding a module; see the README's "Adding
an op, a variant, a metric".

Nothing here imports torch: `mlpbench check` and `mlpbench report` read the registry without it.
An op's `build` imports what it needs when a case is built.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Callable

# fp8 (e4m3 GEMM operands with row-wise scales, bf16 in and out: mlpbench/ops/_fp8.py) is appended
# last, so ASV's dtype axis only grew; a shape has it only where it lists it, and a variant only where
# it has an FP8 path (Variant.fp8).
FP8 = "fp8"
DTYPES = ("fp32", "bf16", "fp16", FP8)
FLOATS = ("fp32", "bf16", "fp16")  # a shape's dtypes unless it lists its own
ELEMENT_SIZE = {"fp32": 4, "bf16": 2, "fp16": 2, FP8: 1}  # bytes, for readers that do not import torch
HALF = ("bf16", "fp16")  # for shapes where fp32 GEMMs would cost minutes and say little

# quick: CPU-sized shapes, seconds per case (CI). standard: the nightly GPU set, sized to fit a
# nightly job. full: standard plus the largest shapes. A shape lists every tier it belongs to; most
# quick shapes are in no GPU tier, since at their sizes a GPU measures launch overhead only.
# ASV's benchmark families are these tiers, one module each under benchmarks/ (asv_tiers.py).
TIERS = ("quick", "standard", "full")

# How the tables order variants: the baseline first, then compilers, peers' kernels, ours.
ROLES = ("baseline", "compiler", "peer", "ours")


def dims_id(dims: dict, without: str | None = None) -> str:
    """The one spelling of a shape's dims as an id (`t8192-d768-h3072`), optionally leaving one dim
    out. Ids key ASV's history: this format never changes."""
    return "-".join(f"{k}{v}" for k, v in dims.items() if k != without)


@dataclass(frozen=True)
class Shape:
    op: str
    dims: tuple[tuple[str, int], ...]
    tiers: tuple[str, ...]  # the TIERS it belongs to
    why: str
    dtypes: tuple[str, ...] = FLOATS
    # How the inputs lie in memory when not plainly contiguous, e.g. "merged": gate and up are the two
    # halves of one [t, 2h] tensor (rows strided), as a fused gate|up projection writes them.
    layout: str | None = None

    @property
    def id(self) -> str:
        return "-".join([dims_id(dict(self.dims))] + ([self.layout] if self.layout else []))

    def as_dict(self) -> dict[str, int]:
        return dict(self.dims)


def shape(tiers: tuple[str, ...], why: str, dtypes: tuple[str, ...] = FLOATS, layout: str | None = None,
          **dims: int) -> Shape:
    """A shape of the op it is given to, in the tiers it lists (Op fills in the op's name and checks the dims)."""
    if isinstance(tiers, str) or not tiers or len(set(tiers)) != len(tiers) or set(tiers) - set(TIERS):
        raise ValueError(f"tiers {tiers!r}: a tuple of distinct tiers out of {', '.join(TIERS)}")
    if isinstance(dtypes, str) or not dtypes or set(dtypes) - set(DTYPES):
        raise ValueError(f"dtypes {dtypes!r}: a tuple of dtypes out of {', '.join(DTYPES)}")
    if FP8 in dtypes and "quick" in tiers:
        raise ValueError(f"dtypes {dtypes!r}: {FP8} needs an fp8-capable GPU, so it is in no quick (CPU) shape")
    if "standard" in tiers and "full" not in tiers:
        raise ValueError(f"tiers {tiers!r}: a standard shape is a full one too (full is standard plus the largest)")
    return Shape("", tuple(dims.items()), tuple(tiers), why, tuple(dtypes), layout)


@dataclass(frozen=True)
class Variant:
    """One implementation of an op.

    `make(base, device, **options)` returns (the callable that is timed, where it came from), given
    the op's eager `base` (a module or a function, built by the op for one case). `options` are
    the compile probes' (`dynamic=True`); variants that do not compile ignore them.
    """

    name: str
    role: str  # one of ROLES
    make: Callable
    origin: str  # a line for the README and reports: where the implementation comes from
    triton: bool = False  # needs a Triton kernel at run time: on a CPU only under TRITON_INTERPRET=1
    requires: str | None = None  # an importable module it needs (its package's name in the skip reason)
    cpu_reason: str | None = None  # why it cannot run on a CPU even under the interpreter
    skip_reason: Callable[[], str | None] | None = None  # other reasons, decided at run time
    # Imports what `make` needs (without touching the GPU): ASV's fork server calls it once, so every
    # benchmark process it forks starts with them imported.
    preload: Callable[[], None] | None = None
    compile_mode: str | None = None  # torch.compile's mode, for compiler variants (None: the default)
    # Where the variant is measured, when not at every shape and dtype of its op (a costly compile).
    only_shapes: tuple[str, ...] | None = None
    only_dtypes: tuple[str, ...] | None = None
    # The tiers it is measured in, when not every tier of its shapes (a compile that costs more than
    # a tier's budget allows: max-autotune benchmarks GEMM templates for tens of seconds per case).
    only_tiers: tuple[str, ...] | None = None
    # Its FP8 path: fp8(base, device, **options) -> (callable, source) as `make`, given the op's eager
    # fp8 base (weights quantized at setup: mlpbench/ops/_fp8.py); None: no FP8 path, so no fp8 cases.
    fp8: Callable | None = None
    fp8_skip_reason: Callable[[], str | None] | None = None  # why its FP8 path cannot run, decided at run time

    def measured_at(self, shape: "Shape", dtype: str) -> bool:
        return ((self.only_shapes is None or shape.id in self.only_shapes)
                and (self.only_dtypes is None or dtype in self.only_dtypes)
                and (dtype != FP8 or self.fp8 is not None))

    def maker(self, dtype: str) -> Callable:
        """The make of its path in `dtype`: `fp8` for fp8, else `make`."""
        if dtype != FP8:
            return self.make
        if self.fp8 is None:
            raise ValueError(f"variant {self.name!r} has no FP8 path (dtype {dtype!r})")
        return self.fp8

    def in_tier(self, tier: str) -> bool:
        return self.only_tiers is None or tier in self.only_tiers

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"variant {self.name!r}: role {self.role!r} is not one of {', '.join(ROLES)}")

    @property
    def compiles(self) -> bool:
        """torch.compile'd: its generated code may change with no commit (the gate's higher floor)."""
        return self.role == "compiler"


@dataclass(frozen=True)
class Op:
    name: str
    what: str
    dims: tuple[str, ...]
    bound: str  # "compute" (rated in TFLOP/s against the GEMM ceiling) or "memory" (GB/s against copy)
    variants: tuple[Variant, ...]
    shapes: tuple[Shape, ...]
    # build(case, device, make) -> workloads.Workload, where make(base) gives the case's variant
    build: Callable
    rank: int  # where the op sits in tables and reports: the blog's walk, Linear first
    probe_compile: bool = True  # whether the compile-tax benchmarks time its cold compile
    # Shapes of the ASV compile probe run over changing token counts (the blog's closing trade-off)
    changing_shapes: bool = False
    # The token sweep whose host time says from where compiling pays: (dims after t, dtype), or None
    overhead_sweep: tuple[str, str] | None = None
    kernel_breakdown: bool = False  # the report lists each kernel a call launches (GEMM ops)
    # step_bytes(dims, element_size): the fewest bytes the op's elementwise step (every kernel that is
    # not a GEMM) must move; the report rates that step against the copy ceiling, per variant.
    step_bytes: Callable[[dict, int], int] | None = None
    notes: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.bound not in ("compute", "memory"):
            raise ValueError(f"op {self.name!r}: bound {self.bound!r} must be 'compute' or 'memory'")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names) or self.variants[0].role != "baseline":
            raise ValueError(f"op {self.name!r}: variant names must be unique and the first the baseline: {names}")
        ids = {s.id for s in self.shapes}
        for v in self.variants:
            unknown = set(v.only_shapes or ()) - ids
            if unknown:
                raise ValueError(f"op {self.name!r}: variant {v.name!r} names shapes it does not have: {sorted(unknown)}")
        fixed = []
        for s in self.shapes:
            if tuple(k for k, _ in s.dims) != self.dims:
                raise ValueError(f"op {self.name!r}: shape must give dims {self.dims}, got {tuple(k for k, _ in s.dims)}")
            fixed.append(replace(s, op=self.name))
        object.__setattr__(self, "shapes", tuple(fixed))

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"op {self.name!r} has no variant {name!r}; it has {', '.join(self.variant_names)}")

    @property
    def baseline(self) -> str:
        return self.variants[0].name

    @property
    def compute_bound(self) -> bool:
        return self.bound == "compute"

    def of_role(self, *roles: str) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants if v.role in roles)


def discover() -> dict[str, Op]:
    """Every op module of this package, by op name, in rank order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        op = getattr(module, "OP", None)
        if isinstance(op, Op):
            found.append(op)
    found.sort(key=lambda op: (op.rank, op.name))
    return {op.name: op for op in found}
