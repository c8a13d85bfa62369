"""Make an ``asv publish`` report self-contained (no CDN assets).

asv 0.6.6's ``index.html`` loads jQuery, Flot (+ plugins), stupidtable,
blueimp-md5 and Bootstrap from public CDNs, so on a machine without network
the report shows no graphs.  This module serves those files from
``<html_dir>/vendor/`` instead.  The files come from the npm registry: the
package tarballs of the same versions, pinned by the registry's sha512
``integrity`` and cached (default ``~/.cache/mlpbench/asv-assets``; override
with ``--cache-dir`` or ``$MLPBENCH_ASV_ASSETS``).

CLI::

    python -m mlpbench.asv.offline fetch              # download + verify into cache
    python -m mlpbench.asv.offline vendor HTML_DIR    # copy into HTML_DIR/vendor, rewrite URLs
    python -m mlpbench.asv.offline check HTML_DIR     # list remaining remote references

As an asv plugin (``"plugins": [".mlpbench.asv.offline"]`` in asv.conf.json,
asv run from the directory containing ``mlpbench/``) plain ``asv publish``
vendors the assets itself, and is atomic: it builds into a hidden sibling of
html_dir, adds mlpbench's dashboard defaults (mlpbench/asv/dashboard.py),
checks that the result is whole and offline, and only then swaps it in; a
failure leaves the previous html_dir as it was.

Exit status 2 means an asset is neither cached nor fetchable (or the HTML
references a remote asset this module does not know).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html.parser
import http.client
import io
import os
import re
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import NamedTuple

from .dashboard import DashboardError
from .dashboard import finish as finish_dashboard

REGISTRY = os.environ.get("MLPBENCH_NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")


class Package(NamedTuple):
    name: str
    version: str
    integrity: str  # npm registry "dist.integrity" of the tarball
    files: tuple[str, ...]  # paths inside the package to vendor

    @property
    def tarball(self) -> str:
        return f"{self.name}-{self.version}.tgz"

    @property
    def url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.tarball}"

    @property
    def dirname(self) -> str:
        return f"{self.name}-{self.version}"


_FLOT = ("jquery.flot.js", "jquery.flot.time.js", "jquery.flot.selection.js", "jquery.flot.categories.js")
_GLYPHS = tuple(f"dist/fonts/glyphicons-halflings-regular.{e}" for e in ("eot", "svg", "ttf", "woff"))

PACKAGES = {
    p.name: p
    for p in (
        Package("jquery", "3.3.1",
                "sha512-Ubldcmxp5np52/ENotGxlLe6aGMvmF4R8S6tZjsP6Knsaxd/xp3Zrh50cG93lR6nPXyUFwzN3ZSOQI0wRJNdGg==",
                ("dist/jquery.min.js",)),
        Package("flot", "0.8.3",
                "sha512-xg2otcTJDvS+ERK+my4wxG/ASq90QURXtoM4LhacCq0jQW2jbyjdttbRNqU2cPykrpMvJ6b2uSp6SAgYAzj9tQ==",
                _FLOT),
        Package("flot-orderbars", "1.0.0",
                "sha512-Jv51fvzevUjNXEeozpwEKfPjhiZhfiJddv0WHjduUTCmSF+7T5K7C9c9Y1wIVmUhDBv5fLMjgbwKecT0GIKPZA==",
                ("js/jquery.flot.orderBars.js",)),
        # stupidtable 1.0.1 (asv's cdnjs version) was never published to npm;
        # 1.1.3 is the first npm release, same author and same API.
        Package("stupid-table-plugin", "1.1.3",
                "sha512-2Vk7XouQPxUQPRe9w0Fu7ZZ8kHLK7rDoLMsCgtKxRNJ7f4dSOGvW9CkHsq5wD6QsaEnWoyLBYH3xOEsrK3yWBg==",
                ("stupidtable.min.js",)),
        Package("blueimp-md5", "2.19.0",
                "sha512-DRQrD6gJyy8FbiE4s+bDoXS9hiW3Vbx5uCdwvcCf3zLHL+Iv7LtGHLpr+GZV8rHG8tK766FGYBwRbu8pELTt+w==",
                ("js/md5.min.js",)),
        Package("bootstrap", "3.1.1",
                "sha512-TAzqS8E/ISpVHP29gYhy+1NSV+FJwApDVQhDfgLYsIuUDJiqJzH2DfORN5tiu+Ie2iBLrzEG34t4Rf465cigqg==",
                ("dist/js/bootstrap.min.js", "dist/css/bootstrap.min.css") + _GLYPHS),
    )
}

_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
# remote URL in asv 0.6.6's www/index.html -> (npm package, file in package,
# byte-identical to the CDN file?).  Identical files are also checked against
# the SRI hash asv's index.html pins.  cdnjs' flot *.min.js are minified copies
# of the same 0.8.3 sources; npm ships only the unminified files, used instead.
ASSETS: dict[str, tuple[str, str, bool]] = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery", "dist/jquery.min.js", True),
    **{f"{_CDNJS}/flot/0.8.3/{f[:-3]}.min.js": ("flot", f, False) for f in _FLOT},
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js":
        ("flot-orderbars", "js/jquery.flot.orderBars.js", True),
    f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js": ("stupid-table-plugin", "stupidtable.min.js", False),
    f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5", "js/md5.min.js", True),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js":
        ("bootstrap", "dist/js/bootstrap.min.js", True),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css":
        ("bootstrap", "dist/css/bootstrap.min.css", True),
}
VENDOR = "vendor"


class AssetError(RuntimeError):
    """An asset is missing/unverifiable, or the HTML needs an unknown one."""


def default_cache_dir() -> Path:
    env = os.environ.get("MLPBENCH_ASV_ASSETS")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mlpbench" / "asv-assets"


def _sri_ok(data: bytes, integrity: str) -> bool:
    """True if ``data`` matches any hash of an SRI string ("sha512-<b64> ...")."""
    for token in integrity.split():
        algo, _, b64 = token.partition("-")
        if algo in ("sha256", "sha384", "sha512"):
            if base64.b64encode(hashlib.new(algo, data).digest()).decode() == b64:
                return True
    return False


def _tarball(pkg: Package, cache_dir: Path, fetch: bool) -> bytes:
    path = cache_dir / pkg.tarball
    if path.is_file():
        data = path.read_bytes()
        if _sri_ok(data, pkg.integrity):
            return data
        path.unlink()  # corrupt / truncated: refetch
    if not fetch:
        raise AssetError(f"{pkg.name}@{pkg.version} ({pkg.tarball}) is not in the cache {cache_dir} "
                         "(fetching disabled)")
    try:
        with urllib.request.urlopen(pkg.url, timeout=30) as resp:
            data = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise AssetError(
            f"{pkg.name}@{pkg.version} ({pkg.tarball}) is not in the cache {cache_dir} and could not be fetched "
            f"from {pkg.url}: {exc}.\nRun `python -m mlpbench.asv.offline fetch` where the npm registry "
            f"is reachable and copy {cache_dir} here (or point $MLPBENCH_ASV_ASSETS at a copy).") from exc
    if not _sri_ok(data, pkg.integrity):
        raise AssetError(f"{pkg.url}: checksum mismatch (expected {pkg.integrity})")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache_dir, delete=False) as tmp:
        tmp.write(data)
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, path)
    return data


def fetch_assets(cache_dir: Path | None = None, fetch: bool = True) -> list[Path]:
    """Ensure every pinned tarball is in ``cache_dir`` and verified."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    for pkg in PACKAGES.values():
        _tarball(pkg, cache_dir, fetch)
    return [cache_dir / p.tarball for p in PACKAGES.values()]


def _members(data: bytes) -> dict[str, bytes]:
    """Regular files of an npm tarball, keyed by path without the top dir ('package/')."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            if m.isfile() and "/" in m.name:
                out[m.name.split("/", 1)[1]] = tar.extractfile(m).read()
    return out


def _write(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


# ---------------------------------------------------------------- scanning
_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, //cdn...
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.I)
_LINK_TAGS = {"a", "area"}  # hyperlinks: navigation, not loaded by the page


def _is_remote(url: str) -> bool:
    return bool(_REMOTE.match(url)) and not url.strip().lower().startswith(("data:", "file:"))


class _RefScanner(html.parser.HTMLParser):
    def __init__(self, include_links: bool):
        super().__init__(convert_charrefs=True)
        self.include_links = include_links
        self.refs: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self._in_style = tag == "style"
        for key, val in attrs:
            if not val:
                continue
            if key in ("src", "href", "srcset", "data", "poster", "background"):
                if tag in _LINK_TAGS and key == "href" and not self.include_links:
                    continue
                urls = [u.split()[0] for u in val.split(",") if u.strip()] if key == "srcset" else [val]
                self.refs += [u for u in urls if _is_remote(u)]
            elif key == "style":
                self.refs += _css_refs(val)

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.refs += _css_refs(data)


def _css_refs(text: str) -> list[str]:
    return [u for m in _CSS_URL.finditer(text) for u in m.groups() if u and _is_remote(u)]


def find_remote_refs(html_dir: Path, include_links: bool = False) -> list[tuple[str, str]]:
    """(file relative to html_dir, url) for every remote asset reference.

    Covers src/href/srcset/... attributes and CSS ``url()``/``@import`` in
    ``*.html``/``*.htm`` and ``*.css`` files under ``html_dir``.  ``<a href>``
    hyperlinks (e.g. asv's link to its GitHub page) load nothing and are
    only reported with ``include_links=True``.
    """
    html_dir = Path(html_dir)
    found = []
    for path in sorted(html_dir.rglob("*")):
        suffix = path.suffix.lower()
        if not path.is_file() or suffix not in (".html", ".htm", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if suffix == ".css":
            refs = _css_refs(text)
        else:
            scanner = _RefScanner(include_links)
            scanner.feed(text)
            scanner.close()
            refs = scanner.refs
        found += [(path.relative_to(html_dir).as_posix(), u) for u in refs]
    return found


# ---------------------------------------------------------------- vendoring
_TAG = re.compile(r"<(script|link)\b[^>]*>", re.I)
_ATTR = re.compile(r"""\s(src|href|integrity|crossorigin|referrerpolicy)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", re.I)
_DROP = ("integrity", "crossorigin", "referrerpolicy")


def _rewrite_html(text: str, rel_to_vendor: str, contents: dict[str, bytes]) -> str:
    def fix(m: re.Match) -> str:
        tag = m.group(0)
        attrs = {k.lower(): v.strip("'\"") for k, v in _ATTR.findall(tag)}
        url = attrs.get("src") or attrs.get("href")
        if not url or url not in ASSETS:
            return tag
        pkg, member, identical = ASSETS[url]
        local = f"{PACKAGES[pkg].dirname}/{member}"
        sri = attrs.get("integrity")
        if identical and sri and not _sri_ok(contents[local], sri):
            raise AssetError(f"{local} does not match the integrity asv pinned for {url}")
        # SRI/CORS attributes are dropped: the file is verified above and comes
        # from the same origin (and they would block loading from file://).
        tag = _ATTR.sub(lambda a: "" if a.group(1).lower() in _DROP else a.group(0), tag)
        return tag.replace(url, f"{rel_to_vendor}/{local}")

    return _TAG.sub(fix, text)


def vendor_assets(html_dir: Path, cache_dir: Path | None = None, fetch: bool = True) -> list[str]:
    """Copy the pinned assets into ``html_dir/vendor`` and point the HTML at them.

    Returns the vendored files (relative to ``html_dir``).  Idempotent.
    Raises :class:`AssetError` if an asset is neither cached nor fetchable,
    or if a remote asset reference remains afterwards.
    """
    html_dir = Path(html_dir)
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    if not html_dir.is_dir():
        raise AssetError(f"{html_dir} is not a directory")
    contents: dict[str, bytes] = {}
    vendored: list[str] = []
    for pkg in PACKAGES.values():
        members = _members(_tarball(pkg, cache_dir, fetch))
        extra = [n for n in members if "/" not in n and (n.startswith("LICENSE") or n == "package.json")]
        for name in list(pkg.files) + extra:
            if name not in members:
                raise AssetError(f"{name} missing from {pkg.tarball}")
            rel = f"{pkg.dirname}/{name}"
            contents[rel] = members[name]
            _write(html_dir / VENDOR / rel, members[name])
            vendored.append(f"{VENDOR}/{rel}")

    for page in sorted(html_dir.rglob("*.htm*")):
        if VENDOR in page.relative_to(html_dir).parts:
            continue
        rel_to_vendor = os.path.relpath(html_dir / VENDOR, page.parent).replace(os.sep, "/")
        text = page.read_text(encoding="utf-8")
        new = _rewrite_html(text, rel_to_vendor, contents)
        if new != text:
            page.write_text(new, encoding="utf-8")

    left = find_remote_refs(html_dir)
    if left:
        raise AssetError("remote asset references remain (unknown asv version?):\n"
                         + "\n".join(f"  {f}: {u}" for f, u in left))
    return vendored


# ------------------------------------------------------ asv plugin hook
try:  # `"plugins": [".mlpbench.asv.offline"]` makes `asv publish` call this
    from asv.publishing import OutputPublisher as _OutputPublisher
except ImportError:  # pragma: no cover - asv not installed
    _OutputPublisher = None

if _OutputPublisher is not None:
    class OfflineAssets(_OutputPublisher):
        """asv publisher: runs last and vendors the CDN assets into html_dir."""

        order = float("inf")

        @classmethod
        def publish(cls, conf, repo, benchmarks, graphs, revisions):
            from asv import util
            try:
                vendor_assets(Path(conf.html_dir))
            except AssetError as exc:
                raise util.UserError(f"mlpbench.asv.offline: {exc}") from exc


# Files the dashboard fetches besides those index.html loads (ASV's publish writes them last).
REQUIRED = ("index.html", "index.json", "info.json", "regressions.json", "error.html")
_LOADS = re.compile(r"<(?:script|link)\b[^>]*?\s(?:src|href)=[\"']([^\"'#?]+)", re.I)


def check_site(html_dir: Path) -> None:
    """Raise AssetError unless html_dir is a whole dashboard that loads nothing remote."""
    html_dir = Path(html_dir)
    index = (html_dir / "index.html").read_text(encoding="utf-8") if (html_dir / "index.html").is_file() else ""
    local = [u for u in _LOADS.findall(index) if not _is_remote(u)]
    missing = [f for f in list(REQUIRED) + local if not (html_dir / f).is_file()]
    if missing:
        raise AssetError(f"the dashboard built in {html_dir} lacks {', '.join(missing)}")
    left = find_remote_refs(html_dir)
    if left:
        raise AssetError("the dashboard still loads remote files:\n" + "\n".join(f"  {f}: {u}" for f, u in left))


def build_and_swap(html_dir: str, build) -> None:
    """Run ``build(tmp_dir)`` into a fresh sibling of html_dir, finish and check it, then put it in
    html_dir's place. On any failure html_dir is left as it was and the sibling is removed."""
    import shutil

    final = Path(html_dir).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-tmp-", dir=final.parent))  # same filesystem
    try:
        new = work / final.name
        build(str(new))
        finish_dashboard(new)
        check_site(new)
        old = work / "previous"
        if final.exists():
            os.rename(final, old)
        try:
            os.rename(new, final)
        except BaseException:
            if old.exists():
                os.rename(old, final)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def setup() -> None:
    """asv plugin hook: ``asv publish`` builds into a temporary folder and replaces html_dir only
    with a whole, offline dashboard. Idempotent (the module may be imported twice)."""
    from asv import util
    from asv.commands.publish import Publish

    if getattr(Publish.run, "_mlpbench_atomic", False):
        return
    stock_run = Publish.run

    def run(cls, conf, *args, **kwargs):
        final = conf.html_dir
        result = []

        def build(tmp):
            conf.html_dir = tmp
            result.append(stock_run(conf, *args, **kwargs))

        try:
            build_and_swap(final, build)
        except (AssetError, DashboardError, util.UserError) as exc:
            msg = str(exc).removeprefix("mlpbench.asv.offline: ")
            raise util.UserError(f"mlpbench.asv.offline: {msg}\n{final} was left as it was.") from exc
        finally:
            conf.html_dir = final
        return result[0]

    run._mlpbench_atomic = True
    Publish.run = classmethod(run)


# ---------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mlpbench.asv.offline", description=__doc__.split("\n\n")[0])
    cache = argparse.ArgumentParser(add_help=False)
    cache.add_argument("--cache-dir", type=Path, default=None,
                       help=f"tarball cache (default $MLPBENCH_ASV_ASSETS or {default_cache_dir()})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", parents=[cache], help="download and verify the pinned npm tarballs into the cache")
    v = sub.add_parser("vendor", parents=[cache], help="copy assets into HTML_DIR/vendor and rewrite remote URLs")
    v.add_argument("html_dir", type=Path)
    v.add_argument("--no-fetch", action="store_true", help="use only the cache, never the network")
    c = sub.add_parser("check", help="list remote references left in HTML_DIR (exit 1 if any)")
    c.add_argument("html_dir", type=Path)
    c.add_argument("--include-links", action="store_true", help="also report <a href> hyperlinks")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            for p in fetch_assets(args.cache_dir):
                print(p)
        elif args.cmd == "vendor":
            files = vendor_assets(args.html_dir, args.cache_dir, fetch=not args.no_fetch)
            print(f"vendored {len(files)} files into {args.html_dir / VENDOR}; no remote assets referenced")
        else:
            refs = find_remote_refs(args.html_dir, include_links=args.include_links)
            for f, u in refs:
                print(f"{f}: {u}")
            return 1 if refs else 0
    except AssetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
