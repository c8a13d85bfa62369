"""The one registry of benchmark cases: ops, variants, dtypes, shapes and tiers, as data.

Everything that runs or reads benchmarks (the pytest-benchmark suite, the ASV classes, the CLI, the
report) asks this module for its cases; none keeps a list of its own.

Case ids such as ``mlp/compiled/bf16/t8192-d768-h3072`` key the history that ASV and
pytest-benchmark keep. Append shapes; never edit or reorder an existing one, because a changed id
loses the history behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPES = ("fp32", "bf16", "fp16")
HALF = ("bf16", "fp16")  # for shapes where fp32 GEMMs would cost minutes and say little

# quick: CPU-sized shapes, seconds per case (CI). standard: the nightly GPU set, well under 15
# minutes on one H200. full: standard plus the largest shapes. quick shapes are not in the GPU tiers:
# at those sizes a GPU measures launch overhead only, which the decode shapes already cover.
TIERS = ("quick", "standard", "full")
_TIER_SETS = {"quick": ("quick",), "standard": ("standard", "full"), "full": ("full",)}
EVERY_TIER = "quick+"  # a quick shape that is also worth timing on a GPU
_TIER_SETS[EVERY_TIER] = TIERS

# What each op computes, and the variants that implement it. "eager" is every op's baseline.
OPS = {
    "linear": {
        "what": "nn.Linear(in, out, bias=True) on [tokens, in]",
        "variants": ("eager", "compiled"),
        "dims": ("t", "i", "o"),
    },
    "mlp": {
        "what": "GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), no biases",
        "variants": ("eager", "compiled", "liger", "ours"),
        "dims": ("t", "d", "h"),
    },
    "gelu_mul": {
        "what": "gelu_tanh(gate) * up on two [tokens, hidden] tensors (forward)",
        "variants": ("eager", "compiled", "liger", "ours"),
        "dims": ("t", "h"),
    },
    "gelu_mul_train": {
        "what": "gelu_tanh(gate) * up, forward then backward with a given output gradient",
        "variants": ("eager", "compiled", "liger", "ours"),
        "dims": ("t", "h"),
    },
}

# Variants that need a Triton kernel at run time: on a CPU they run only under TRITON_INTERPRET=1.
TRITON_VARIANTS = frozenset({"liger", "ours"})


@dataclass(frozen=True)
class Shape:
    op: str
    dims: tuple[tuple[str, int], ...]
    tier: str  # a key of _TIER_SETS
    why: str
    dtypes: tuple[str, ...] = DTYPES

    @property
    def id(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.dims)

    @property
    def tiers(self) -> tuple[str, ...]:
        return _TIER_SETS[self.tier]

    def as_dict(self) -> dict[str, int]:
        return dict(self.dims)


def _shape(op: str, tier: str, why: str, dtypes: tuple[str, ...] = DTYPES, **dims: int) -> Shape:
    expected = OPS[op]["dims"]
    if tuple(dims) != expected:
        raise ValueError(f"shape for {op!r} must give dims {expected}, got {tuple(dims)}")
    return Shape(op, tuple(dims.items()), tier, why, dtypes)


# Append only (see the module docstring). t = tokens (batch × sequence), d = model dim,
# h = MLP hidden size, i/o = Linear in/out features.
SHAPES: tuple[Shape, ...] = (
    # --- linear
    _shape("linear", EVERY_TIER, "the blog's nn.Linear example (--batch 1024 --in_dim 32 --out_dim 64)",
           t=1024, i=32, o=64),
    _shape("linear", "standard", "a model-sized projection (Llama-3-8B attention output)", dtypes=HALF,
           t=8192, i=4096, o=4096),
    _shape("linear", "standard", "decode: one token through a 4096×4096 projection; host-bound", dtypes=HALF,
           t=1, i=4096, o=4096),
    # --- mlp
    _shape("mlp", "quick", "the blog's MLP scaled down to CPU size (same 1:4 hidden ratio)",
           dtypes=("fp32", "bf16"), t=64, d=128, h=512),
    _shape("mlp", "standard", "the blog's MLP example: batch 64 × seq 128, dim 768, hidden 3072",
           t=8192, d=768, h=3072),
    _shape("mlp", "standard", "Gemma-2B MLP dims (2048 / 16384) at 4096 tokens", dtypes=HALF,
           t=4096, d=2048, h=16384),
    _shape("mlp", "full", "Gemma-7B MLP dims (3072 / 24576) at 4096 tokens",
           t=4096, d=3072, h=24576),
    _shape("mlp", "standard", "Llama-3-8B/Mistral-7B MLP dims (4096 / 14336) at 8192 tokens", dtypes=HALF,
           t=8192, d=4096, h=14336),
    _shape("mlp", "standard", "decode: one token through Gemma-2B's MLP; host- and weight-bound", dtypes=HALF,
           t=1, d=2048, h=16384),
    _shape("mlp", "standard", "irregular: 333 tokens, hidden 3000 (not a multiple of 128)",
           t=333, d=768, h=3000),
    _shape("mlp", "full", "the largest MLP timed on the H200 for the anchors (16384 tokens, 4096 / 14336)",
           t=16384, d=4096, h=14336),
    # --- mlp token sweep at the blog's dims (bf16): where compiling starts to pay on the host.
    # At 1 token the compiled MLP cost more host time per call than eager on the H200.
    *(
        _shape("mlp", "standard", f"token sweep at the blog's dims: {t} tokens (overhead crossover)",
               dtypes=("bf16",), t=t, d=768, h=3072)
        for t in (1, 16, 64, 256, 1024, 2048, 4096, 16384)
    ),
    # --- gelu_mul: the [tokens, hidden] intermediates of the MLP shapes above
    _shape("gelu_mul", EVERY_TIER, "irregular: 333 × 3000, where both peers were slow on the H200",
           t=333, h=3000),
    _shape("gelu_mul", "standard", "the blog's fused-kernel shape: 8192 × 3072 (151 MB in bf16)",
           t=8192, h=3072),
    _shape("gelu_mul", "standard", "Gemma-2B intermediate at 4096 tokens", t=4096, h=16384),
    _shape("gelu_mul", "full", "Gemma-7B intermediate at 4096 tokens", t=4096, h=24576),
    _shape("gelu_mul", "standard", "Llama-3-8B intermediate at 8192 tokens", t=8192, h=14336),
    _shape("gelu_mul", "standard", "decode: one token, Gemma-2B hidden; launch-bound", t=1, h=16384),
    _shape("gelu_mul", "full", "16384 × 14336, the largest anchor shape", t=16384, h=14336),
    # --- gelu_mul_train: forward + backward of the fused step
    _shape("gelu_mul_train", "quick", "irregular 333 × 3000, CPU-sized", dtypes=("fp32",), t=333, h=3000),
    _shape("gelu_mul_train", "standard", "the blog's shape 8192 × 3072", t=8192, h=3072),
    _shape("gelu_mul_train", "standard", "Llama-3-8B intermediate at 8192 tokens", dtypes=("bf16",), t=8192, h=14336),
    _shape("gelu_mul_train", "standard", "irregular 1823 × 781, the Triton tutorial's odd shape", t=1823, h=781),
)


@dataclass(frozen=True)
class Case:
    op: str
    variant: str
    dtype: str
    shape: Shape = field(compare=False)

    @property
    def id(self) -> str:
        return f"{self.op}/{self.variant}/{self.dtype}/{self.shape.id}"


def all_cases() -> list[Case]:
    """Every case of every tier, in registry order."""
    return [
        Case(s.op, v, dt, s)
        for s in SHAPES
        for v in OPS[s.op]["variants"]
        for dt in s.dtypes
    ]


class SelectionError(ValueError):
    """A selection named a value that is not in the registry."""


def _check(kind: str, values, valid) -> None:
    bad = [v for v in values if v not in valid]
    if bad:
        raise SelectionError(
            f"unknown {kind} {', '.join(map(repr, bad))}; valid: {', '.join(valid)}"
        )


def all_variants() -> tuple[str, ...]:
    seen: list[str] = []
    for spec in OPS.values():
        seen += [v for v in spec["variants"] if v not in seen]
    return tuple(seen)


def select(tier: str = "quick", ops=None, variants=None, dtypes=None, shapes=None) -> list[Case]:
    """Cases of `tier`, filtered by op, variant, dtype and shape id.

    Raises SelectionError naming any value the registry does not know, with the valid ones.
    """
    _check("tier", [tier], TIERS)
    _check("op", ops or [], tuple(OPS))
    _check("variant", variants or [], all_variants())
    _check("dtype", dtypes or [], DTYPES)
    _check("shape", shapes or [], tuple(dict.fromkeys(s.id for s in SHAPES)))
    return [
        c for c in all_cases()
        if tier in c.shape.tiers
        and (not ops or c.op in ops)
        and (not variants or c.variant in variants)
        and (not dtypes or c.dtype in dtypes)
        and (not shapes or c.shape.id in shapes)
    ]


def case_by_id(case_id: str) -> Case:
    for c in all_cases():
        if c.id == case_id:
            return c
    raise SelectionError(f"unknown case id {case_id!r}; ids look like 'mlp/compiled/bf16/t8192-d768-h3072'")


def class_name(op: str) -> str:
    """The op's name in ASV class names: gelu_mul_train → GeluMulTrain."""
    return "".join(part.capitalize() for part in op.split("_"))
