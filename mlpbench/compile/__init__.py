"""torch.compile: codegen fingerprints, compile probes, precompiling."""
