"""What Inductor generated for a compiled case, and compiling it so that nothing else decides it.

**Hermetic compilation.** A compiled case is built, compiled and autotuned (its first call, the
float64 check) inside `torch._inductor.utils.fresh_cache()`: an empty Inductor and Triton cache
directory of its own, and Inductor's in-memory caches cleared, on top of `torch._dynamo.reset()`
(mlpbench/ops/_kinds.py). Without it a case could inherit a kernel that an earlier case compiled
and autotuned: Inductor keeps compiled Triton kernels in memory by source, and the GeLU·mul case at
8192 × 3072 generates the same kernel source as the compiled MLP's fused step at that shape, so
after the MLP it ran the configuration the MLP's context had picked, not its own. Nor can a cache
left on disk by an earlier run, or by another commit, decide a pick.

**What is recorded** (`record.Record.codegen`, per Triton kernel the case's compile produced): its
name, a hash of its Triton source, the launch configuration in use after autotuning (block sizes,
`num_warps`, `num_stages`), how many configurations were candidates and where the pick came from
(`autotune_cache_state`: "miss" = autotuned now, "hit" = read from a cache, "only 1 config",
"force_disabled"; `coordinate_descent`), plus the Inductor settings that change code generation.
`fingerprint` condenses all of it into one integer, which ASV records (`<Op>Codegen.track_codegen`)
so the gate can tell, for both commits it compares, whether the generated code changed; the full
record is kept beside the results under that fingerprint (`results/codegen.json`, keyed by it).

**Pinning the autotuner's picks.** Inductor's pick between near-equal launch configurations differs
between fresh processes. The suite measures what a `torch.compile` user gets, so by default every case
autotunes afresh; its record keeps Inductor's autotune cache entries (`best_configs`), and a rerun
with MLPBENCH_PIN_AUTOTUNE=<results file> starts each compiled case from that file's entries, so it
makes the same picks and a difference that remains is not the autotuner's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path

from .codegen_record import DECIDES, fingerprint

# Inductor settings that change the code it generates or the configuration it picks.
SETTINGS = ("max_autotune", "max_autotune_pointwise", "max_autotune_gemm", "max_autotune_gemm_backends",
            "coordinate_descent_tuning", "epilogue_fusion", "force_disable_caches", "triton.cudagraphs",
            "triton.autotune_pointwise", "triton.max_tiles", "triton.prefer_nd_tiling")


_RUN_DIR: str | None = None


def _run_dir() -> str:
    """One folder per process for the cases' cache folders, removed when the process ends. Each case's
    folder outlives its compile: a kernel compiled there may still read its binary after the first call."""
    global _RUN_DIR
    if _RUN_DIR is None:
        import atexit
        import shutil
        import tempfile

        _RUN_DIR = tempfile.mkdtemp(prefix="mlpbench-inductor-")
        atexit.register(shutil.rmtree, _RUN_DIR, ignore_errors=True)
    return _RUN_DIR


# The folder of cache folders that workers compiled cases into ahead of timing (mlpbench/compile/precompile.py)
PRECOMPILED_ENV = "MLPBENCH_PRECOMPILED"


def precompiled_slug(case_id: str) -> str:
    """The name of `case_id`'s folder under $MLPBENCH_PRECOMPILED."""
    return hashlib.sha256(case_id.encode()).hexdigest()[:16]


def seed_for(case_id: str) -> Path | None:
    """The cache folder a worker left for `case_id` under $MLPBENCH_PRECOMPILED, or None."""
    import os

    root = os.environ.get(PRECOMPILED_ENV)
    if not root:
        return None
    found = Path(root) / precompiled_slug(case_id)
    return found if found.is_dir() else None


PIN_ENV = "MLPBENCH_PIN_AUTOTUNE"  # a results file whose autotuner picks compiled cases start from
BEST_CONFIG = "*.best_config"  # Inductor's autotune cache entries, one per autotuned kernel


@contextlib.contextmanager
def hermetic(pin: dict[str, str] | None = None, seed: Path | None = None):
    """Empty on-disk compiler caches (Inductor's and Triton's) and cleared in-memory ones for what
    runs inside; the environment is restored after. Yields the Inductor cache folder.

    `seed`: a cache folder that this run's compile of the same case left (mlpbench/compile/precompile.py),
    copied in first, without autotune picks: Inductor then reads its generated code and kernels
    instead of generating them again, and autotunes afresh.

    `pin` ({path relative to that folder: content}, a record's `best_configs`) seeds it with
    Inductor's autotune cache entries from an earlier compile of the same code: the autotuner then
    reads its pick instead of benchmarking ("hit" in the record's autotune_cache_state). Entries are
    keyed by the kernel's source and torch's build, so one that does not match is never read."""
    import os

    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache")
    with fresh(dir=_run_dir(), delete=False):
        root = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        if seed is not None:
            import shutil

            shutil.copytree(seed, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.best_config"))
        for rel, content in (pin or {}).items():
            path = root / rel
            if path.resolve().parent.parent != root.resolve():  # "<xx>/<key>.best_config", nothing else
                raise ValueError(f"{PIN_ENV}: refusing a pinned entry outside the cache: {rel!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        yield root


def best_configs(root: Path) -> dict[str, str]:
    """Inductor's autotune cache entries under `root` (a hermetic cache folder), by relative path:
    what a later run needs to pin these picks (hermetic(pin=...))."""
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(Path(root).rglob(BEST_CONFIG))}


@functools.cache
def _pins(source: str) -> dict[str, dict]:
    """Each case's `best_configs` in the results file `source`, read once per process."""
    try:
        doc = json.loads(Path(source).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{PIN_ENV}={source!r}: not a readable results file ({exc})") from None
    return {b["extra_info"]["case"]: (b["extra_info"].get("codegen") or {}).get("best_configs") or {}
            for b in doc.get("benchmarks", []) if "case" in b.get("extra_info", {})}


def pins_for(case_id: str) -> tuple[dict[str, str] | None, str | None]:
    """(best_configs, source file) recorded for `case_id` in the results file named by
    MLPBENCH_PIN_AUTOTUNE, or (None, None) when it is unset or holds no entries for the case."""
    import os

    source = os.environ.get(PIN_ENV)
    found = _pins(source).get(case_id) if source else None
    return (found, source) if found else (None, None)


def _autotuners() -> list:
    """Every Triton kernel object Inductor has loaded in this process (CachingAutotuner instances)."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    modules = list(getattr(PyCodeCache, "modules", [])) + list(getattr(PyCodeCache, "modules_no_attr", {}).values())
    found = {}
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, CachingAutotuner):
                found[id(value)] = value
    return list(found.values())


def snapshot() -> set[int]:
    """The kernels loaded so far; `kernels(since=...)` returns only those loaded after."""
    try:
        return {id(k) for k in _autotuners()}
    except ImportError:  # no Triton: nothing Inductor generates is a Triton kernel
        return set()


def _config(launcher_config) -> dict:
    out = dict(getattr(launcher_config, "kwargs", {}) or {})
    for key in ("num_warps", "num_stages", "num_ctas"):
        if getattr(launcher_config, key, None) is not None:
            out[key] = getattr(launcher_config, key)
    return out


def describe_kernel(k) -> dict:
    """One kernel's record: name, source hash, the configuration in use, where it came from."""
    fn = getattr(k, "fn", None)
    source = getattr(fn, "src", None) or ""
    launchers = getattr(k, "launchers", None) or []
    info = dict(getattr(k, "autotune_cache_info", None) or {})
    meta = getattr(k, "inductor_meta", None) or {}
    candidates = info.get("num_configs") or len(getattr(k, "compile_results", None) or []) or None
    return {
        "name": meta.get("kernel_name") or getattr(fn, "__name__", type(k).__name__),
        "source_sha256": hashlib.sha256(source.encode()).hexdigest()[:16] if source else None,
        # One launcher remains once the first call autotuned; several mean it has not run yet.
        "config": _config(launchers[0].config) if len(launchers) == 1 else None,
        "candidates": candidates,
        "autotune_cache_state": info.get("autotune_cache_state"),
        "coordinate_descent": bool(meta.get("coordinate_descent_tuning")),
        "size_hints": {str(a): b for a, b in (getattr(k, "size_hints", None) or {}).items()},
    }


def settings() -> dict:
    from torch._inductor import config

    out = {}
    for name in SETTINGS:
        obj = config
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        out[name] = obj if isinstance(obj, (bool, int, float, str, type(None))) else repr(obj)
    return out


def kernels(since: set[int]) -> list[dict]:
    """The Triton kernels loaded since `since` (a `snapshot()`), sorted by name."""
    try:
        # Max-autotune also loads the GEMM template candidates it benchmarks; they keep Inductor's
        # placeholder name and are not kernels of the compiled graph.
        new = [k for k in _autotuners() if id(k) not in since and "Placeholder" not in describe_kernel(k)["name"]]
    except ImportError:
        return []
    return sorted((describe_kernel(k) for k in new), key=lambda d: d["name"])


def cache_hits() -> int:
    """Compiles this process served from Inductor's FX graph cache or AOTAutograd's cache so far."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"]) + int(counters["aot_autograd"]["autograd_cache_hit"])


def record(since: set[int], mode: str | None, root: Path | None = None, pinned_from: str | None = None,
           seeded: bool | None = None) -> dict:
    """The codegen record of a compile that happened after `since` (in the hermetic cache `root`):
    kernels, settings, and the autotuner's cache entries that let a later run pin its picks.
    `seeded`: None where no worker compiled the case ahead; else whether this compile read what it
    left (`precompiled`: true, a cache hit; false, compiled again here).
    Neither those entries nor `pinned_from` (the results file a pinned run started from) enter the
    fingerprint: a pinned run that made the same picks has the same code."""
    out = {"kernels": kernels(since), "settings": settings(), "mode": mode or "default"}
    if root is not None:
        out["best_configs"] = best_configs(root)
    if pinned_from:
        out["pinned_from"] = pinned_from
    if seeded is not None:  # a worker of this run compiled it (mlpbench/compile/precompile.py): read here, or missed
        out["precompiled"] = seeded
    if not out["kernels"]:
        out["note"] = "no Triton kernel: Inductor generated C++ (a CPU run) or called libraries only"
    out["fingerprint"] = fingerprint({"kernels": [{k: d[k] for k in DECIDES} for d in out["kernels"]],
                                      "settings": out["settings"], "mode": out["mode"]})
    return out
