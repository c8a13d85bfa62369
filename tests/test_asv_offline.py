"""The published asv report must reference no remote URL once vendored.

A tiny ASV project (a git repo with two commits and trivial benchmarks) is
run and published for real; the report is then vendored both through the
API and through asv's plugin hook (plain ``asv publish``).  The assets come
from the npm registry once and are cached (``~/.cache/mlpbench/asv-assets``
or ``$MLPBENCH_ASV_ASSETS``); without network and without a cache those
tests skip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlpbench.asv import dashboard as asv_dashboard, offline as asv_offline
from mlpbench.asv.offline import ASSETS, AssetError, find_remote_refs, vendor_assets

REPO_ROOT = Path(__file__).resolve().parents[1]

BENCH = '''
import os
N = int(os.environ.get("TINY_N", "1000"))

def time_sum():
    sum(range(N))

class TimeParam:
    params = [10, 100]
    param_names = ["n"]
    def time_range(self, n):
        sum(range(n * N // 100))

def track_value():
    return N
'''


def _run(cmd, cwd, env=None):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def asset_cache():
    cache = asv_offline.default_cache_dir()
    try:
        asv_offline.fetch_assets(cache)
    except AssetError as exc:
        pytest.skip(f"asv report assets are not cached in {cache} and cannot be fetched "
                    f"from the npm registry (no network?): {exc}")
    return cache


@pytest.fixture(scope="module")
def asv_project(tmp_path_factory):
    """A real `asv run` over two commits; returns (project dir, env for asv)."""
    proj = tmp_path_factory.mktemp("asvproj")
    home = tmp_path_factory.mktemp("home")  # asv writes ~/.asv-machine.json
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    (proj / "benchmarks").mkdir()
    (proj / "benchmarks" / "__init__.py").write_text("")
    (proj / "benchmarks" / "bench.py").write_text(BENCH)
    conf = {"version": 1, "project": "tiny", "project_url": "http://example.invalid/",
            "repo": ".", "branches": ["HEAD"], "environment_type": "existing",
            "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html"}
    (proj / "asv.conf.json").write_text(json.dumps(conf))
    (proj / "asv_plugin.conf.json").write_text(json.dumps({**conf, "plugins": [".mlpbench.asv.offline"]}))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    _run(git + ["init", "-q"], proj, env)
    asv = [sys.executable, "-m", "asv"]
    _run(asv + ["machine", "--yes", "--machine", "testbox"], proj, env)
    for i in (1, 2):
        (proj / "stamp").write_text(str(i))
        _run(git + ["add", "-A"], proj, env)
        _run(git + ["commit", "-qm", f"c{i}"], proj, env)
        sha = _run(git + ["rev-parse", "HEAD"], proj, env).stdout.strip()
        _run(asv + ["run", "--quick", "--python=same", "--machine", "testbox",
                    "--set-commit-hash", sha], proj, {**env, "TINY_N": str(1000 * i)})
    return proj, env


def _local_refs(page: Path) -> list[str]:
    text = page.read_text()
    return re.findall(r"<(?:script|link)\b[^>]*?\s(?:src|href)=\"([^\"#]+)\"", text)


@pytest.mark.slow
def test_published_report_references_no_remote_url(asset_cache, asv_project):
    proj, env = asv_project
    _run([sys.executable, "-m", "asv", "publish"], proj, env)
    html = proj / "html"

    before = find_remote_refs(html)
    # asv 0.6.6 loads exactly these from CDNs; a new asv version needs new pins.
    assert {u for _, u in before} == set(ASSETS), before

    files = vendor_assets(html, asset_cache)
    assert find_remote_refs(html) == []
    assert files and all(f.startswith("vendor/") for f in files)
    for f in files:
        assert (html / f).is_file() and (html / f).stat().st_size > 0, f
    # every script/stylesheet the page loads now resolves to a file in html/
    for ref in _local_refs(html / "index.html"):
        assert (html / ref).is_file() and (html / ref).stat().st_size > 0, ref

    # idempotent
    index = (html / "index.html").read_bytes()
    assert vendor_assets(html, asset_cache) == files
    assert (html / "index.html").read_bytes() == index


@pytest.mark.slow
def test_asv_publish_plugin_vendors(asset_cache, asv_project):
    proj, env = asv_project
    env = {**env, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]),
           "MLPBENCH_ASV_ASSETS": str(asset_cache)}
    _run([sys.executable, "-m", "asv", "--config", "asv_plugin.conf.json", "publish"], proj, env)
    html = proj / "html"
    assert find_remote_refs(html) == []
    for ref in _local_refs(html / "index.html"):
        assert (html / ref).is_file(), ref


def test_find_remote_refs_kinds(tmp_path):
    (tmp_path / "a.html").write_text(
        '<link rel="stylesheet" href="//cdn.example.com/x.css">'
        '<script src="HTTPS://cdn.example.com/x.js"></script>'
        '<img src="local.png"><a href="https://github.com/x">home</a>'
        '<div style="background: url(\'http://cdn.example.com/bg.png\')"></div>'
        '<style>@import "https://fonts.example.com/f.css";</style>')
    (tmp_path / "b.css").write_text("p { background: url(https://cdn.example.com/p.png) }")
    urls = {u for _, u in find_remote_refs(tmp_path)}
    assert urls == {"//cdn.example.com/x.css", "HTTPS://cdn.example.com/x.js", "http://cdn.example.com/bg.png",
                    "https://fonts.example.com/f.css", "https://cdn.example.com/p.png"}
    assert "https://github.com/x" in {u for _, u in find_remote_refs(tmp_path, include_links=True)}


def test_missing_asset_fails_clearly(tmp_path, capsys):
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text('<script src="https://code.jquery.com/jquery-3.3.1.min.js"></script>')
    with pytest.raises(AssetError, match=r"jquery@3\.3\.1 \(jquery-3\.3\.1\.tgz\) is not in the cache"):
        vendor_assets(html, tmp_path / "empty-cache", fetch=False)
    rc = asv_offline.main(["vendor", str(html), "--cache-dir", str(tmp_path / "empty-cache"), "--no-fetch"])
    assert rc == 2
    assert "jquery@3.3.1" in capsys.readouterr().err
    assert "jquery-3.3.1.min.js" in (html / "index.html").read_text()  # left untouched


def test_corrupt_cache_entry_is_rejected(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "jquery-3.3.1.tgz").write_bytes(b"not the registry tarball")
    with pytest.raises(AssetError, match="jquery@3.3.1"):
        asv_offline.fetch_assets(cache, fetch=False)


def test_the_fetcher_runs_where_torch_is_not_installed(tmp_path):
    """`python -m mlpbench.asv.offline fetch` is run where the npm registry is reachable, which need
    not be a box with torch: importing the package must not need it."""
    code = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = ['asv_offline', 'check', sys.argv[1]]; "
            "runpy.run_module('mlpbench.asv.offline', run_name='__main__')")
    (tmp_path / "index.html").write_text("<!doctype html><title>local only</title>")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ModuleNotFoundError" not in proc.stderr and "ImportError" not in proc.stderr


# ------------------------------------------------- atomic publish, dashboard defaults
def fabricated_project(root: Path) -> Path:
    """An ASV project without benchmarks code: one git commit, one machine, one results file.

    `fam.OpDevice.track_device_time` has data for eager and compiled in two dtypes (and a failed
    ours); `empty.OpDevice.track_device_time` has none (no results on any machine);
    `cpu.OpHost.track_host_time` has fp32 data only."""
    proj = root / "proj"
    (proj / "results" / "box").mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    _run(git + ["init", "-q"], proj)
    (proj / "stamp").write_text("1")
    _run(git + ["add", "stamp"], proj)
    _run(git + ["commit", "-qm", "c1"], proj)
    sha = _run(git + ["rev-parse", "HEAD"], proj).stdout.strip()
    conf = {"version": 1, "project": "tiny", "project_url": "http://example.invalid/", "repo": ".",
            "branches": ["HEAD"], "environment_type": "existing", "results_dir": "results", "html_dir": "html",
            "plugins": [".mlpbench.asv.offline"]}
    (proj / "asv.conf.json").write_text(json.dumps(conf))
    params = [["'eager'", "'compiled'", "'ours'"], ["'fp32'", "'bf16'"]]
    bench = {"code": "def track(): pass", "param_names": ["variant", "dtype"], "params": params,
             "type": "track", "unit": "seconds", "version": "v1", "timeout": 60}
    names = ["fam.OpDevice.track_device_time", "empty.OpDevice.track_device_time", "cpu.OpHost.track_host_time"]
    (proj / "results" / "benchmarks.json").write_text(json.dumps(
        {**{n: {**bench, "name": n} for n in names}, "version": 2}))
    (proj / "results" / "box" / "machine.json").write_text(json.dumps({"machine": "box", "os": "Linux", "version": 1}))
    result = {"commit_hash": sha, "env_name": "existing-py", "date": 1700000000000, "python": "3.11",
              "params": {"machine": "box", "os": "Linux", "python": "3.11"}, "requirements": {}, "env_vars": {},
              "result_columns": ["result", "params", "version"],
              "results": {names[0]: [[2.5e-3, 1.2e-3, 2.4e-3, 1.1e-3, None, None], params, "v1"],
                          names[2]: [[1.0e-3, None, 2.0e-3, None, None, None], params, "v1"]},
              "durations": {}, "version": 2}
    (proj / "results" / "box" / f"{sha[:8]}-existing-py.json").write_text(json.dumps(result))
    return proj


def _publish(proj: Path, cache: Path, **env) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(proj.parent), "MLPBENCH_ASV_ASSETS": str(cache), **env,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "asv", "publish"], cwd=proj, env=env, capture_output=True,
                          text=True, timeout=120)


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def test_a_publish_that_fails_leaves_the_previous_dashboard_byte_identical(asset_cache, tmp_path):
    proj = fabricated_project(tmp_path)
    first = _publish(proj, asset_cache)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    html = proj / "html"
    asv_offline.check_site(html)
    assert [p.name for p in proj.iterdir() if p.name.startswith(".html")] == []
    before = _snapshot(html)

    # info.json carries the publish time: a second publish that got through would change it
    failed = _publish(proj, tmp_path / "empty-cache", MLPBENCH_NPM_REGISTRY="http://127.0.0.1:9")
    assert failed.returncode != 0
    out = failed.stdout + failed.stderr
    assert "jquery@3.3.1" in out and "was left as it was" in out, out[-3000:]
    assert _snapshot(html) == before
    assert [p.name for p in proj.iterdir() if p.name.startswith(".html")] == []


def _fake_site(folder: Path, remote: bool = False) -> None:
    """What ASV's publish writes, in miniature: enough for check_site and the dashboard steps."""
    src = "https://code.jquery.com/jquery-3.3.1.min.js" if remote else "vendor/jquery.js"
    (folder / "graphs" / "summary").mkdir(parents=True)
    (folder / "vendor").mkdir()
    (folder / "vendor" / "jquery.js").write_text("")
    (folder / "index.html").write_text(
        f'<html><head><script src="{src}"></script>\n<script language="javascript" type="text/javascript"\n'
        '            src="regressions.js">\n    </script>\n</head><body></body></html>')
    for name in ("regressions.js", "info.json", "regressions.json", "error.html"):
        (folder / name).write_text("{}")
    (folder / "index.json").write_text(json.dumps({"benchmarks": {"a.X.t": {}, "b.X.t": {}, "c.X.t": {}}}))
    (folder / "graphs" / "summary" / "a.X.t.json").write_text("[[1, 0.5], [2, null]]")
    (folder / "graphs" / "summary" / "b.X.t.json").write_text("[[1, null]]")


def test_build_and_swap_replaces_the_folder_only_with_a_whole_offline_site(tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    (html / "old.txt").write_text("previous dashboard")

    def broken(folder):
        _fake_site(Path(folder))
        raise RuntimeError("publish died")

    with pytest.raises(RuntimeError, match="publish died"):
        asv_offline.build_and_swap(str(html), broken)
    with pytest.raises(AssetError, match="remote"):
        asv_offline.build_and_swap(str(html), lambda f: _fake_site(Path(f), remote=True))

    def incomplete(folder):
        _fake_site(Path(folder))
        (Path(folder) / "info.json").unlink()

    with pytest.raises(AssetError, match="lacks info.json"):
        asv_offline.build_and_swap(str(html), incomplete)
    assert [p.name for p in tmp_path.iterdir()] == ["html"] and _snapshot(html) == {"old.txt": b"previous dashboard"}

    asv_offline.build_and_swap(str(html), lambda f: _fake_site(Path(f)))
    assert [p.name for p in tmp_path.iterdir()] == ["html"] and not (html / "old.txt").exists()
    assert set(json.loads((html / "index.json").read_text())["benchmarks"]) == {"a.X.t"}


def test_the_plugin_wraps_asvs_publish_once_however_often_it_is_imported():
    import importlib.util

    from asv.commands.publish import Publish

    asv_offline.setup()
    wrapped = Publish.run.__func__
    spec = importlib.util.spec_from_file_location("mlpbench.asv.offline_again", asv_offline.__file__)
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)
    again.setup()
    asv_offline.setup()
    assert Publish.run.__func__ is wrapped and wrapped._mlpbench_atomic


def test_the_dashboard_steps_drop_benchmarks_without_data_and_load_the_script_once(tmp_path):
    _fake_site(tmp_path)
    assert asv_dashboard.finish(tmp_path) == ["b.X.t", "c.X.t"]
    asv_dashboard.finish(tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert page.count(asv_dashboard.SCRIPT) == 1
    assert page.index("regressions.js") < page.index(asv_dashboard.SCRIPT) < page.index("</head>")
    assert (tmp_path / asv_dashboard.SCRIPT).read_bytes() == (asv_dashboard.STATIC / asv_dashboard.SCRIPT).read_bytes()
    assert set(json.loads((tmp_path / "index.json").read_text())["benchmarks"]) == {"a.X.t"}

    # nothing measured yet: every benchmark stays listed
    (tmp_path / "graphs" / "summary" / "a.X.t.json").unlink()
    (tmp_path / "index.json").write_text(json.dumps({"benchmarks": {"a.X.t": {}, "b.X.t": {}}}))
    assert asv_dashboard.drop_empty_benchmarks(tmp_path) == []


def test_index_notes_which_parameter_values_have_data(tmp_path):
    # A CPU-sized shape measured in fp32 alone: the script must not open it on bf16 (an empty plot).
    params = [["'eager'", "'ours'"], ["'fp32'", "'bf16'"]]
    (tmp_path / "index.json").write_text(json.dumps({"benchmarks": {
        "q.X.t": {"params": params, "param_names": ["variant", "dtype"]}, "q.Y.t": {}}}))
    graph = tmp_path / "graphs" / "machine-box" / "q.X.t.json"
    graph.parent.mkdir(parents=True)
    graph.write_text(json.dumps([[1, [1e-3, None, None, None]], [2, [1e-3, None, 2e-3, None]]]))
    (tmp_path / "graphs" / "summary").mkdir()
    (tmp_path / "graphs" / "summary" / "q.X.t.json").write_text("[[1, 1.0]]")  # summaries are not read
    asv_dashboard.note_values_with_data(tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())["benchmarks"]
    assert index["q.X.t"]["mlpbench_data"] == {"variant": ["'eager'", "'ours'"], "dtype": ["'fp32'"]}
    assert "mlpbench_data" not in index["q.Y.t"]


def _dom(html: Path, fragment: str) -> str:
    """The page's DOM once drawn in headless Chromium, served from html with no network."""
    import functools
    import http.server
    import importlib.util
    import tempfile
    import threading

    spec = importlib.util.spec_from_file_location("screenshot_report", REPO_ROOT / "scripts" / "screenshot_report.py")
    shot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shot)
    try:
        binary = shot.find_chromium(None)
    except SystemExit:
        pytest.skip("no Chromium")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(shot._Handler, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html#{fragment}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return subprocess.run(shot._chromium(binary, tmp, "1400,1000", 10000, "--dump-dom", url),
                                  capture_output=True, text=True, timeout=120).stdout
    finally:
        server.shutdown()
        server.server_close()


def _active(dom: str, panel: str) -> list[str]:
    body = re.search(rf'panel-heading">{panel}</div><div class="panel-body">(.*?)</div></div>', dom, re.S)
    return re.findall(r'class="btn [^"]*\bactive"[^>]*>([^<]*)<', body.group(1)) if body else []


@pytest.mark.slow
def test_the_dashboard_opens_on_data_in_bf16_with_short_legends(asset_cache, tmp_path):
    proj = fabricated_project(tmp_path)
    assert _publish(proj, asset_cache).returncode == 0
    html = proj / "html"

    grid = _dom(html, "")
    assert 'id="group-fam"' in grid and "group-empty" not in grid

    # a bare link (grid tile, sidebar) opens bf16, zoomed to the data, a legend of what differs
    graph = _dom(html, "fam.OpDevice.track_device_time")
    assert _active(graph, "dtype") == ["bf16"] and _active(graph, "variant") == ["eager", "compiled", "ours"]
    assert "active" in re.search(r'id="zoom-y-axis" class="([^"]*)"', graph).group(1)
    assert re.findall(r'class="legendLabel">([^<]*)<', graph) == ["eager", "compiled", "ours"]

    # a benchmark without bf16 data opens on the dtype it has, not on an empty plot
    assert _active(_dom(html, "cpu.OpHost.track_host_time"), "dtype") == ["fp32"]

    # a link that says what it wants gets it
    chosen = _dom(html, "fam.OpDevice.track_device_time?p-dtype=%27fp32%27&p-variant=%27eager%27")
    assert _active(chosen, "dtype") == ["fp32"]
    assert "active" not in re.search(r'id="zoom-y-axis" class="([^"]*)"', chosen).group(1)
