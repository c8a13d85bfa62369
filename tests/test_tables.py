import csv
import io
import json

import pandas as pd
import pytest

from mlpbench import results, tables


def _df(host_by_tokens):
    rows = []
    for t, (eager, compiled) in host_by_tokens.items():
        for variant, host in (("eager", eager), ("compiled", compiled)):
            rows.append({"op": "mlp", "dtype": "bf16", "variant": variant, "shape_id": f"t{t}-d768-h3072",
                         "shape": {"t": t, "d": 768, "h": 3072}, "host_time_s": host})
    return pd.DataFrame(rows)


def test_crossover_is_where_compiled_starts_to_win_for_good():
    df = _df({1: (157e-6, 241e-6), 16: (160e-6, 170e-6), 64: (170e-6, 150e-6), 1024: (200e-6, 180e-6),
              8192: (286e-6, 211e-6)})
    assert tables.overhead_crossover(df, "mlp") == 64


def test_no_crossover_when_compiled_never_wins_at_the_largest():
    df = _df({1: (157e-6, 241e-6), 64: (170e-6, 150e-6), 8192: (286e-6, 300e-6)})
    assert tables.overhead_crossover(df, "mlp") is None


def test_crossover_reads_back_to_back_host_time_where_records_have_it():
    # synchronised single calls say compiled never wins; back to back it wins from 8192 tokens up
    df = _df({1: (157e-6, 241e-6), 4096: (160e-6, 241e-6), 8192: (286e-6, 300e-6), 16384: (500e-6, 520e-6)})
    b2b = {1: (157e-6, 241e-6), 4096: (160e-6, 241e-6), 8192: (286e-6, 230e-6), 16384: (520e-6, 450e-6)}
    df["host_time_back_to_back_s"] = [b2b[s["t"]][v == "compiled"] for s, v in zip(df["shape"], df["variant"])]
    df["device_time_s"] = df["host_time_back_to_back_s"] * 0.9
    assert tables.overhead_crossover(df, "mlp") == 8192
    table = tables.overhead_rows(df, "mlp").markdown()
    assert "host, back to back: eager / compiled (µs)" in table
    assert "| 8192 | 257.4 / 207.0 | 286.0 / 230.0 | 286.0 / 300.0 |" in table
    # older records without the back-to-back figure in the same frame do not mix into it
    old = _df({8192: (100e-6, 900e-6)})
    assert tables.overhead_crossover(pd.concat([df, old]), "mlp") == 8192


def test_speedup_over_eager_pairs_cases_by_machine_op_dtype_and_shape(tmp_path):
    def rec(variant, dev):
        return {"stats": {"median": dev * 2}, "extra_info": {
            "case": f"gelu_mul/{variant}/bf16/t8-h8", "op": "gelu_mul", "variant": variant, "dtype": "bf16",
            "shape_id": "t8-h8", "device_time_s": dev, "host_time_s": dev * 2, "flops": 0, "bytes": 384}}

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"machine_info": {"mlpbench": {"machine": "m"}},
                                "benchmarks": [rec("eager", 2e-6), rec("ours", 1e-6)]}))
    df = tables.load_pytest_json([path]).set_index("variant")
    assert df.loc["ours", "speedup_vs_eager"] == 2.0
    assert df.loc["ours", "gbps"] == 384 / 1e-6 / 1e9


def _record(variant, host, host_iqr, device_samples=None, op="linear", shape="t1024-i32-o64"):
    info = {"case": f"{op}/{variant}/fp32/{shape}", "op": op, "variant": variant, "dtype": "fp32",
            "shape_id": shape, "host_time_s": host, "flops": 4_194_304, "bytes": 400_000}
    if device_samples:
        info |= {"device_time_s": sorted(device_samples)[len(device_samples) // 2],
                 "device_time_samples_s": device_samples}
    return {"stats": {"median": host, "iqr": host_iqr}, "extra_info": info}


def _load(tmp_path, records):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {"mlpbench": {"machine": "m"}}, "benchmarks": records}))
    return tables.load_pytest_json([path])


def test_a_figure_spread_wider_than_a_tenth_of_its_median_is_marked_noisy_with_its_spread(tmp_path):
    # a loaded CPU: eager's median 16 ms where an idle run took 29 µs, its IQR far beyond the median
    df = _load(tmp_path, [_record("eager", 15_993e-6, 6_400e-6), _record("compiled", 87.4e-6, 2.0e-6)])
    text = tables.op_tables(df)
    eager = next(line for line in text.splitlines() if line.startswith("| eager |"))
    compiled = next(line for line in text.splitlines() if line.startswith("| compiled |"))
    assert "15,993.0 (noisy: IQR 6,400.0)" in eager
    assert tables.HOST_ONLY in eager  # no device time on a CPU, said in words
    assert "87.4 |" in compiled and "87.4 (noisy" not in compiled
    # the speedup pairs a quiet figure with a noisy one: marked too
    assert "182.99× (noisy)" in compiled
    assert "1 of 2 figures are noisy" in text


def test_quiet_figures_carry_no_noise_mark(tmp_path):
    df = _load(tmp_path, [_record("eager", 30e-6, 1e-6), _record("compiled", 25e-6, 2.4e-6)])
    text = tables.op_tables(df)
    assert "noisy" not in text and "1.20×" in text


def test_device_samples_decide_the_noise_of_device_time(tmp_path):
    quiet = [10e-6 * (1 + k / 1000) for k in range(20)]
    loud = [10e-6 * (1 + k / 20) for k in range(20)]  # IQR ≈ 0.5 × 10 µs
    df = _load(tmp_path, [_record("eager", 40e-6, 1e-6, quiet, op="gelu_mul", shape="t8-h8"),
                          _record("ours", 40e-6, 1e-6, loud, op="gelu_mul", shape="t8-h8")])
    by = df.set_index("variant")
    assert not by.loc["eager", "noisy"] and by.loc["ours", "noisy"]
    assert by.loc["ours", "speedup_noisy"] and not by.loc["eager", "speedup_noisy"]
    table = tables.variant_table(df, "gelu_mul").markdown()
    assert "(noisy: IQR" in table and table.count("(noisy)") == 1


def test_a_newer_run_without_the_baseline_does_not_hide_a_full_run(tmp_path):
    """A run of a few variants (compiled cases across fresh processes) is newer than the full run: the
    tables still pair every variant with eager from the full run, and a variant measured only in the
    newer run is found there, with its peers from that same run."""
    def run(name, when, variants):
        recs = [{"stats": {"median": 1e-3}, "extra_info": {
            "case": f"mlp/{v}/bf16/t8-d8-h8", "op": "mlp", "variant": v, "dtype": "bf16", "shape_id": "t8-d8-h8",
            "device_time_s": t, "flops": 1, "bytes": 1}} for v, t in variants]
        path = tmp_path / name
        path.write_text(json.dumps({"machine_info": {"mlpbench": {"machine": "m"}}, "datetime": when,
                                    "benchmarks": recs}))
        return path

    full = run("full.json", "2026-12-01T07:00:00", [("eager", 4e-6), ("compiled", 3e-6), ("ours", 2e-6)])
    part = run("part.json", "2026-12-01T19:00:00", [("compiled", 3.1e-6), ("dualgemm", 1e-6)])
    df = tables.load_pytest_json([full, part])
    latest = tables.latest_per_case(df)
    assert set(latest["file"].map(lambda f: f.rsplit("/", 1)[-1])) == {"full.json"}
    assert sorted(latest["variant"]) == ["compiled", "eager", "ours"]
    mine = tables.latest_per_case(df, variant="dualgemm")
    assert sorted(mine["variant"]) == ["compiled", "dualgemm"]
    assert set(mine["file"].map(lambda f: f.rsplit("/", 1)[-1])) == {"part.json"}


OUTCOMES = [{"case": "gelu_mul/eager/bf16/t8-h8", "outcome": "passed", "reason": "", "shard": 0, "when": "call"},
            {"case": "gelu_mul/liger/bf16/t8-h8", "outcome": "skipped", "reason": "Liger needs a GPU", "shard": 0,
             "when": "setup"}]


@pytest.mark.parametrize("layout", ["inside the run", "beside the run", "a file alone"])
def test_outcomes_are_read_from_the_run_json_or_an_old_outcomes_file(tmp_path, layout):
    run = tmp_path / "20261201T000000Z-standard-1.json"
    doc = {"machine_info": {"mlpbench": {"machine": "m"}}, "benchmarks": []}
    if layout == "inside the run":
        run.write_text(json.dumps(doc | {"outcomes": OUTCOMES}))
        path = run
    else:
        beside = run.with_name(run.stem + ".outcomes.json")
        beside.write_text(json.dumps({"outcomes": OUTCOMES}))
        if layout == "beside the run":
            run.write_text(json.dumps(doc))
        path = run if layout == "beside the run" else beside
    assert results.outcomes(path) == OUTCOMES
    text = tables.not_timed(path)
    assert "| gelu_mul/liger/bf16/t8-h8 | skipped | Liger needs a GPU |" in text and "eager" not in text


def test_a_run_without_outcomes_has_none(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"benchmarks": []}))
    assert results.outcomes(run) == [] and tables.not_timed(run) == ""


def test_one_table_renders_as_markdown_html_and_csv():
    t = tables.Table(["case", "µs", "note"], [["a/b", "1,234.5 (noisy: IQR 9.0)", 'says "hi", twice'],
                                               ["c/d", "—", "<b>"]], ["results/pytest/m/r.json"])
    assert t.markdown().splitlines()[:2] == ["| case | µs | note |", "| --- | --- | --- |"]
    broken = tables.Table(["reason"], [["AssertionError: a | b\nsecond line"]]).markdown()
    assert broken.splitlines()[-1] == "| AssertionError: a \\| b second line |"
    html = t.html()
    assert "<td class='noisy' data-sort='1234.5'>" in html and "<td class='na'>—</td>" in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert list(csv.reader(io.StringIO(t.csv()))) == [t.headers, *t.rows]
    df = pd.DataFrame({"x": [1.5, float("nan")], "y": ["a", None]})
    assert tables.Table.of(df).rows == [["1.5", "a"], ["", ""]]
