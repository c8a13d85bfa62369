"""Runs made from a dirty tree (pytest-benchmark's `commit_info.dirty`) are marked wherever a page
names them: the report (markdown, HTML, CSV), the results pages and the dashboard's cross-GPU page.
On small synthetic results (tests/report_fixtures.py, tests/fixture_builders.py)."""

import csv
import io
import re

import pytest
from fixture_builders import pytest_record, pytest_run
from report_fixtures import BOX, CPU, NEW, OLD, SKIPPED, build

from mlpbench.asv import dashboard as asv_dashboard
from mlpbench import pages, report, tables

MARK = f"({tables.DIRTY})"
DIRTY_RUN, CLEAN_RUN = f"results/pytest/{BOX}/{OLD}", f"results/pytest/{BOX}/{NEW}"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("dirty")
    results = build(root, dirty=(OLD,))
    data = report.load(results)
    report.write(data, root / "report")
    pages.write(data, root / "docs" / "results")
    return results, data, root


RUN_FILE = re.compile(r"^(results/pytest/[\w-]+/)?\d{8}T\d{6}Z-[\w-]+\.json$")


def _namings(text: str) -> list[tuple[str, bool]]:
    """(run label, marked) for each place a page names a pytest run: the lines naming the files below
    tables and plots, and table cells holding a run's name (a bare file name is its row's machine's)."""
    text = re.sub(r"\[(`[^`]*`)\]\([^)]*\)", r"\1", text)  # a markdown link reads as its text
    text = re.sub(r"</?code>", "`", text)
    lines = [m.group(1) for m in re.finditer(r"<p class='src'>(.*?)</p>", text)]
    lines += [line for line in text.splitlines() if line.startswith("From ")]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", text)]
    rows += [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    out = []
    for line in lines:
        for item in line.removeprefix("From ").rstrip(".").split(", "):
            name = item.removesuffix(f" {MARK}").strip("`")
            if name.startswith("results/pytest/"):
                out.append((name, item.endswith(MARK)))
    for cells in rows:
        machine = next((c for c in cells if c in (BOX, CPU)), None)
        for cell in cells:
            name = cell.removesuffix(f" {MARK}")
            if RUN_FILE.match(name):
                out.append((name if "/" in name else f"results/pytest/{machine}/{name}", cell.endswith(MARK)))
    return out


def test_load_knows_which_runs_came_from_a_dirty_tree(written):
    _, data, _ = written
    assert data.dirty == {DIRTY_RUN}
    assert data.of(BOX).dirty == {DIRTY_RUN} and data.of(CPU).dirty == set()
    by_run = data.records.groupby("run")["dirty_tree"].agg(set)
    assert by_run[DIRTY_RUN] == {True} and by_run[CLEAN_RUN] == {False}
    m = data.measurements
    assert set(m.loc[m["run"] == DIRTY_RUN, "dirty_tree"]) == {True}
    assert m.loc[m["source"] == "asv", "dirty_tree"].isna().all()  # ASV records no such thing


def test_the_csv_says_which_rows_came_from_a_dirty_tree(written):
    _, _, root = written
    rows = list(csv.DictReader(io.StringIO((root / "report" / "report.csv").read_text())))
    assert {r["dirty_tree"] for r in rows if r["run"] == DIRTY_RUN} == {"True"}
    assert {r["dirty_tree"] for r in rows if r["run"] == CLEAN_RUN} == {"False"}
    assert {r["dirty_tree"] for r in rows if r["source"] == "asv"} == {""}


@pytest.mark.parametrize("page", ["report/report.md", "report/report.html", f"docs/results/{BOX}.md"])
def test_every_naming_of_a_dirty_run_carries_the_mark_and_no_clean_one_does(written, page):
    _, _, root = written
    text = (root / page).read_text()
    named = _namings(text)
    assert [n for n, marked in named if marked != (n == DIRTY_RUN)] == []
    # the summary, the per-op tables, the runs table and the not-timed table all name it
    assert sum(n == DIRTY_RUN for n, _ in named) >= 4 and any(n == CLEAN_RUN for n, _ in named)
    # one line near the top says what the mark means and lists the dirty runs
    (note,) = [line for line in re.split(r"\n|(?=<p)", text) if "commit_info.dirty" in line]
    assert DIRTY_RUN in note and CLEAN_RUN not in note and MARK in note
    assert text.index("commit_info.dirty") < text.index("Summary")


def test_run_columns_and_source_lines_mark_the_dirty_run(written):
    _, data, root = written
    runs = {r[1]: r for r in report.runs_table(data).rows}
    assert f"{OLD} {MARK}" in runs and NEW in runs
    (skipped,) = [r for r in report.not_timed_table(data.outcomes).rows if r[1] == SKIPPED[0]]
    assert skipped[-1] == f"{OLD} {MARK}"
    assert {r[0] for r in report.results_table(data.records).rows} >= {f"{DIRTY_RUN} {MARK}", CLEAN_RUN}
    md = (root / "report" / "report.md").read_text()
    assert f"`{DIRTY_RUN}` {MARK}" in md and f"`{CLEAN_RUN}` {MARK}" not in md
    page = (root / "report" / "report.html").read_text()
    # the plots drawn from the dirty run name it below them on the HTML page
    plots = re.findall(r"<img [^>]*><p class='src'>([^<]*(?:<code>[^<]*</code>[^<]*)*)</p>", page)
    assert any(f"<code>{DIRTY_RUN}</code> {MARK}" in p for p in plots)


def test_a_page_without_dirty_runs_says_nothing_of_them(written):
    _, _, root = written
    text = (root / "docs" / "results" / f"{CPU}.md").read_text()
    assert "commit_info.dirty" not in text and MARK not in text
    clean = build(root / "clean")
    assert MARK not in report.markdown(report.sections(clean), "r")


def _two_gpus(results, dirty_machine: str):
    """Two machines with measured rates, each one pytest run of the same cases; `dirty_machine`'s dirty."""
    cases = {"gelu_mul/eager/bf16/t8192-h3072": 66e-6, "gelu_mul/ours/bf16/t8192-h3072": 36e-6}
    rates = {"copy_bandwidth_Bps": 4e12, "gemm_bf16_flops": 700e12}
    paths = {}
    for machine, slower in (("h100", 1.3), ("h200", 1.0)):
        records = [pytest_record(c, t * slower, bytes=3 * 8192 * 3072 * 2) for c, t in cases.items()]
        paths[machine] = pytest_run(results / "pytest", machine, "20990101T000000Z", records, "d" * 40, rates,
                                    dirty=machine == dirty_machine)
    return {m: f"results/pytest/{m}/{p.name}" for m, p in paths.items()}


def test_the_tables_across_machines_name_their_runs_dirty_ones_marked(tmp_path):
    results = tmp_path / "results"
    runs = _two_gpus(results, "h200")
    data = report.load(results)
    rep = report.sections(data, full=False)
    (across,) = [parts for title, parts in rep.sections if title == "Across machines"]
    found = [p[1] for p in across if p[0] == "table"]
    assert len(found) == 2  # side by side, then portability
    for t in found:
        assert t.sources == sorted(runs.values())
    md = report.markdown(rep, "r")
    assert f"`{runs['h200']}` {MARK}" in md and f"`{runs['h100']}` {MARK}" not in md
    index = pages.write(data, tmp_path / "docs" / "results")[-1].read_text()
    assert f"[`{runs['h200']}`](../../{runs['h200']}) {MARK}" in index
    assert f"`{runs['h100']}`](../../{runs['h100']}) {MARK}" not in index


def test_the_dashboards_cross_gpu_page_marks_the_dirty_run(tmp_path):
    results = tmp_path / "results"
    runs = _two_gpus(results, "h100")
    html_dir = tmp_path / "html"
    html_dir.mkdir()
    assert asv_dashboard.note_portability(html_dir, results)
    page = (html_dir / asv_dashboard.PORTABILITY).read_text()
    assert f"{runs['h100']} {MARK}" in page and f"{runs['h200']} {MARK}" not in page and runs["h200"] in page


def test_a_run_that_says_nothing_of_its_tree_is_not_marked(tmp_path):
    results = tmp_path / "results"
    pytest_run(results / "pytest", "h200", "20990101T000000Z",
               [pytest_record("gelu_mul/eager/bf16/t8192-h3072", 66e-6)])
    data = report.load(results)
    assert data.dirty == set() and not data.records["dirty_tree"].any()
    assert MARK not in report.markdown(report.sections(data, full=False), "r")
