"""What Inductor generated, recorded per compiled case; compiled cases built hermetically."""

import json
import multiprocessing
import os
from types import SimpleNamespace

import pytest

from mlpbench.compile import codegen, codegen_record
from mlpbench import registry, runner


def _fake_kernel(name, block, warps, src="def k(): pass", state="miss"):
    config = SimpleNamespace(kwargs={"XBLOCK": block}, num_warps=warps, num_stages=1, num_ctas=None)
    return SimpleNamespace(fn=SimpleNamespace(src=src, __name__=name), launchers=[SimpleNamespace(config=config)],
                           autotune_cache_info={"autotune_cache_state": state, "num_configs": 4},
                           inductor_meta={"kernel_name": name}, size_hints={"x": 1 << 24})


def test_a_kernel_is_described_by_its_name_source_pick_and_where_the_pick_came_from():
    d = codegen.describe_kernel(_fake_kernel("triton_poi_fused_gelu_mul_0", 1024, 4))
    assert d["name"] == "triton_poi_fused_gelu_mul_0" and len(d["source_sha256"]) == 16
    assert d["config"] == {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}
    assert d["candidates"] == 4 and d["autotune_cache_state"] == "miss"


def _record(*kernels):
    out = {"kernels": [codegen.describe_kernel(k) for k in kernels], "settings": {"max_autotune": False},
           "mode": "default"}
    return out


def test_differences_say_what_inductor_chose_instead():
    base = _record(_fake_kernel("triton_poi_fused_gelu_mul_0", 1024, 4))
    head = _record(_fake_kernel("triton_poi_fused_gelu_mul_0", 512, 8))
    assert codegen_record.differences(base, head) == [
        "triton_poi_fused_gelu_mul_0: Inductor chose XBLOCK 512 instead of 1024, num_warps 8 instead of 4"]
    other = _record(_fake_kernel("triton_poi_fused_gelu_mul_0", 1024, 4, src="def k(): return 1"))
    assert codegen_record.differences(base, other) == ["triton_poi_fused_gelu_mul_0: its Triton source changed"]
    assert "record is not in" in codegen_record.differences(None, head)[0]


def test_the_fingerprint_follows_the_code_not_where_a_pick_was_read_from():
    def fp(kernel):
        k = codegen.describe_kernel(kernel)
        return codegen_record.fingerprint({"kernels": [{key: k[key] for key in codegen_record.DECIDES}], "settings": {}})

    base = fp(_fake_kernel("k", 1024, 4))
    assert fp(_fake_kernel("k", 1024, 4, state="hit")) == base
    assert fp(_fake_kernel("k", 512, 4)) != base
    assert 0 <= base < 2 ** codegen_record.FINGERPRINT_BITS  # exact in ASV's float64


def test_records_are_stored_by_fingerprint_in_one_file_and_read_back(tmp_path):
    rec = _record(_fake_kernel("k", 1024, 4)) | {"fingerprint": 12345}
    path = codegen_record.store(rec, tmp_path)
    assert path == tmp_path / "codegen.json"
    doc = json.loads(path.read_text())
    assert doc == {"version": codegen_record.VERSION, "records": {"12345": rec}}
    # ASV hands the fingerprint back as a float
    assert codegen_record.load(12345.0, tmp_path) == rec and codegen_record.load(1, tmp_path) is None
    assert codegen_record.load(12345, tmp_path / "nowhere") is None
    assert not [p.name for p in tmp_path.iterdir() if p.name != "codegen.json"]  # no temporary left


def test_a_store_merges_into_the_file_and_keeps_a_record_it_already_holds(tmp_path):
    first = _record(_fake_kernel("k", 1024, 4)) | {"fingerprint": 1}
    second = _record(_fake_kernel("k", 512, 8)) | {"fingerprint": 2}
    codegen_record.store(first, tmp_path)
    codegen_record.store(second, tmp_path)
    # the same fingerprint again, read from a cache this time: the first record stays
    again = first | {"kernels": [dict(first["kernels"][0], autotune_cache_state="hit")]}
    codegen_record.store(again, tmp_path)
    assert codegen_record.read_all(tmp_path) == {"1": first, "2": second}
    assert codegen_record.load(1, tmp_path) == first
    # a loaded record is a copy: changing it changes neither the file nor the next load
    codegen_record.load(2, tmp_path)["kernels"].clear()
    assert codegen_record.load(2, tmp_path) == second


def test_merge_adds_what_is_missing_and_never_replaces():
    kept = {"1": {"fingerprint": 1, "note": "kept"}}
    new = {"1": {"fingerprint": 1, "note": "new"}, "3": {"fingerprint": 3}}
    assert codegen_record.merge(kept, new) == {"1": {"fingerprint": 1, "note": "kept"}, "3": {"fingerprint": 3}}
    assert codegen_record.merge({}, new) == new and codegen_record.merge(kept, {}) == kept


def _store_many(root, start):
    for fp in range(start, start + 20):
        codegen_record.store({"fingerprint": fp, "kernels": [], "settings": {}}, root)


def test_processes_storing_at_once_lose_no_record(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_store_many, args=(tmp_path, 100 * k)) for k in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert sorted(map(int, codegen_record.read_all(tmp_path))) == [100 * k + i for k in range(4) for i in range(20)]


def test_a_file_of_another_version_is_refused_not_overwritten(tmp_path):
    path = tmp_path / "codegen.json"
    path.write_text(json.dumps({"version": 99, "records": {}}))
    with pytest.raises(ValueError, match="codegen file version 99, this reader knows 1"):
        codegen_record.store({"fingerprint": 5}, tmp_path)
    with pytest.raises(ValueError, match="codegen file version 99"):
        codegen_record.read_all(tmp_path)
    assert json.loads(path.read_text())["version"] == 99
    assert codegen_record.load(5, tmp_path) is None  # the gate says the record is missing
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        codegen_record.store({"fingerprint": 5}, tmp_path)


@pytest.mark.slow
def test_a_compiled_case_is_compiled_in_fresh_caches_and_its_codegen_recorded():
    case = registry.case_by_id("gelu_mul/compiled/fp32/t333-h3000")
    seen = {}
    real_check = runner.workloads.check

    def check(wl, *a, **k):
        seen["cache"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        return real_check(wl, *a, **k)

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # a run's own, or Inductor's default
    mp = pytest.MonkeyPatch()
    mp.setattr(runner.workloads, "check", check)
    try:
        p = runner.prepare(case, "cpu")
    finally:
        mp.undo()
    assert seen["cache"] and seen["cache"] != before and os.path.basename(os.path.dirname(seen["cache"])).startswith(
        "mlpbench-inductor-")
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != seen["cache"]  # only that case compiled there
    assert p.codegen["mode"] == "default" and "settings" in p.codegen
    record = runner.describe(p, "quick")
    # on a CPU Inductor writes C++: no Triton kernel, so nothing for the gate to fingerprint
    assert record.codegen == p.codegen and record.codegen_fingerprint is None
    assert runner.prepare(registry.case_by_id("gelu_mul/eager/fp32/t333-h3000"), "cpu").codegen is None


def test_pinned_autotune_entries_seed_the_fresh_cache_and_are_read_back(tmp_path):
    entry = '{"XBLOCK": 1024, "num_warps": 4, "num_stages": 1, "configs_hash": "abc"}'
    with codegen.hermetic({"ab/k1.best_config": entry}) as root:
        assert str(root) == os.environ["TORCHINDUCTOR_CACHE_DIR"]
        assert (root / "ab" / "k1.best_config").read_text() == entry
        (root / "cd").mkdir()
        (root / "cd" / "k2.best_config").write_text("{}")  # as Inductor writes one after autotuning
        (root / "cd" / "k2.py").write_text("")
        assert codegen.best_configs(root) == {"ab/k1.best_config": entry, "cd/k2.best_config": "{}"}
    with pytest.raises(ValueError, match="outside the cache: '../../escape.best_config'"):
        with codegen.hermetic({"../../escape.best_config": "{}"}):
            pass


def test_pins_come_from_the_results_file_named_by_the_environment(tmp_path, monkeypatch):
    import json

    doc = {"benchmarks": [{"extra_info": {"case": "mlp/compiled/bf16/t1-d768-h3072",
                                          "codegen": {"best_configs": {"ab/k.best_config": "{}"}}}},
                          {"extra_info": {"case": "mlp/eager/bf16/t1-d768-h3072"}}]}
    (tmp_path / "run.json").write_text(json.dumps(doc))
    monkeypatch.delenv(codegen.PIN_ENV, raising=False)
    assert codegen.pins_for("mlp/compiled/bf16/t1-d768-h3072") == (None, None)
    monkeypatch.setenv(codegen.PIN_ENV, str(tmp_path / "run.json"))
    assert codegen.pins_for("mlp/compiled/bf16/t1-d768-h3072") == ({"ab/k.best_config": "{}"},
                                                                   str(tmp_path / "run.json"))
    assert codegen.pins_for("mlp/eager/bf16/t1-d768-h3072") == (None, None)
    monkeypatch.setenv(codegen.PIN_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="MLPBENCH_PIN_AUTOTUNE=.*missing.json.*not a readable results file"):
        codegen.pins_for("mlp/compiled/bf16/t1-d768-h3072")


def test_a_pinned_record_keeps_its_entries_and_source_but_not_in_its_fingerprint(tmp_path):
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "k.best_config").write_text("{}")
    plain = codegen.record(codegen.snapshot(), None)
    pinned = codegen.record(codegen.snapshot(), None, tmp_path, pinned_from="results/run.json")
    assert pinned["best_configs"] == {"ab/k.best_config": "{}"} and pinned["pinned_from"] == "results/run.json"
    assert pinned["fingerprint"] == plain["fingerprint"]
