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
        elif self.path == "/report.pdf":
            reply(self, 200, b"%PDF-1.4 not a page", "application/pdf")
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


@pytest.mark.parametrize("spider,args", [
    ("focused", {"seeds": "truth:3"}),
    ("focused", {"strategy": "learned", "examples": "truth:3"}),
    ("dwdbrm", {"seeds": "truth:3", "pages": "10"}),
])
def test_truth_n_that_finds_no_labelled_page_stops_with_one_line_and_exit_2(tmp_path, spider, args):
    # a topic whose label has a typo: truth:N picked nothing, and the crawl went on without seeds or
    # examples (a misleading "no seed pages: pass -a seeds=…" or "no seed URLs", exit 0, empty outputs)
    topic = tmp_path / "typo.toml"
    topic.write_text('beta = 0.3\nlabels = ["topic:台风灾难"]\n[words]\n台风 = 1.0\n', encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "stats.json").write_text("an earlier crawl's\n", encoding="utf-8")
    proc, _ = run_crawl(tmp_path, spider, args={"topic": str(topic), **args}, feed=False,
                        settings={"TOPICCRAWL_WEB": "generated:zh-disaster?pages=2000", "TOPICCRAWL_MAX_PAGES": "10"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "=truth:3: no page of the offline web generated:zh-disaster" in errors[0], errors
    assert "labels: topic:台风灾难" in errors[0]
    assert sorted(p.name for p in out.iterdir()) == ["stats.json"]  # nothing written over an earlier crawl's
    assert (out / "stats.json").read_text(encoding="utf-8") == "an earlier crawl's\n"


def test_seeds_that_give_no_page_stop_the_crawl_and_leave_an_earlier_runs_files_alone(tmp_path, web):
    """Every seed failed, was refused or was no HTML page: the crawl exited 0 and replaced the
    folder's earlier feed, stats and harvest CSV with empty ones (and deleted an unlabelled
    audit.csv); a PDF seed was dropped without a word."""
    base = f"http://localhost:{web.server_port}"
    settings = {"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "localhost", "TOPICCRAWL_PLOT_ENABLED": "false",
                "RETRY_TIMES": "0", "DOWNLOAD_TIMEOUT": "5"}
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": f"{base}/", "max_pages": 5}, settings=settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert {"pages.jsonl", "stats.json", "harvest.csv", "audit.csv"} <= set(before)
    seeds = [f"{base}/private/plan", f"{base}/gone", f"{base}/report.pdf", f"http://localhost:{_closed_port()}/"]
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": ",".join(seeds), "max_pages": 5},
                          settings=settings)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"seed {base}/report.pdf is not an HTML page (Content-Type application/pdf): no link of it followed" in proc.stderr
    assert "ERROR: no page was crawled: the seeds gave none (the lines above say why)" in proc.stderr
    assert "Spider closed (no_pages)" in proc.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before


class _Flaky(QuietHandler):
    """503 for every page until the test sets ``server.up``; no robots.txt."""

    def do_GET(self):
        if self.path == "/robots.txt":
            reply(self, 404, b"", "text/plain")
        elif self.server.up:
            reply(self, 200, PAGE)
        else:
            reply(self, 503, b"down", "text/plain")


def test_a_jobdir_crawl_that_got_no_page_starts_from_its_seeds_when_run_again(tmp_path):
    """The JOBDIR of a crawl whose seeds gave no page kept their fingerprints: the next run with it
    filtered the seeds out and stopped the same way, whatever the site did meanwhile."""
    with loopback_server(_Flaky, up=False) as server:
        seed = f"http://localhost:{server.server_port}/"
        args = {"topic": "台风灾害", "seeds": seed, "max_pages": 3}
        settings = {"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "localhost", "RETRY_TIMES": "0",
                    "TOPICCRAWL_PLOT_ENABLED": "false", "JOBDIR": str(tmp_path / "job")}
        proc, _ = run_crawl(tmp_path / "a", args=args, settings=settings)
        assert proc.returncode == 1 and "Spider closed (no_pages)" in proc.stderr, proc.stderr[-3000:]
        assert "the next run with it starts from the seeds again" in proc.stderr
        server.up = True
        proc, out = run_crawl(tmp_path / "b", args=args, settings=settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["topiccrawl/dp"] == 1
