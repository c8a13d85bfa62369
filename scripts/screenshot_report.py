#!/usr/bin/env python3
"""Screenshot an ``asv publish`` report in headless Chromium with no network.

    python scripts/screenshot_report.py HTML_DIR OUT.png [--page 'bench.time_sum']

HTML_DIR is served on a loopback HTTP server (the report fetches its JSON
with XHR, which Chromium refuses over file://).  Chromium may reach only
that server: every other host resolves to nothing and any other request goes
to a dead proxy.  Chromium's net log is then scanned and every non-loopback
URL the browser tried is reported; ``--fail-on-remote`` turns them into exit
status 1.  The report's index page is shown unless ``--page`` gives a URL
fragment (e.g. ``#/regressions`` or ``bench.time_sum``).

Needs Chromium (Debian: ``apt-get install chromium``); nothing else beyond
the standard library.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
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


def screenshot(html_dir: Path, out: Path, page: str = "", size: str = "1400,1000",
               budget_ms: int = 15000, chromium: str | None = None, timeout: float = 120) -> dict:
    html_dir, out = html_dir.resolve(), out.resolve()
    if not (html_dir / "index.html").is_file():
        raise SystemExit(f"error: {html_dir}/index.html not found")
    handler = functools.partial(_Handler, directory=str(html_dir))
    _Handler.log = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    frag = page if not page or page.startswith("#") else "#" + page
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html{frag}"
    with tempfile.TemporaryDirectory(prefix="asv-shot-") as tmp:
        netlog = Path(tmp) / "netlog.json"
        cmd = [
            find_chromium(chromium),
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp}/profile", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-domain-reliability", "--disable-quic", "--disable-extensions",
            "--metrics-recording-only", "--no-pings", "--hide-scrollbars",
            "--disable-features=AutofillServerCommunication,OptimizationHints,Translate",
            # network: only the loopback server is reachable
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
            "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1;localhost",
            f"--log-net-log={netlog}",
            f"--window-size={size}", f"--virtual-time-budget={budget_ms}",
            "--run-all-compositor-stages-before-draw",
            f"--screenshot={out}", url,
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
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
    ap.add_argument("html_dir", type=Path)
    ap.add_argument("out", type=Path, help="PNG to write")
    ap.add_argument("--page", default="", help="URL fragment, e.g. '#/regressions' or 'bench.time_sum'")
    ap.add_argument("--size", default="1400,1000", help="window size W,H (default 1400,1000)")
    ap.add_argument("--budget-ms", type=int, default=15000, help="virtual time to let the page draw")
    ap.add_argument("--chromium", default=None, help="browser binary (default /usr/bin/chromium)")
    ap.add_argument("--fail-on-remote", action="store_true",
                    help="exit 1 if the browser tried to reach any non-loopback URL")
    args = ap.parse_args(argv)
    res = screenshot(args.html_dir, args.out, args.page, args.size, args.budget_ms, args.chromium)
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
