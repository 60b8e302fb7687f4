"""Live mode: every non-global address (private, loopback, link-local, shared, multicast, the
IPv4 inside 6to4/NAT64/IPv4-mapped forms, …) is refused unless explicitly allowed, also after a
redirect and after a DNS answer; a real HTTP server on loopback plays the web."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import loopback_server, run_crawl
from topiccrawl.crawl.addresses import host_refusal, parse_allow_hosts
from topiccrawl.crawl.settings import ConfigError


@pytest.mark.parametrize("host,refused", [
    ("127.0.0.1", True), ("localhost", True), ("10.1.2.3", True), ("192.168.0.9", True),
    ("169.254.1.1", True), ("[::1]", True), ("0.0.0.0", True), ("foo.localhost", True),
    ("localhost.", True), ("[::ffff:127.0.0.1]", True), ("[fe80::1]", True), ("100.64.0.1", True),
    ("100.100.100.200", True), ("224.0.0.1", True), ("[2002:a9fe:a9fe::1]", True),
    ("[64:ff9b::a9fe:a9fe]", True), ("93.184.216.34", False), ("example.com", False),
    ("news.sina.com.cn", False),
])
def test_host_classification(host, refused):
    assert (host_refusal(host) is not None) is refused


def test_live_crawl_refuses_loopback_seed(tmp_path):
    proc, out = run_crawl(
        tmp_path, args={"topic": "台风灾害", "seeds": "http://127.0.0.1:9/,http://localhost:9/x"},
        settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_PLOT_ENABLED": "false"},
    )
    # no page to crawl from: exit 1, nothing written (docs/resilience.md); the stats are in the log
    assert proc.returncode == 1 and "Spider closed (no_pages)" in proc.stderr, proc.stderr[-3000:]
    assert not out.exists()
    stats = logged_stats(proc.stderr)
    assert stats["topiccrawl/refused_private"] == 4  # two seeds and their robots.txt
    assert stats.get("downloader/request_count", 0) == 0
    assert "refused non-global address in live mode: http://127.0.0.1:9/ (address: loopback)" in proc.stderr


def test_allow_hosts_parsing():
    names, nets = parse_allow_hosts(" Intranet.Example.com., 10.0.0.0/8,192.168.1.5 ,[::1]")
    assert names == {"intranet.example.com"}
    assert ipaddress.ip_address("10.9.8.7") in nets[0] and ipaddress.ip_address("192.168.1.5") in nets[1]
    with pytest.raises(ConfigError, match="'10.0.0.0/33' is not an IP network"):
        parse_allow_hosts("10.0.0.0/33")


class _Web(BaseHTTPRequestHandler):
    """/start redirects to http://127.0.0.1:PORT/secret, /metadata to the cloud metadata address
    http://100.100.100.200/latest/meta-data/; every other path is a small page."""

    def do_GET(self):
        self.server.hits.append(self.path)
        if self.path in ("/start", "/metadata"):
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/secret" if self.path == "/start"
                             else "http://100.100.100.200/latest/meta-data/")
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
    with loopback_server(_Web, hits=[]) as server:
        yield server


def _live_crawl(tmp_path, seed: str, **settings):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": seed}, settings={
        "TOPICCRAWL_WEB": "live", "TOPICCRAWL_PLOT_ENABLED": "false", "RETRY_TIMES": "0",
        "DOWNLOAD_TIMEOUT": "3", **settings})
    if "Spider closed (no_pages)" in proc.stderr:  # every seed refused: exit 1, nothing written
        assert proc.returncode == 1 and not out.exists(), proc.stderr[-3000:]
        return proc, logged_stats(proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "stats.json").read_text(encoding="utf-8"))


def logged_stats(log: str) -> dict:
    """The stats Scrapy dumps to the log at close (a crawl that writes no stats.json)."""
    import datetime

    text = log.split("Dumping Scrapy stats:\n", 1)[1]
    return eval(text[:text.index("}\n") + 1], {"datetime": datetime})  # our own crawl's log


def test_redirect_to_loopback_is_refused(tmp_path, web):
    """The first hop is an explicitly allowed host; its 302 to 127.0.0.1 comes back through the
    downloader middlewares and is refused: the server never sees /secret."""
    port = web.server_port
    proc, stats = _live_crawl(tmp_path, f"http://localhost:{port}/start", TOPICCRAWL_LIVE_ALLOW_HOSTS="localhost")
    assert "/start" in web.hits and "/secret" not in web.hits, web.hits
    assert stats["topiccrawl/refused_private"] >= 1
    refused = f"refused non-global address in live mode: http://127.0.0.1:{port}/secret (redirect target: loopback)"
    assert refused in proc.stderr


def test_redirect_to_cloud_metadata_address_is_refused(tmp_path, web):
    """100.100.100.200 (shared address space, a cloud metadata endpoint) is not private in
    Python's sense but not global either: the redirect to it and its robots.txt are refused."""
    proc, stats = _live_crawl(tmp_path, f"http://localhost:{web.server_port}/metadata",
                              TOPICCRAWL_LIVE_ALLOW_HOSTS="localhost")
    assert web.hits == ["/robots.txt", "/metadata"], web.hits
    assert stats["topiccrawl/refused_private"] == 2  # the target and its robots.txt
    assert stats["downloader/request_count"] == 2  # only the two requests to the loopback server
    assert ("refused non-global address in live mode: http://100.100.100.200/latest/meta-data/ "
            "(redirect target: shared address space (RFC 6598))") in proc.stderr


def test_literal_non_global_seeds_are_refused(tmp_path):
    """Shared address space, multicast, IPv6 forms carrying a link-local IPv4 address and an
    integer spelling of 127.0.0.1 (resolved, not parsed): refused before any connection, each
    seed and its robots.txt."""
    seeds = ["http://100.100.100.200/latest/meta-data/", "http://239.255.255.250:1900/",
             "http://[2002:a9fe:a9fe::1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://2130706433:9/"]
    proc, stats = _live_crawl(tmp_path, ",".join(seeds))
    assert stats["topiccrawl/refused_private"] == 10
    assert stats.get("downloader/request_count", 0) == 0
    for line in ("http://239.255.255.250:1900/ (address: multicast)",
                 "http://[2002:a9fe:a9fe::1]/ (address: 6to4 169.254.169.254: link-local)",
                 "http://[64:ff9b::a9fe:a9fe]/ (address: NAT64 169.254.169.254: link-local)",
                 "http://2130706433:9/ (2130706433 resolves to 127.0.0.1: loopback)"):
        assert f"refused non-global address in live mode: {line}" in proc.stderr


_FAKE_DNS = """
from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer

NAMES = {"metadata.example.test": "100.100.100.200"}


class FakeDNS(CachingThreadedResolver):
    def getHostByName(self, name, timeout=()):
        if name in NAMES:
            return defer.succeed(NAMES[name])
        return super().getHostByName(name, timeout)
"""


def test_name_resolving_to_shared_address_space_is_refused(tmp_path, web, monkeypatch):
    """A DNS answer in 100.64.0.0/10 (a resolver that answers from a table, installed with
    Scrapy's TWISTED_DNS_RESOLVER): the name is refused, not connected to; the allow-list
    lets the same name through to the download (which then times out: nothing listens there)."""
    (tmp_path / "fake_dns.py").write_text(_FAKE_DNS, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    url = f"http://metadata.example.test:{web.server_port}/latest/meta-data/"
    proc, stats = _live_crawl(tmp_path / "refused", url, TWISTED_DNS_RESOLVER="fake_dns.FakeDNS")
    assert stats["topiccrawl/refused_private"] == 2  # the page and its robots.txt
    assert stats.get("downloader/request_count", 0) == 0
    assert (f"refused non-global address in live mode: {url} (metadata.example.test resolves to "
            "100.100.100.200: shared address space (RFC 6598))") in proc.stderr
    proc, stats = _live_crawl(tmp_path / "allowed", url, TWISTED_DNS_RESOLVER="fake_dns.FakeDNS",
                              TOPICCRAWL_LIVE_ALLOW_HOSTS="100.64.0.0/10", DOWNLOAD_TIMEOUT="1")
    assert "topiccrawl/refused_private" not in stats and stats["downloader/request_count"] == 2


def _private_hostname() -> str:
    """This machine's name when it resolves (hosts file or DNS) to a private address."""
    name = socket.gethostname()
    try:
        ip = ipaddress.ip_address(socket.gethostbyname(name))
    except OSError:
        pytest.skip(f"host name {name!r} does not resolve")
    if host_refusal(name) is not None or not (ip.is_private or ip.is_loopback):
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


def test_a_live_crawl_of_a_topic_with_labels_reports_no_truth(tmp_path, web):
    """台风灾害 has evaluation labels; on the live web no page has labels to meet them, so there is
    no true harvest rate: stats.json and harvest.csv said 0 (null and empty now, as for a topic
    without labels)."""
    import csv

    proc, stats = _live_crawl(tmp_path, f"http://127.0.0.1:{web.server_port}/page",
                              TOPICCRAWL_LIVE_ALLOW_HOSTS="127.0.0.1")
    assert stats["topiccrawl/dp"] == 1
    for key in ("truth/relevant", "truth/distinct_relevant", "truth/harvest_rate", "truth/site_harvest_rate"):
        assert stats[f"topiccrawl/{key}"] is None, key
    with open(tmp_path / "out" / "harvest.csv", encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["truth_relevant"] == "" and row["truth_harvest_rate"] == "", row
