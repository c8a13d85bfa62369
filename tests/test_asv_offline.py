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

from mlpbench import asv_offline
from mlpbench.asv_offline import ASSETS, AssetError, find_remote_refs, vendor_assets

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
    (proj / "asv_plugin.conf.json").write_text(json.dumps({**conf, "plugins": [".mlpbench.asv_offline"]}))
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
    """`python -m mlpbench.asv_offline fetch` is run where the npm registry is reachable, which need
    not be a box with torch: importing the package must not need it."""
    code = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = ['asv_offline', 'check', sys.argv[1]]; "
            "runpy.run_module('mlpbench.asv_offline', run_name='__main__')")
    (tmp_path / "index.html").write_text("<!doctype html><title>local only</title>")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ModuleNotFoundError" not in proc.stderr and "ImportError" not in proc.stderr
