import json
import re
import shutil

import pandas as pd
import pytest

from mlpbench import report, tables


@pytest.fixture(scope="module")
def built(committed_results, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return report.write(committed_results, out), out


def test_report_from_the_committed_results_is_self_contained(built):
    paths, out = built
    assert [p.name for p in paths] == ["report.md", "report.html", "report.csv"]
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 6  # four speedup plots, the roofline, the history
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page)
    md = (out / "report.md").read_text()
    for png in re.findall(r"\((plot-\d+\.png)\)", md):
        assert (out / png).stat().st_size > 1000


def test_the_page_has_real_tables_and_no_preformatted_text(built):
    _, out = built
    page = (out / "report.html").read_text()
    assert "<pre" not in page
    assert not re.search(r"^\|.*\|$", page, re.M)  # no markdown pipe table anywhere
    assert page.count("<table class='sortable'>") >= 6


def test_the_summary_comes_first_and_plots_come_before_long_tables(built):
    _, out = built
    page = (out / "report.html").read_text()
    order = [page.index(f"<h2 id='{a}'>") for a in ("summary", "speedup-over-eager", "history", "per-op-tables",
                                                     "kernels-per-mlp-call", "all-pytest-benchmark-results")]
    assert order == sorted(order)
    assert page.index("<img") > page.index("<h2 id='summary'>")
    summary = page[page.index("<h2 id='summary'>"):page.index("<h2 id='speedup-over-eager'>")]
    # the committed H200 runs: our GeLU·mul kernel is the fastest bf16 variant at every standard shape
    # Which variant wins is the results' business (ours and Inductor's kernel tie within 0.3% at the
    # large shapes); that the summary names one, with its count of shapes, is the report's.
    from mlpbench import registry

    shapes = len({c.shape.id for c in registry.select("standard", ops=["gelu_mul"], dtypes=["bf16"])})
    variants = "|".join(registry.OPS["gelu_mul"].variant_names)
    assert re.search(rf"<td>gelu_mul</td><td>bf16</td><td>device</td><td>({variants}), \d of {shapes} shapes</td>",
                     summary)
    assert "of copy" in summary and "of bf16 GEMM" in summary


def test_tidy_keeps_two_runs_of_one_commit_apart(committed_results, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(committed_results / "pytest", results / "pytest")
    shutil.copytree(committed_results / "asv", results / "asv")
    # a second run of the same commit on the same machine, as `mlpbench run` twice leaves it
    first = sorted((results / "pytest" / "h200").glob("*-standard-*[0-9].json"))[0]
    shutil.copy(first, first.with_name("20991231T000000Z-standard-1.json"))
    df, ceilings = report.tidy(results)
    assert set(df["source"]) == {"pytest", "asv"}
    assert {"device_time_s", "host_time_s", "track_device_time", "track_host_time"} <= set(df["metric"])
    key = ["source", "run", "machine", "commit", "op", "variant", "dtype", "shape_id", "metric"]
    assert not df.duplicated(key).any()
    assert df.duplicated([k for k in key if k != "run"]).any()  # the two runs are told apart by `run` alone
    assert "h200" in ceilings


def test_asv_benchmarks_are_read_by_method_name_whatever_their_module(committed_results, tmp_path):
    folder = tmp_path / "results" / "asv" / "h200"
    folder.mkdir(parents=True)
    src = next((committed_results / "asv" / "h200").glob("c76eebd0-*.json"))
    doc = json.loads(src.read_text())
    renamed = {"GeluMulHost.time_host": "GeluMulHost.track_host_time"}
    new = {}
    for name, row in doc["results"].items():
        cls_method = name.split(".", 1)[1]
        module = "compile_tax" if cls_method.startswith(("CompileTime", "ChangingShapes")) else "standard"
        new[f"{module}.{renamed.get(cls_method, cls_method)}"] = row
    doc["results"] = new
    (folder / src.name).write_text(json.dumps(doc))
    renamed_df, _ = report.tidy(tmp_path / "results")
    original, _ = report.tidy(committed_results)
    original = original[original["run"].str.contains("c76eebd0")]
    for metric in ("track_device_time", "track_host_time", "track_cold_compile", "track_total"):
        assert (renamed_df["metric"] == metric).sum() == (original["metric"] == metric).sum() > 0, metric


def test_an_unreadable_file_is_skipped_with_a_warning_naming_it(committed_results, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(committed_results / "asv", results / "asv")
    (results / "pytest" / "box").mkdir(parents=True)
    (results / "pytest" / "box" / "broken.json").write_text('{"benchmarks": [')
    (results / "asv" / "h200" / "junk.json").write_text("not json")
    with pytest.warns(UserWarning) as seen:
        df, _ = report.tidy(results)
    text = " ".join(str(w.message) for w in seen)
    assert "broken.json" in text and "junk.json" in text
    assert set(df["source"]) == {"asv"}


def test_a_cpu_run_says_host_time_only_and_marks_noise(tmp_path):
    results = tmp_path / "results"
    (results / "pytest" / "cpu-x86-64").mkdir(parents=True)

    def rec(variant, host, iqr):
        return {"stats": {"median": host, "iqr": iqr}, "extra_info": {
            "case": f"linear/{variant}/fp32/t1024-i32-o64", "op": "linear", "variant": variant, "dtype": "fp32",
            "shape_id": "t1024-i32-o64", "host_time_s": host, "flops": 4_194_304, "bytes": 401_664}}

    doc = {"machine_info": {"mlpbench": {"machine": "cpu-x86-64", "ceilings": {}}}, "datetime": "2026-12-01T00:00:00",
           "benchmarks": [rec("eager", 15_993e-6, 6_400e-6), rec("compiled", 87.4e-6, 2e-6)]}
    (results / "pytest" / "cpu-x86-64" / "20261201T000000Z-quick-1.json").write_text(json.dumps(doc))
    report.write(results, tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text()
    assert "NaN" not in page and "nan" not in page.replace("nanoseconds", "")
    assert f"<td class='na'>{tables.HOST_ONLY}</td>" in page
    assert "15,993.0 (noisy: IQR 6,400.0)" in page and "182.99× (noisy)" in page
    assert "no ceiling measured" in page


def test_history_plots_keep_each_axes_to_a_dozen_lines_and_relative_to_the_first_commit():
    rows = []
    for c, (commit, date) in enumerate((("a" * 40, 1), ("b" * 40, 2), ("c" * 40, 3))):
        for shape in range(30):
            rows.append({"source": "asv", "run": f"results/asv/m/{commit[:8]}.json", "machine": "m", "commit": commit,
                         "date": date, "version": "v3", "op": "mlp", "variant": "eager", "dtype": "bf16",
                         "shape_id": f"t{2 ** shape}-d8-h8", "metric": "track_device_time",
                         "value": 1e-5 * (shape + 1) * (1 + 0.1 * c), "iqr": None})
    df = pd.DataFrame(rows)
    series, left_out = report.history_series(df)
    assert series.groupby("case")["relative"].first().eq(1).all()
    assert series["relative"].max() == pytest.approx(1.2)
    plots = report.history_plots(df)
    assert len(plots) == 3 and all(t.endswith(f"(shapes {k} of 3)") for k, (t, _) in enumerate(plots, 1))


def test_kernel_breakdown_and_compile_tax_sections():
    wide = pd.DataFrame([{"op": "mlp", "case": "mlp/eager/bf16/t8192-d768-h3072",
                          "kernel_times_s": {"nvjet_gate": 60e-6, "nvjet_up": 60e-6, "nvjet_down": 55e-6,
                                             "gelu": 30e-6, "mul": 30e-6}}])
    text = report.kernel_table(wide).markdown()
    assert "| mlp/eager/bf16/t8192-d768-h3072 | nvjet_gate | 60.0 | 26% |" in text
    # records with times in launch order give gate and up their own rows even under one kernel name
    wide["kernel_names"] = [["nvjet_a", "nvjet_a", "gelu", "mul", "nvjet_b"]]
    wide["kernel_times_in_order_s"] = [[60e-6, 61e-6, 30e-6, 30e-6, 55e-6]]
    text = report.kernel_table(wide).markdown()
    assert "| 1. nvjet_a | 60.0 |" in text and "| 2. nvjet_a | 61.0 |" in text and "| 5. nvjet_b | 55.0 |" in text
    df = pd.DataFrame([
        {"source": "asv", "run": "results/asv/h200/a.json", "machine": "h200", "commit": "a", "date": 1, "op": "mlp",
         "variant": "compiled", "dtype": "bf16", "shape_id": "t8192-d768-h3072", "metric": "track_cold_compile",
         "value": 12.5},
        {"source": "asv", "run": "results/asv/h200/a.json", "machine": "h200", "commit": "a", "date": 1, "op": "mlp",
         "variant": "compiled-dynamic", "dtype": "bf16", "shape_id": "d768-h3072", "metric": "track_total",
         "value": 30.0},
    ])
    tax = report.compile_table(df).markdown()
    assert "| mlp/compiled/bf16/t8192-d768-h3072 | h200 | cold compile | 12.50 s |" in tax
    assert "ten changing shapes, total" in tax
