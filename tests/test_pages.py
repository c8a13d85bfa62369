"""The results pages are the report narrowed to one machine: checked for their structure on small
synthetic results (tests/report_fixtures.py), never against committed pages."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from report_fixtures import BOX, CPU, FAILED, build

from mlpbench import pages, report

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    results = build(root)
    # beside results/ as docs/results/ lies beside the repository's, so links come out alike
    folder = root / "docs" / "results"
    return results, folder, pages.write(results, folder)


def _headings(text: str, level: str) -> list[str]:
    return re.findall(rf"^{level} (.+)$", text, re.M)


def test_one_page_per_machine_and_an_index_listing_them(written):
    _, folder, paths = written
    assert [p.name for p in paths] == [f"{BOX}.md", f"{CPU}.md", "README.md"]
    index = (folder / "README.md").read_text()
    assert f"- [{BOX}]({BOX}.md)" in index and f"- [{CPU}]({CPU}.md)" in index
    assert "mlpbench report --pages docs/results" in index


def test_a_page_holds_the_reports_sections_for_its_machine_only(written):
    results, folder, _ = written
    data = report.load(results)
    for machine, other in ((BOX, CPU), (CPU, BOX)):
        text = (folder / f"{machine}.md").read_text()
        assert _headings(text, "#") == [f"Results on {machine}"]
        expected = [t for t, parts in report.sections(data.of(machine), full=False).sections]
        assert _headings(text, "##") == expected
        assert f"| {other} |" not in text and f"/{other}/" not in text
        assert "data:image" not in text and "![" not in text  # the plots stay in the report
    box = (folder / f"{BOX}.md").read_text()
    for heading in ("Summary", "Per-op tables", "Our kernels against the faster peer", "Launch structure",
                    "Compile tax", "Not timed", "The regression gate on these runs", "pytest-benchmark runs",
                    "ASV result files"):
        assert heading in _headings(box, "##"), heading
    assert "All pytest-benchmark results" not in box  # long tables stay in the report
    assert f"| {BOX} | {FAILED[0]} | failed |" in box


def test_every_table_links_the_files_it_comes_from_and_the_links_resolve(written):
    _, folder, _ = written
    text = (folder / f"{BOX}.md").read_text()
    blocks = text.split("\n\n")
    tables_seen = 0
    for k, block in enumerate(blocks):
        if block.startswith("| "):
            tables_seen += 1
            assert blocks[k + 1].startswith("From [`results/"), block[:200]
    assert tables_seen >= 8
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links
    for link in links:
        assert (folder / link).resolve().is_file(), link


def test_the_report_command_writes_the_pages(written, tmp_path):
    results = written[0]
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "report", "--results", str(results),
                           "--pages", str(tmp_path / "pages")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {p.name for p in (tmp_path / "pages").iterdir()} == {f"{BOX}.md", f"{CPU}.md", "README.md"}
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "report", "--results", str(results)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "give --output DIR" in proc.stderr
