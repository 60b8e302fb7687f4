"""A seed that cannot be fetched says so in one warning line, whatever stopped it: its site's
robots.txt, an HTTP error status, a refused connection. A real HTTP server on loopback plays the web
(live mode, the host allowed explicitly)."""

from __future__ import annotations

import io
import json
import logging
import socket
import sys

import pytest
from scrapy.exceptions import CannotResolveHostError

from conftest import QuietHandler, loopback_server, reply, run_crawl
from topiccrawl.crawl.middlewares import DownloadErrorFilter

PAGE = "<html><head><title>台风</title></head><body>台风灾害</body></html>".encode()


class _Web(QuietHandler):
    """robots.txt disallows /private/; /gone is a 404; every other path is a small page."""

    def do_GET(self):
        self.server.hits.append(self.path)
        if self.path == "/robots.txt":
            reply(self, 200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
        elif self.path == "/gone":
            reply(self, 404, b"not here", "text/plain")
        else:
            reply(self, 200, PAGE)


@pytest.fixture
def web():
    with loopback_server(_Web, hits=[]) as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_failed_seed_gets_one_warning(tmp_path, web):
    base = f"http://localhost:{web.server_port}"
    dead = f"http://localhost:{_closed_port()}/"
    # three disallowed seeds: all wait for the host's robots.txt with the others (Scrapy 2.19's own
    # middleware let every waiter after the first through unchecked)
    private = [f"{base}/private/report", f"{base}/private/plan", f"{base}/private/list"]
    seeds = [f"{base}/", *private, f"{base}/gone", dead]
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": ",".join(seeds), "strategy": "bfs",
                                          "max_pages": 5},
                          settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "localhost",
                                    "TOPICCRAWL_PLOT_ENABLED": "false", "RETRY_TIMES": "0",
                                    "DOWNLOAD_TIMEOUT": "5"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    assert not [p for p in web.hits if p.startswith("/private/")], web.hits  # robots.txt obeyed
    for url in private:
        assert f"seed {url} could not be fetched: its site's robots.txt disallows it (ROBOTSTXT_OBEY=True)" in log
    assert f"seed {base}/gone could not be fetched: HTTP status 404" in log
    assert f"seed {dead} could not be fetched: " in log
    assert "Traceback" not in log
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/seeds_failed"] == 5 and stats["robotstxt/forbidden"] == 3
    assert stats["topiccrawl/dp"] == 1  # the one seed that answered


def _record(exc: Exception) -> logging.LogRecord:
    try:
        raise exc
    except Exception:
        info = sys.exc_info()
    return logging.LogRecord("scrapy.core.scraper", logging.ERROR, __file__, 1, "Error downloading %(request)s",
                             ({"request": "<GET http://nx.invalid/>"},), info)


def test_a_network_failure_is_one_line_and_a_program_error_keeps_its_traceback():
    handler = logging.StreamHandler(io.StringIO())
    network = _record(CannotResolveHostError("DNS lookup failed: no results for hostname lookup: nx.invalid."))
    assert DownloadErrorFilter().filter(network)
    assert handler.format(network) == ("Error downloading <GET http://nx.invalid/>: CannotResolveHostError: "
                                       "DNS lookup failed: no results for hostname lookup: nx.invalid.")
    bug = _record(ValueError("a bug"))
    assert DownloadErrorFilter().filter(bug)
    assert "Traceback" in handler.format(bug) and "ValueError: a bug" in handler.format(bug)
