import pandas as pd

from mlpbench import tables


def _df(host_by_tokens):
    rows = []
    for t, (eager, compiled) in host_by_tokens.items():
        for variant, host in (("eager", eager), ("compiled", compiled)):
            rows.append({"op": "mlp", "dtype": "bf16", "variant": variant, "shape_id": f"t{t}-d768-h3072",
                         "host_time_s": host})
    return pd.DataFrame(rows)


def test_crossover_is_where_compiled_starts_to_win_for_good():
    df = _df({1: (157e-6, 241e-6), 16: (160e-6, 170e-6), 64: (170e-6, 150e-6), 1024: (200e-6, 180e-6),
              8192: (286e-6, 211e-6)})
    assert tables.overhead_crossover(df) == 64


def test_no_crossover_when_compiled_never_wins_at_the_largest():
    df = _df({1: (157e-6, 241e-6), 64: (170e-6, 150e-6), 8192: (286e-6, 300e-6)})
    assert tables.overhead_crossover(df) is None


def test_crossover_reads_back_to_back_host_time_where_records_have_it():
    # synchronised single calls say compiled never wins; back to back it wins from 8192 tokens up
    df = _df({1: (157e-6, 241e-6), 4096: (160e-6, 241e-6), 8192: (286e-6, 300e-6), 16384: (500e-6, 520e-6)})
    b2b = {1: (157e-6, 241e-6), 4096: (160e-6, 241e-6), 8192: (286e-6, 230e-6), 16384: (520e-6, 450e-6)}
    df["host_time_back_to_back_s"] = [b2b[int(s[1:].split("-")[0])][v == "compiled"]
                                      for s, v in zip(df["shape_id"], df["variant"])]
    df["device_time_s"] = df["host_time_back_to_back_s"] * 0.9
    assert tables.overhead_crossover(df) == 8192
    table = tables.overhead_table(df)
    assert "host, back to back: eager / compiled (µs)" in table
    assert "| 8192 | 257.4 / 207.0 | 286.0 / 230.0 | 286.0 / 300.0 |" in table
    # older records without the back-to-back figure in the same frame do not mix into it
    old = _df({8192: (100e-6, 900e-6)})
    assert tables.overhead_crossover(pd.concat([df, old])) == 8192


def test_speedup_over_eager_pairs_cases_by_machine_op_dtype_and_shape(tmp_path):
    import json

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
