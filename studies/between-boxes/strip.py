"""Copy `mlpbench run` result files into this study, without what the A/A does not read.

    python studies/between-boxes/strip.py OUT_DIR RUN.json ...   # writes OUT_DIR/aa-1.json, aa-2.json, ... in order

Dropped from each benchmark: pytest-benchmark's own statistics, parameters and options (the suite's
figures are in `extra_info`), and from `extra_info` the profile's kernel names and per-kernel times
and the single-call host samples. Kept: every other record field (device samples, back-to-back host
rounds, box, codegen record and fingerprint, kernels per call, error, method strings), and the
documents' machine_info, commit_info and mlpbench_run as the runs wrote them.
"""

import json
import sys
from pathlib import Path

DROP = ("stats", "params", "options", "group")
DROP_INFO = ("kernel_names", "kernel_times_s", "kernel_times_in_order_s", "host_time_samples_s")


def main(out: str, *files: str) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(files, start=1):
        doc = json.loads(Path(name).read_text())
        for b in doc["benchmarks"]:
            for key in DROP:
                b.pop(key, None)
            for key in DROP_INFO:
                b["extra_info"].pop(key, None)
        doc["stripped_from"] = Path(name).name
        Path(out, f"aa-{k}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
