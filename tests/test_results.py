"""The one results reader (mlpbench/results.py): what each point measures comes from the file's
structure and the registry, never from taking a case id apart."""

import json

import pytest

from mlpbench import pages, registry, report, results, tables

COLS = ["result", "params", "version", "samples"]


def _asv(folder, results_by_name):
    path = folder / "m" / "aaaaaaaa-existing.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"commit_hash": "a" * 40, "date": 1, "params": {"machine": "m"},
                                "result_columns": COLS, "results": results_by_name}))
    return {p.param: p for _, p in results.asv_points(folder)}


def test_op_class_points_take_their_fields_from_the_class_and_the_axes(tmp_path):
    axes = [["'eager'", "'compiled'"], ["'bf16'"], ["'t8192-d768-h3072'", "'t3-d5-h7'"]]
    points = _asv(tmp_path, {"standard.MlpDevice.track_device_time": [[1.0, 2.0, 3.0, 4.0], axes, "v4", None]})
    p = points["mlp/compiled/bf16/t8192-d768-h3072"]
    assert (p.op, p.variant, p.dtype, p.shape_id, p.compiles) == ("mlp", "compiled", "bf16", "t8192-d768-h3072", True)
    # a shape the registry no longer has keeps its fields: they come from the axes
    gone = points["mlp/eager/bf16/t3-d5-h7"]
    assert (gone.op, gone.variant, gone.shape_id, gone.compiles) == ("mlp", "eager", "t3-d5-h7", False)


def test_one_id_parameters_are_looked_up_in_the_registry(tmp_path):
    ids = ["'gelu_mul/ours/bf16/t8192-h3072'", "'linear/compiled/bf16/t1024-i32-o64'",
           "'mlp/compiled-dynamic/bf16/d768-h3072'", "'mlp/liger/bf16/d768-h3072'", "'mlp/eager/bf16/t3-d5-h7'"]
    points = _asv(tmp_path, {"asv_cases.Cases.track_total": [[1.0] * len(ids), [ids], "v3", None]})
    assert points["gelu_mul/ours/bf16/t8192-h3072"].op == "gelu_mul"
    assert points["linear/compiled/bf16/t1024-i32-o64"].compiles
    dynamic = points["mlp/compiled-dynamic/bf16/d768-h3072"]  # a changing-shapes run: no registry case
    assert (dynamic.op, dynamic.variant, dynamic.dtype, dynamic.shape_id, dynamic.compiles) == (
        "mlp", "compiled-dynamic", "bf16", "d768-h3072", True)
    assert not points["mlp/liger/bf16/d768-h3072"].compiles
    unknown = points["mlp/eager/bf16/t3-d5-h7"]  # an id the registry does not know: no fields guessed
    assert (unknown.op, unknown.variant, unknown.dtype, unknown.shape_id) == (None, None, None, None)


# Every benchmark layout ASV's history holds, with parameters as its files spell them: one-id classes
# of the old asv_cases module, compile-time and changing-shapes ids, and op classes of three axes.
HISTORY = {
    "asv_cases.GeluMulDevice.track_device_time": [["'gelu_mul/eager/bf16/t8192-h3072'",
                                                   "'gelu_mul/compiled/bf16/t8192-h3072'"]],
    "asv_cases.MlpHost.time_host": [["'mlp/eager/fp32/t8192-d768-h3072'", "'mlp/liger/bf16/t8192-d768-h3072'"]],
    "asv_cases.GeluMulTrainDevice.track_peak_memory": [["'gelu_mul_train/eager/bf16/t8192-h3072'"]],
    "asv_cases.ChangingShapes.track_total": [["'mlp/compiled/bf16/d768-h3072'",
                                              "'mlp/compiled-dynamic/bf16/d768-h3072'"]],
    "standard.CompileTime.track_cold_compile": [["'linear/compiled/bf16/t1024-i32-o64'",
                                                 "'mlp/compiled/bf16/t8192-d768-h3072'"]],
    "standard.CompileTimeDynamic.track_recompile_new_shape_dynamic": [["'mlp/compiled/bf16/t8192-d768-h3072'"]],
    "standard.GeluMulDevice.track_device_time": [["'eager'", "'compiled'"], ["'fp32'", "'bf16'"],
                                                 ["'t333-h3000'", "'t8192-h3072'"]],
    "standard.SwigluMlpHost.track_host_time_back_to_back": [["'eager'"], ["'bf16'"], ["'t8192-d4096-h14336'"]],
    "standard.GemmaModelCodegen.track_codegen": [["'compiled'", "'ourscompiled'"], ["'bf16'"],
                                                 ["'t2048-d3072-h24576-l2'"]],
    "quick.GeluMulTrainDevice.track_kernels_per_call": [["'eager'", "'compiled'"], ["'fp32'"], ["'t333-h3000'"]],
}


def test_every_point_of_each_history_layout_knows_what_it_measures(tmp_path):
    rows = {}
    for name, params in HISTORY.items():
        n = 1
        for axis in params:
            n *= len(axis)
        rows[name] = [[1e-4] * n, params, "v3", [None] * n]
    points = _asv(tmp_path, rows)
    every = [p for _, p in results.asv_points(tmp_path)]
    assert len(every) == 23
    assert [p for p in every if not (p.op and p.variant and p.dtype and p.shape_id)] == []
    assert points["mlp/compiled-dynamic/bf16/d768-h3072"].variant == "compiled-dynamic"
    assert points["gemma_model/ourscompiled/bf16/t2048-d3072-h24576-l2"].compiles


def test_an_unreadable_asv_file_is_skipped_by_name(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "junk.json").write_text("{")
    with pytest.warns(UserWarning, match="junk.json"):
        assert results.asv_points(tmp_path) == []
    assert results.asv_points(tmp_path / "missing") == []


def _record(op, variant, shape_id, dims, device_s, flops, nbytes, dtype="bf16"):
    return {"stats": {"median": device_s * 2}, "extra_info": {
        "case": f"{op}/{variant}/{dtype}/{shape_id}", "op": op, "variant": variant, "dtype": dtype,
        "shape": dims, "shape_id": shape_id, "device_time_s": device_s, "host_time_s": device_s * 2,
        "flops": flops, "bytes": nbytes}}


def test_a_record_without_its_dims_gets_the_registrys():
    shape = registry.OPS["mlp"].shapes[1]
    rec = _record("mlp", "eager", shape.id, None, 1e-4, 1, 1)
    del rec["extra_info"]["shape"]
    run = results.PytestRun(results.Path("r.json"), "m", None, "", {}, [rec])
    (row,) = results.pytest_records([run]).to_dict("records")
    assert row["shape"] == shape.as_dict() and results.tokens(row["shape"]) == shape.as_dict()["t"]


def test_new_ops_flow_through_tables_report_and_pages(tmp_path):
    """SwiGLU (compute-bound) and SiLU·mul (memory-bound) need no change outside their op modules."""
    box = tmp_path / "results" / "pytest" / "box"
    box.mkdir(parents=True)
    recs = []
    for op, shape_id, dims, flops, nbytes in (
            ("swiglu_mlp", "t8192-d4096-h14336", {"t": 8192, "d": 4096, "h": 14336}, 6 * 8192 * 4096 * 14336, 10**9),
            ("silu_mul", "t8192-h14336", {"t": 8192, "h": 14336}, 0, 3 * 2 * 8192 * 14336)):
        for k, variant in enumerate(registry.OPS[op].variant_names):
            recs.append(_record(op, variant, shape_id, dims, 1e-3 / (k + 1), flops, nbytes))
    ceilings = {"copy_bandwidth_Bps": 4e12, "gemm_bf16_flops": 8e14}
    (box / "20990101T000000Z-standard-1.json").write_text(json.dumps({
        "machine_info": {"mlpbench": {"machine": "box", "ceilings": ceilings}},
        "datetime": "2099-01-01T00:00:00", "benchmarks": recs}))
    wide = report.load(tmp_path / "results").records
    rates = wide.set_index(["op", "variant"])
    assert rates.loc[("swiglu_mlp", "ours"), "tflops"] > 0 and rates[["tflops"]].loc["silu_mul"].isna().all().all()
    assert "TFLOP/s" in tables.variant_table(wide, "swiglu_mlp").headers[2]
    assert "GB/s" in tables.variant_table(wide, "silu_mul").headers[2]
    page = pages.machine_page(tmp_path / "results", tmp_path / "pages", "box")
    peers = page.split("## Our kernels against the faster peer")[1].split("\n## ")[0]
    assert "### swiglu_mlp" in peers and "### silu_mul" in peers
    report.write(tmp_path / "results", tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "### swiglu_mlp on box" in md and "### silu_mul on box" in md
