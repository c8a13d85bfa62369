import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlpbench import registry, shards

ROOT = Path(__file__).resolve().parent.parent


def test_shards_partition_the_selection():
    cases = registry.select("standard")
    parts = [shards.pick(cases, f"{k}/3") for k in range(3)]
    ids = [c.id for part in parts for c in part]
    assert sorted(ids) == sorted(c.id for c in cases) and len(ids) == len(set(ids))


@pytest.mark.parametrize("spec", ["2/2", "x/2", "1"])
def test_bad_shard_specs_are_named(spec):
    with pytest.raises(ValueError, match="--shard"):
        shards.pick([1, 2], spec)


@pytest.mark.slow
def test_a_sharded_run_merges_into_one_result_set(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mlpbench.cli", "run", "--tier", "quick", "--op", "gelu_mul", "--variant", "eager",
         "--shards", "2", "--results", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (result,) = tmp_path.rglob("*.json")  # the outcomes are inside it, not in a file of their own
    doc = json.loads(result.read_text())
    cases = sorted(b["extra_info"]["case"] for b in doc["benchmarks"])
    assert cases == sorted(c.id for c in registry.select("quick", ops=["gelu_mul"], variants=["eager"]))
    assert {b["extra_info"]["shard"] for b in doc["benchmarks"]} == {0, 1}
    assert sorted(o["case"] for o in doc["outcomes"]) == cases and {o["shard"] for o in doc["outcomes"]} == {0, 1}
    assert len(doc["machine_info"]["mlpbench_shards"]) == 2
    assert not list(tmp_path.rglob(".*shard*"))  # the shards' own files are gone


def test_bad_shards_value_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "run", "--shards", "two", "--results", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--shards 'two'" in proc.stderr
