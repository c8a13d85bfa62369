"""The result record: every field a measurement of one case can carry, with its unit and meaning, once.

pytest-benchmark's `extra_info` is a Record's `extra_info()`; the ASV suite's cache entries hold the
same fields, and its `track_*` benchmarks (METRICS below) read them. The results reader
(mlpbench/results.py) reads records back by these names. Importing this module imports no torch.

A field is added here or nowhere: `Record.set` refuses a name this module does not define.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


def _f(unit: str, meaning: str):
    return field(default=None, metadata={"unit": unit, "meaning": meaning})


@dataclass
class Record:
    # --- what was measured
    case: str = _f("", "case id, op/variant/dtype/shape (mlpbench/registry.py)")
    op: str = _f("", "the op (a module of mlpbench/ops/)")
    variant: str = _f("", "the implementation: eager, compiled, liger, ours, ...")
    dtype: str = _f("", "fp32, bf16 or fp16")
    shape: dict = _f("", "the shape's dims, e.g. {t: 8192, d: 768, h: 3072}")
    shape_id: str = _f("", "the shape's dims as one id, e.g. t8192-d768-h3072")
    tier: str = _f("", "the tier the run selected: quick, standard or full")
    device: str = _f("", "cuda or cpu")
    gpu: str = _f("", "the GPU's name (GPU runs only)")
    shard: int = _f("", "which process of a sharded run measured it (mlpbench run --shards)")
    box_id: int = _f("", "the box that measured it (envinfo.box_id; 0: unknown): host time is compared "
                         "between runs of one box only")
    threads: int = _f("threads", "torch's intra-op threads while the case was built and timed (on a CPU, "
                                 "runner.cpu_threads(): a core is left for the harness)")
    flops: int = _f("FLOP", "floating-point operations per call (0 for memory-bound ops)")
    bytes: int = _f("B", "the fewest bytes one call must move through device memory")
    max_rel_err: float = _f("", "‖out − ref‖ / ‖ref‖ against float64, before any timing")
    tolerance: float = _f("", "the largest max_rel_err the dtype allows")
    source: str = _f("", "where the implementation came from, with versions")
    note: str = _f("", "what a reader of this record must know (e.g. a variant that overwrites its inputs)")
    # --- what torch.compile generated (compiler variants; mlpbench/compile/codegen.py)
    codegen: dict = _f("", "per Triton kernel: name, source hash, launch configuration, where the pick came "
                           "from; Inductor's settings and the compile mode")
    codegen_fingerprint: int = _f("", "one integer for the codegen record (equal fingerprints: same code)")
    # --- device time (GPU)
    device_time_s: float = _f("s", "median device time per call")
    device_time_samples_s: list = _f("s", "device time per call, one sample per CUDA-graph replay")
    device_calls_per_replay: int = _f("calls", "calls captured in one CUDA graph")
    input_sets: int = _f("sets", "input sets the calls rotate through, to keep them out of L2")
    timing_method: str = _f("", "how device and host time were taken")
    peak_memory_bytes: int = _f("B", "peak device memory allocated during one call, above what was held before")
    # --- host time
    host_time_s: float = _f("s", "median host time of one call, synchronised before and after")
    host_time_samples_s: list = _f("s", "host time of single synchronised calls (ASV; pytest-benchmark: at most "
                                        "100 of its rounds, evenly spaced)")
    host_time_back_to_back_s: float = _f("s", "host time per call with calls queued back to back (GPU)")
    host_time_back_to_back_samples_s: list = _f("s", "one sample per round of queued calls")
    host_time_back_to_back_method: str = _f("", "how back-to-back host time was taken")
    host_time_back_to_back_vs_eager: float = _f("×", "back-to-back host time over the op's eager case of this "
                                                     "dtype and shape, rounds of the two interleaved (GPU, "
                                                     "mlpbench run --paired): median of the pairs' ratios")
    host_time_back_to_back_vs_eager_samples: list = _f("×", "one ratio per pair of interleaved rounds")
    host_time_back_to_back_vs_eager_method: str = _f("", "how the paired ratio was taken")
    # --- launch structure (profiler pass after timing, GPU)
    kernels_per_call: float = _f("kernels", "compute kernels one call launches (no memsets or memcpys)")
    kernel_names: list = _f("", "one call's compute kernels, in launch order")
    memsets_per_call: float = _f("kernels", "memsets one call launches")
    kernel_times_s: dict = _f("s", "device time per call by kernel name")
    kernel_times_in_order_s: list = _f("s", "device time per call of each launch, aligned with kernel_names")
    profiled_host_time_per_call_s: float = _f("s", "wall time per call under the profiler (inflated by it)")
    structure_problems: list = _f("", "where the launches differ from mlpbench/expectations.toml")
    profile_error: str = _f("", "why the profiler pass failed, when it did")
    # --- the suite's own cost (runner.Phases): wall time of measuring this case, and its phases
    wall_s: float = _f("s", "wall time of the case, from its skip checks to its last measurement")
    phase_check_s: float = _f("s", "building the case and its float64 check (compiled variants compile here)")
    phase_device_s: float = _f("s", "device timing and peak memory (GPU)")
    phase_host_s: float = _f("s", "host timing: single synchronised calls and calls back to back")
    phase_profile_s: float = _f("s", "the profiler pass (GPU)")

    def set(self, **values) -> "Record":
        for name, value in values.items():
            if name not in NAMES:
                raise KeyError(f"{name!r} is not a record field; fields are defined in mlpbench/record.py")
            setattr(self, name, value)
        return self

    def extra_info(self) -> dict:
        """The fields that were set, as pytest-benchmark's extra_info and the ASV cache hold them."""
        return {k: v for k, v in asdict(self).items() if v is not None}


NAMES = frozenset(f.name for f in fields(Record))
UNITS = {f.name: f.metadata["unit"] for f in fields(Record)}
MEANINGS = {f.name: f.metadata["meaning"] for f in fields(Record)}


@dataclass(frozen=True)
class Metric:
    """An ASV benchmark method: the record field it reports, its unit, and how the gate treats it."""

    unit: str  # as ASV shows it
    meaning: str
    field: str | None = None  # the record field it reads (None: the compile probes' own figures)
    samples: bool = False  # returns {"samples": ..., "number": 1}, so ASV keeps samples
    # "yes": a slowdown fails the nightly; "no": reported only; "without device time": gated only
    # where the case has no device time (host time on a CPU).
    gated: str = "yes"
    # Host time of a case that has device time: the host's launch path, whose speed differs between
    # boxes of one GPU model far more than the GPU's does. The gate compares it between runs of one
    # box only (mlpbench/judging/gate.py), with a floor and a between-run noise of its own.
    one_box: bool = False


METRICS = {
    "track_device_time": Metric("seconds", "device time per call", "device_time_samples_s", samples=True),
    "track_peak_memory": Metric("bytes", "peak device memory of one call", "peak_memory_bytes"),
    "track_kernels_per_call": Metric("kernels", "compute kernels one call launches", "kernels_per_call"),
    # What an eager loop pays per call: gated, on one box. A GPU figure only (on a CPU nothing
    # overlaps and the synchronised host time says it).
    "track_host_time_back_to_back": Metric("seconds", "host time per call, calls queued back to back",
                                           "host_time_back_to_back_samples_s", samples=True, one_box=True),
    # A single call between two synchronisations holds the launch latency and the wait for the GPU as
    # well as the host's own work, and in ASV's forked processes it moves between runs of the same
    # code far more than device time does: gated only where it is the only time there is (a CPU).
    "track_host_time": Metric("seconds", "host time per synchronised call", "host_time_samples_s", samples=True,
                              gated="without device time", one_box=True),
    "time_host": Metric("seconds", "host time per call (ASV's timer, benchmark versions before v4)",
                        gated="without device time", one_box=True),
    # Not a measurement: which box measured the case's figures (envinfo.box_id). The gate reads it to
    # compare host time between runs of one box only, never judges it.
    "track_box_id": Metric("box", "the box that measured the case (mlpbench/envinfo.py)", "box_id", gated="no"),
    # Not a speed: changes when Inductor generates other code or picks another configuration. The
    # gate reads it to attribute a compiled case's move to code generation.
    "track_codegen": Metric("fingerprint", "what Inductor generated, as one integer (mlpbench/compile/codegen.py)",
                            "codegen_fingerprint", gated="no"),
    "track_cold_compile": Metric("seconds", "torch.compile's cold compile, empty caches", gated="no"),
    "track_recompile_new_shape": Metric("seconds", "recompile for a new token count (static shapes)", gated="no"),
    "track_recompile_new_shape_dynamic": Metric("seconds", "recompile for a new token count (dynamic=True)",
                                                gated="no"),
    "track_total": Metric("seconds", "ten changing token counts in a row, compilation included", gated="no"),
}
