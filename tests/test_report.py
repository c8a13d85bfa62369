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
