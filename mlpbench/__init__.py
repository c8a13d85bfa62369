"""mlpbench: benchmarks of a transformer MLP's building blocks on GPUs (see README.md).

Importing the package imports nothing and changes no environment variable: reading results
(`mlpbench check`, `mlpbench report`) needs no torch, and the process-wide settings that torch,
Triton and huggingface_hub read are set by the entry points (mlpbench/environment.py).

Layout: the measurement core sits at the top (registry, ops/, workloads, runner, timing, profiling,
record, results, tables), with the entry points and orchestration (cli, run_suite, nightly, shards,
results_store, pytest_plugin). Subpackages hold what is built on it:
  asv/      the ASV front end: benchmark classes and tiers, setup_cache measuring, runs, plugins, dashboard
  judging/  verdicts: the gate, `mlpbench check`, same-box confirmation, A/B, between-run noise, detection
  compile/  torch.compile: codegen fingerprints and records, compile probes, precompiling
  report/   the report: load, compute, render
"""

__version__ = "0.9.0"
