import re
import shutil
from pathlib import Path

import pytest

from mlpbench import report

ROOT = Path(__file__).resolve().parent.parent


def test_report_from_the_committed_results_is_self_contained(tmp_path):
    paths = report.write(ROOT / "results", tmp_path)
    assert [p.name for p in paths] == ["report.md", "report.html", "report.csv"]
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 5  # four speedup plots and the roofline, at least
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page)
    md = (tmp_path / "report.md").read_text()
    for png in re.findall(r"\((plot-\d+\.png)\)", md):
        assert (tmp_path / png).stat().st_size > 1000


def test_tidy_holds_both_sources_one_row_per_measurement():
    df, ceilings = report.tidy(ROOT / "results")
    assert set(df["source"]) == {"pytest", "asv"}
    assert {"device_time_s", "host_time_s", "track_device_time", "time_host"} <= set(df["metric"])
    assert not df.duplicated(["source", "machine", "commit", "op", "variant", "dtype", "shape_id", "metric"]).any()
    assert "h200" in ceilings


def test_an_unreadable_file_is_skipped_with_a_warning_naming_it(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "asv", results / "asv")
    (results / "pytest" / "box").mkdir(parents=True)
    (results / "pytest" / "box" / "broken.json").write_text('{"benchmarks": [')
    (results / "asv" / "h200" / "junk.json").write_text("not json")
    with pytest.warns(UserWarning) as seen:
        df, _ = report.tidy(results)
    text = " ".join(str(w.message) for w in seen)
    assert "broken.json" in text and "junk.json" in text
    assert set(df["source"]) == {"asv"}


def test_kernel_breakdown_and_compile_tax_sections():
    import pandas as pd

    wide = pd.DataFrame([{"op": "mlp", "case": "mlp/eager/bf16/t8192-d768-h3072",
                          "kernel_times_s": {"nvjet_gate": 60e-6, "nvjet_up": 60e-6, "nvjet_down": 55e-6,
                                             "gelu": 30e-6, "mul": 30e-6}}])
    text = report.kernel_breakdown(wide)
    assert "| mlp/eager/bf16/t8192-d768-h3072 | nvjet_gate | 60.0 | 26% |" in text
    # records with times in launch order give gate and up their own rows even under one kernel name
    wide["kernel_names"] = [["nvjet_a", "nvjet_a", "gelu", "mul", "nvjet_b"]]
    wide["kernel_times_in_order_s"] = [[60e-6, 61e-6, 30e-6, 30e-6, 55e-6]]
    text = report.kernel_breakdown(wide)
    assert "| 1. nvjet_a | 60.0 |" in text and "| 2. nvjet_a | 61.0 |" in text and "| 5. nvjet_b | 55.0 |" in text
    df = pd.DataFrame([
        {"source": "asv", "machine": "h200", "commit": "a", "date": 1, "op": "mlp", "variant": "compiled",
         "dtype": "bf16", "shape_id": "t8192-d768-h3072", "metric": "track_cold_compile", "value": 12.5},
        {"source": "asv", "machine": "h200", "commit": "a", "date": 1, "op": "mlp", "variant": "compiled-dynamic",
         "dtype": "bf16", "shape_id": "d768-h3072", "metric": "track_total", "value": 30.0},
    ])
    tax = report.compile_tax(df)
    assert "| mlp/compiled/bf16/t8192-d768-h3072 | h200 | cold compile | 12.50 s |" in tax
    assert "ten changing shapes, total" in tax
