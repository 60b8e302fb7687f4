"""No network access for the public suffix list (issue: an offline crawl reached for the internet).

Scrapy's cookie middleware asks tldextract whether a cookie's ``Domain`` is a public suffix; a
default tldextract downloads the list from publicsuffix.org first. The crawl below runs against a
real loopback server whose page sets a cookie with a ``Domain``, with an empty tldextract cache
and ``HTTPS_PROXY`` pointing at a loopback socket that records every connection: a download
attempt of the list would show up there as ``CONNECT publicsuffix.org:443``.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import loopback_server, run_crawl


class _CookiePage(BaseHTTPRequestHandler):
    def do_GET(self):
        body = "<html><head><title>台风 page</title></head><body>台风灾害 预警</body></html>".encode()
        self.send_response(404 if self.path == "/robots.txt" else 200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Set-Cookie", "sid=1; Domain=lab.example.co.uk; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def cookie_web():
    with loopback_server(_CookiePage) as server:
        yield f"http://127.0.0.1:{server.server_port}/"


@pytest.fixture
def recorder():
    """A loopback socket that records the first bytes of every connection (the would-be proxy)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    hits: list[bytes] = []

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    hits.append(conn.recv(200))
                except OSError:
                    hits.append(b"")

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", hits
    sock.close()


def test_crawl_never_downloads_the_public_suffix_list(tmp_path, cookie_web, recorder, monkeypatch):
    proxy, hits = recorder
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy", "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path / "tldextract-cache"))  # empty: it would have to fetch
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": cookie_web, "max_pages": 1},
                          settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_PRIVATE": "true",
                                    "TOPICCRAWL_PLOT_ENABLED": "false", "COOKIES_DEBUG": "true", "LOG_LEVEL": "DEBUG"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 1
    assert "Received cookies from" in proc.stderr  # the cookie middleware saw the Set-Cookie
    assert hits == [], hits  # no connection attempt through the proxy: no PSL download
    assert "publicsuffix" not in proc.stderr.lower() and "Traceback" not in proc.stderr
