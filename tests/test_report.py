"""The report on small synthetic results (tests/report_fixtures.py): one loader, sections computed
from what it read, rendered as markdown, one self-contained HTML page and CSV. Checked for its
structure, not against committed output."""

import csv
import io
import re
import shutil

import pandas as pd
import pytest
from report_fixtures import (BOX, CPU, FAILED, GELU, NEW, OLD, SKIPPED, build, outcome, record, write_asv,
                             write_run)

from mlpbench import registry, report, tables


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return build(tmp_path_factory.mktemp("synthetic"))


@pytest.fixture(scope="module")
def loaded(results):
    return report.load(results)


@pytest.fixture(scope="module")
def built(loaded, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return report.write(loaded, out), out


def _section(page: str, anchor: str) -> str:
    start = page.index(f"<h2 id='{anchor}'>")
    end = page.find("<h2", start + 1)
    return page[start:end if end > 0 else None]


def test_one_load_reads_pytest_runs_asv_runs_and_both_kinds_of_outcomes(loaded):
    assert loaded.machines == [BOX, CPU]
    assert len(loaded.runs) == 3 and len(loaded.points) > 0
    # one row per pytest-benchmark record, each naming the file it came from as the repository spells it
    assert len(loaded.records) == 8 + 3 + 2
    assert set(loaded.records["run"]) == {f"results/pytest/{BOX}/{OLD}", f"results/pytest/{BOX}/{NEW}",
                                          f"results/pytest/{CPU}/{OLD}"}
    m = loaded.measurements
    assert set(m["source"]) == {"pytest", "asv"} and list(m.columns) == report.MEASUREMENT_COLUMNS
    assert {"device_time_s", "host_time_s", "track_device_time", "track_cold_compile"} <= set(m["metric"])
    # outcomes from the file beside the older run and from inside the newer run's JSON
    o = loaded.outcomes.set_index("case")
    assert o.loc[SKIPPED[0], "run"] == f"results/pytest/{BOX}/{OLD}"
    assert o.loc[FAILED[0], "run"] == f"results/pytest/{BOX}/{NEW}"
    assert loaded.measured_rates[BOX]["copy_bandwidth_Bps"] > 0 and loaded.measured_rates[CPU] == {}


def test_a_machine_is_a_filter_of_the_same_data(loaded):
    box = loaded.of(BOX)
    assert box.machines == [BOX]
    for frame in (box.records, box.measurements, box.outcomes):
        assert set(frame["machine"]) == {BOX}
    assert {p.machine for _, p in box.points} == {BOX} and {r.machine for r in box.runs} == {BOX}
    assert len(box.records) + len(loaded.of(CPU).records) == len(loaded.records)


def test_sections_come_in_reading_order_and_name_their_files(loaded):
    rep = report.sections(loaded)
    titles = [t for t, _ in rep.sections]
    assert titles[0] == "Summary"
    expected = ["Summary", "Speedup over eager", "History", "Per-op tables", "Our kernels against the faster peer",
                "Launch structure", "Compile tax", "Not timed", "The regression gate on these runs",
                "pytest-benchmark runs", "ASV result files", "Kernels per MLP call", "All pytest-benchmark results"]
    assert [t for t in titles if t in expected] == expected
    for title, parts in rep.sections:
        for kind, *rest in parts:
            if kind in ("table", "long"):  # its files below it, or one per row
                assert rest[0].sources or {"run", "file"} & set(rest[0].headers), f"{title}: no files named"
    # the pages' cut: no plots, no long tables
    short = report.sections(loaded, full=False)
    assert {k for _, parts in short.sections for k, *_ in parts} <= {"h3", "text", "table"}


def test_the_summary_ranks_the_known_fastest_variant(loaded):
    rep = report.sections(loaded)
    (summary,) = [p[1] for t, parts in rep.sections if t == "Summary" for p in parts if p[0] == "table"]
    rows = {tuple(r[:4]): dict(zip(summary.headers, r)) for r in summary.rows}
    assert rows[BOX, "gelu_mul", "bf16", "device"]["fastest"] == f"ours, {len(GELU)} of {len(GELU)} shapes"
    assert rows[BOX, "mlp", "bf16", "device"]["fastest"] == "ours, 1 of 1 shapes"
    assert rows[CPU, "linear", "fp32", tables.HOST_ONLY]["fastest"] == "compiled, 1 of 1 shapes"


def test_one_row_per_case(loaded):
    wide = loaded.records
    box = loaded.of(BOX).records
    per_op = tables.variant_table(box, "gelu_mul")
    assert len(per_op.rows) == len(GELU)  # one row per shape and dtype, one column per variant
    assert len(report.results_table(wide).rows) == len(wide)
    summary = report.summary(wide)
    assert len(summary.rows) == len(set(zip(wide["machine"], wide["op"], wide["dtype"]))) * 2


def test_not_timed_lists_each_cases_newest_outcome_that_was_no_pass(loaded):
    t = report.not_timed_table(loaded.outcomes)
    rows = {r[1]: r for r in t.rows}
    assert set(rows) == {SKIPPED[0], FAILED[0]}  # maxautotune failed once, then passed: timed
    assert rows[SKIPPED[0]][2:4] == ["skipped", SKIPPED[2]] and rows[FAILED[0]][2:4] == ["failed", FAILED[2]]


def test_the_gate_section_flags_the_planted_slowdown(loaded):
    t = report.gate_table(loaded)
    (row,) = t.rows
    assert row[:3] == [BOX, "b" * 7, "a" * 7] and row[4] == "1" and "gelu_mul/ours/bf16/t8192-h3072" in row[-1]


def test_three_files_and_the_html_is_self_contained(built):
    paths, out = built
    assert [p.name for p in paths] == ["report.md", "report.html", "report.csv"]
    assert sorted(p.name for p in out.iterdir()) == ["report.csv", "report.html", "report.md"]
    page = (out / "report.html").read_text()
    assert page.count("src='data:image/png;base64,") >= 3  # speedup, roofline, history
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page)
    assert "<style>" in page and "<script>" in page and "<link" not in page
    assert "<pre" not in page and not re.search(r"^\|.*\|$", page, re.M)
    assert page.count("<table class='sortable'>") >= 8
    # the markdown needs no image files: it sends the reader to the HTML page's sections for the plots
    md = (out / "report.md").read_text()
    assert "![" not in md and "](report.html#speedup-over-eager)" in md
    for anchor in re.findall(r"\(report\.html#([\w-]+)\)", md):
        assert f"<h2 id='{anchor}'>" in page


def test_the_summary_comes_first_and_plots_before_long_tables(built):
    _, out = built
    page = (out / "report.html").read_text()
    order = [page.index(f"<h2 id='{a}'>") for a in ("summary", "speedup-over-eager", "history", "per-op-tables",
                                                     "kernels-per-mlp-call", "all-pytest-benchmark-results")]
    assert order == sorted(order)
    summary = _section(page, "summary")
    assert f"<td>{BOX}</td><td>gelu_mul</td><td>bf16</td><td>device</td><td>ours, 2 of 2 shapes</td>" in summary
    assert "of copy" in summary and "of bf16 GEMM" in summary
    assert "<details>" in _section(page, "all-pytest-benchmark-results")


def test_the_csv_holds_one_row_per_measurement(built, loaded):
    _, out = built
    rows = list(csv.reader(io.StringIO((out / "report.csv").read_text())))
    assert rows[0] == report.MEASUREMENT_COLUMNS
    assert len(rows) - 1 == len(loaded.measurements)
    back = pd.read_csv(out / "report.csv")
    assert back["value"].notna().all() and set(back["source"]) == {"pytest", "asv"}


def test_two_runs_of_one_commit_stay_apart(results, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    first = copy / "pytest" / BOX / OLD
    shutil.copy(first, first.with_name("20991231T000000Z-standard-9.json"))
    df = report.load(copy).measurements
    key = ["source", "run", "machine", "commit", "op", "variant", "dtype", "shape_id", "metric"]
    assert not df.duplicated(key).any()
    assert df.duplicated([k for k in key if k != "run"]).any()  # told apart by `run` alone


def test_asv_benchmarks_are_read_by_method_name_whatever_their_module(tmp_path):
    for module, folder in (("standard", "a"), ("asv_cases", "b")):
        write_asv(tmp_path / folder / "results" / "asv", BOX, "c" * 40, 1, {"eager": 2e-5, "ours": 1e-5},
                  module=module, extra={f"{module}.GeluMulHost.time_host": [[3e-5], [["'eager'"], ["'bf16'"],
                                                                                      ["'t8192-h3072'"]], "v1", 0, 1]})
    a, b = (report.load(tmp_path / f / "results").measurements for f in "ab")
    for metric in ("track_device_time", "track_host_time"):
        assert (a["metric"] == metric).sum() == (b["metric"] == metric).sum() > 0, metric


def test_an_unreadable_file_is_skipped_with_a_warning_naming_it(results, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(results / "asv", copy / "asv")
    (copy / "pytest" / "box").mkdir(parents=True)
    (copy / "pytest" / "box" / "broken.json").write_text('{"benchmarks": [')
    (copy / "asv" / BOX / "junk.json").write_text("not json")
    with pytest.warns(UserWarning) as seen:
        data = report.load(copy)
    text = " ".join(str(w.message) for w in seen)
    assert "broken.json" in text and "junk.json" in text
    assert set(data.measurements["source"]) == {"asv"}
    report.sections(data, full=False)  # ASV alone still makes a report


def test_a_cpu_run_says_host_time_only_and_marks_noise(tmp_path):
    results = tmp_path / "results"
    recs = [record("linear", v, "fp32", "t1024-i32-o64", {"t": 1024, "i": 32, "o": 64}, host_us=us,
                   flops=4_194_304, nbytes=401_664) for v, us in (("eager", 15_993.0), ("compiled", 87.4))]
    recs[0]["stats"]["iqr"] = 6_400e-6
    recs[1]["stats"]["iqr"] = 2e-6
    write_run(results / "pytest" / "cpu-x86-64" / OLD, "cpu-x86-64", "2026-12-01T00:00:00", recs,
              outcomes=[outcome(r["extra_info"]["case"]) for r in recs])
    report.write(results, tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text()
    assert "NaN" not in page and "nan" not in page.replace("nanoseconds", "")
    assert f"<td class='na'>{tables.HOST_ONLY}</td>" in page
    assert "15,993.0 (noisy: IQR 6,400.0)" in page and "182.99× (noisy)" in page
    assert "no rate measured" in page


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


def test_kernel_breakdown_and_compile_tax_tables():
    wide = pd.DataFrame([{"op": "mlp", "case": "mlp/eager/bf16/t8192-d768-h3072", "run": "results/pytest/m/r.json",
                          "kernel_times_s": {"nvjet_gate": 60e-6, "nvjet_up": 60e-6, "nvjet_down": 55e-6,
                                             "gelu": 30e-6, "mul": 30e-6}}])
    text = report.kernel_table(wide).markdown()
    assert "| mlp/eager/bf16/t8192-d768-h3072 | nvjet_gate | 60.0 | 26% |" in text
    # records with times in launch order give gate and up their own rows even under one kernel name
    wide["kernel_names"] = [["nvjet_a", "nvjet_a", "gelu", "mul", "nvjet_b"]]
    wide["kernel_times_in_order_s"] = [[60e-6, 61e-6, 30e-6, 30e-6, 55e-6]]
    text = report.kernel_table(wide).markdown()
    assert "| 1. nvjet_a | 60.0 |" in text and "| 2. nvjet_a | 61.0 |" in text and "| 5. nvjet_b | 55.0 |" in text
    case = registry.case_id("mlp", "compiled", "bf16", "t8192-d768-h3072")
    df = pd.DataFrame([
        {"source": "asv", "run": "results/asv/h200/a.json", "machine": "h200", "commit": "a", "date": 1, "op": "mlp",
         "variant": "compiled", "dtype": "bf16", "shape_id": "t8192-d768-h3072", "metric": "track_cold_compile",
         "value": 12.5},
        {"source": "asv", "run": "results/asv/h200/a.json", "machine": "h200", "commit": "a", "date": 1, "op": "mlp",
         "variant": "compiled-dynamic", "dtype": "bf16", "shape_id": "d768-h3072", "metric": "track_total",
         "value": 30.0},
    ])
    tax = report.compile_table(df)
    assert f"| {case} | h200 | cold compile | 12.50 s |" in tax.markdown()
    assert "ten changing shapes, total" in tax.markdown() and tax.sources == ["results/asv/h200/a.json"]


def test_rendering_reads_no_result_file(results, tmp_path, monkeypatch):
    """Load, then compute, then render: after `load`, only the gate's own inputs (codegen records,
    between-run noise) are read under results/."""
    data = report.load(results)
    opened = []
    real = type(results).read_text

    def spy(self, *a, **k):
        opened.append(self)
        return real(self, *a, **k)

    monkeypatch.setattr(type(results), "read_text", spy)
    report.write(data, tmp_path / "out")
    assert not [p for p in opened if results in p.parents and not {"codegen", "between-runs"} & set(p.parts)]
