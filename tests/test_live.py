"""Live mode: private, loopback and link-local addresses are refused unless explicitly allowed,
also after a redirect and after a DNS answer; a real HTTP server on loopback plays the web."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import run_crawl
from topiccrawl.crawl.settings import ConfigError
from topiccrawl.crawl.middlewares import is_private_host, parse_allow_hosts


@pytest.mark.parametrize("host,private", [
    ("127.0.0.1", True), ("localhost", True), ("10.1.2.3", True), ("192.168.0.9", True),
    ("169.254.1.1", True), ("[::1]", True), ("0.0.0.0", True), ("foo.localhost", True),
    ("localhost.", True), ("[::ffff:127.0.0.1]", True), ("[fe80::1]", True), ("100.64.0.1", False),
    ("93.184.216.34", False), ("example.com", False), ("news.sina.com.cn", False),
])
def test_private_host_classification(host, private):
    assert is_private_host(host) is private


def test_live_crawl_refuses_loopback_seed(tmp_path):
    proc, out = run_crawl(
        tmp_path, args={"topic": "台风灾害", "seeds": "http://127.0.0.1:9/,http://localhost:9/x"},
        settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_PLOT_ENABLED": "false"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/refused_private"] == 4  # two seeds and their robots.txt
    assert stats.get("downloader/request_count", 0) == 0
    assert "refused private/loopback address" in proc.stderr


def test_allow_hosts_parsing():
    names, nets = parse_allow_hosts(" Intranet.Example.com., 10.0.0.0/8,192.168.1.5 ,[::1]")
    assert names == {"intranet.example.com"}
    assert ipaddress.ip_address("10.9.8.7") in nets[0] and ipaddress.ip_address("192.168.1.5") in nets[1]
    with pytest.raises(ConfigError, match="'10.0.0.0/33' is not an IP network"):
        parse_allow_hosts("10.0.0.0/33")


class _Web(BaseHTTPRequestHandler):
    """/start redirects to http://127.0.0.1:PORT/secret; every other path is a small page."""

    def do_GET(self):
        self.server.hits.append(self.path)
        if self.path == "/start":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = "<html><head><title>台风 page</title></head><body>台风灾害</body></html>".encode()
        self.send_response(404 if self.path == "/robots.txt" else 200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def web():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _live_crawl(tmp_path, seed: str, **settings):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": seed}, settings={
        "TOPICCRAWL_WEB": "live", "TOPICCRAWL_PLOT_ENABLED": "false", "RETRY_TIMES": "0", **settings})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "stats.json").read_text(encoding="utf-8"))


def test_redirect_to_loopback_is_refused(tmp_path, web):
    """The first hop is an explicitly allowed host; its 302 to 127.0.0.1 comes back through the
    downloader middlewares and is refused: the server never sees /secret."""
    port = web.server_port
    proc, stats = _live_crawl(tmp_path, f"http://localhost:{port}/start", TOPICCRAWL_LIVE_ALLOW_HOSTS="localhost")
    assert "/start" in web.hits and "/secret" not in web.hits, web.hits
    assert stats["topiccrawl/refused_private"] >= 1
    assert f"refused private/loopback address in live mode: http://127.0.0.1:{port}/secret (redirect target)" in proc.stderr


def _private_hostname() -> str:
    """This machine's name when it resolves (hosts file or DNS) to a private address."""
    name = socket.gethostname()
    try:
        ip = ipaddress.ip_address(socket.gethostbyname(name))
    except OSError:
        pytest.skip(f"host name {name!r} does not resolve")
    if is_private_host(name) or not (ip.is_private or ip.is_loopback):
        pytest.skip(f"host name {name!r} resolves to public {ip} or is a local name already")
    return name


def test_name_resolving_to_a_private_address_is_refused_unless_allowed(tmp_path, web):
    name = _private_hostname()
    url = f"http://{name}:{web.server_port}/page"
    proc, stats = _live_crawl(tmp_path / "refused", url)
    assert web.hits == [] and stats["topiccrawl/refused_private"] == 2  # the page and its robots.txt
    assert f"({name} resolves to " in proc.stderr
    proc, stats = _live_crawl(tmp_path / "allowed", url, TOPICCRAWL_LIVE_ALLOW_HOSTS=name)
    assert web.hits == ["/robots.txt", "/page"] and "topiccrawl/refused_private" not in stats
    assert stats["topiccrawl/dp"] == 1
