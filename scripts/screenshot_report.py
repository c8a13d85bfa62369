#!/usr/bin/env python3
"""Screenshot an ``asv publish`` report, or one HTML page, in headless Chromium with no network.

    python scripts/screenshot_report.py HTML_DIR OUT.png [--page 'bench.time_sum']
    python scripts/screenshot_report.py docs/report/report.html OUT.png [--page '#summary']

HTML_DIR is served on a loopback HTTP server (the report fetches its JSON
with XHR, which Chromium refuses over file://).  Chromium may reach only
that server (a single HTML file is served from its own folder): every other
host resolves to nothing and any other request goes to a dead proxy.  Chromium's net log is then scanned and every non-loopback
URL the browser tried is reported; ``--fail-on-remote`` turns them into exit
status 1.  The report's index page is shown unless ``--page`` gives a URL
fragment (e.g. ``#/regressions`` or ``bench.time_sum``); ``--section ID``
shows a page from one element down (headless Chromium draws a page scrolled
to an anchor blank).

Needs Chromium (Debian: ``apt-get install chromium``); nothing else beyond
the standard library.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def find_chromium(explicit: str | None) -> str:
    for cand in (explicit, os.environ.get("CHROMIUM"), "/usr/bin/chromium",
                 shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if cand and Path(cand).exists():
            return cand
    sys.exit("error: Chromium not found (apt-get install chromium, or pass --chromium / set $CHROMIUM)")


class _Handler(http.server.SimpleHTTPRequestHandler):
    log: list[tuple[int, str]] = []
    # URL path -> (file served under it, HTML appended to it): a page with a probe or a shift added
    extra: dict[str, tuple[str, str]] = {}

    def do_GET(self):
        path = urlsplit(self.path).path
        if path not in self.extra:
            return super().do_GET()
        name, added = self.extra[path]
        body = (Path(self.directory) / name).read_bytes() + added.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code="-", size="-"):
        self.log.append((int(code) if str(code).isdigit() else 0, self.path))

    def log_message(self, *args):  # keep stderr quiet
        pass


def remote_urls_from_netlog(path: Path) -> list[str]:
    """Non-loopback URLs the *page* asked for, from a Chromium net log.

    Chromium's own background traffic (update checks, accounts, ...) also
    shows up in the log (and is blocked as well); it is told apart by its
    requests not having the page's loopback origin as initiator.
    """
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    try:
        data = json.loads(text or "{}")
    except json.JSONDecodeError:  # log not closed cleanly: close it ourselves
        data = json.loads(text.rstrip(",") + "]}")
    types = {v: k for k, v in data.get("constants", {}).get("logEventTypes", {}).items()}
    found: set[str] = set()
    for ev in data.get("events", []):
        params = ev.get("params") or {}
        if types.get(ev.get("type")) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        for_page = (urlsplit(str(params.get("initiator", ""))).hostname or "") in LOOPBACK
        if for_page and (urlsplit(params["url"]).hostname or "") not in LOOPBACK:
            found.add(params["url"])
    return sorted(found)


# Headless Chromium's --screenshot draws only the top of a page: scrolled to an anchor it comes out
# blank. A section is shown by first asking the browser where the section starts (its offset is
# written into the DOM, which --dump-dom prints), then drawing the page moved up by that much.
PROBE = ("<script>document.documentElement.setAttribute('data-section-top', "
         "Math.round(document.getElementById({id!r}).getBoundingClientRect().top + window.scrollY))</script>")
SHIFT = "<style>body{{position:relative;top:-{y}px}}</style>"


def _chromium(binary: str, tmp: str, size: str, budget_ms: int, *args: str) -> list[str]:
    return [
        binary,
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp}/profile", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-domain-reliability", "--disable-quic", "--disable-extensions",
        "--metrics-recording-only", "--no-pings", "--hide-scrollbars",
        "--disable-features=AutofillServerCommunication,OptimizationHints,Translate",
        # network: only the loopback server is reachable
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
        "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1;localhost",
        f"--window-size={size}", f"--virtual-time-budget={budget_ms}",
        "--run-all-compositor-stages-before-draw", *args,
    ]


def screenshot(html_dir: Path, out: Path, page: str = "", size: str = "1400,1000",
               budget_ms: int = 15000, chromium: str | None = None, timeout: float = 120,
               section: str | None = None) -> dict:
    html_dir, out = html_dir.resolve(), out.resolve()
    # a single page (mlpbench report's report.html) is served from its own folder
    html_dir, page_name = (html_dir.parent, html_dir.name) if html_dir.is_file() else (html_dir, "index.html")
    if not (html_dir / page_name).is_file():
        raise SystemExit(f"error: {html_dir}/{page_name} not found")
    binary = find_chromium(chromium)
    handler = functools.partial(_Handler, directory=str(html_dir))
    _Handler.log, _Handler.extra = [], {}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    frag = page if not page or page.startswith("#") else "#" + page
    base = f"http://127.0.0.1:{server.server_address[1]}"
    url = f"{base}/{page_name}{frag}"
    with tempfile.TemporaryDirectory(prefix="asv-shot-") as tmp:
        netlog = Path(tmp) / "netlog.json"
        try:
            if section:
                _Handler.extra["/.probe.html"] = (page_name, PROBE.format(id=section))
                dom = subprocess.run(_chromium(binary, tmp, size, budget_ms, "--dump-dom", f"{base}/.probe.html"),
                                     capture_output=True, text=True, timeout=timeout).stdout
                found = re.search(r'data-section-top="(\d+)"', dom)
                if not found:
                    raise SystemExit(f"error: no element with id {section!r} in {page_name}")
                _Handler.extra["/.shifted.html"] = (page_name, SHIFT.format(y=found.group(1)))
                url = f"{base}/.shifted.html"
            proc = subprocess.run(_chromium(binary, tmp, size, budget_ms, f"--log-net-log={netlog}",
                                            f"--screenshot={out}", url),
                                  capture_output=True, text=True, timeout=timeout)
        finally:
            server.shutdown()
            server.server_close()
        remote = remote_urls_from_netlog(netlog) if netlog.exists() else []
    if proc.returncode != 0 or not out.is_file():
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"error: chromium failed (exit {proc.returncode}), no screenshot written")
    return {"url": url, "requests": list(_Handler.log), "remote_attempts": remote}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html_dir", type=Path, help="an asv publish folder (its index.html is shown) or one HTML file")
    ap.add_argument("out", type=Path, help="PNG to write")
    ap.add_argument("--page", default="", help="URL fragment, e.g. '#/regressions' or 'bench.time_sum'")
    ap.add_argument("--section", metavar="ID",
                    help="show the page from the element with this id down (e.g. 'history' in mlpbench's report)")
    ap.add_argument("--size", default="1400,1000", help="window size W,H (default 1400,1000)")
    ap.add_argument("--budget-ms", type=int, default=15000, help="virtual time to let the page draw")
    ap.add_argument("--chromium", default=None, help="browser binary (default /usr/bin/chromium)")
    ap.add_argument("--fail-on-remote", action="store_true",
                    help="exit 1 if the browser tried to reach any non-loopback URL")
    args = ap.parse_args(argv)
    res = screenshot(args.html_dir, args.out, args.page, args.size, args.budget_ms, args.chromium,
                     section=args.section)
    print(f"screenshot of {res['url']} -> {args.out}")
    bad = [(c, p) for c, p in res["requests"] if c >= 400]
    print(f"served {len(res['requests'])} local requests, {len(bad)} failed")
    for code, path in bad:
        print(f"  {code} {path}")
    for u in res["remote_attempts"]:
        print(f"  page tried remote URL (blocked): {u}")
    if not res["remote_attempts"]:
        print("the page requested no remote URL")
    return 1 if args.fail_on_remote and res["remote_attempts"] else 0


if __name__ == "__main__":
    sys.exit(main())
