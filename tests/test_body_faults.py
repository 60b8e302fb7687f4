"""The body's faults (``badlength``, ``wrong_charset``, ``decode_error``) are counted on the page as
decompressed: a real HTTP server on loopback serves every page gzip-encoded, as most of the live
web does. Checked before decompression, a gzip page was a plain ``Response`` and never checked: a
cut page went uncounted and a wrong charset header stayed."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import QuietHandler, loopback_server, reply, run_crawl

LINKS = ('<a href="/a">台风</a> <a href="/b">灾害</a> <a href="/cut">台风预警</a> <a href="/gbk">台风路径</a> '
         '<a href="/empty">台风</a> <a href="/badgz">台风灾害</a>')
#: a body that is no gzip stream, served as gzip: Scrapy logged the decompressor's traceback
CORRUPT = {"/badgz": b"\x1f\x8b\x08\x00garbagegarbage"}
PAGES = {
    "/": f"<html><head><title>台风首页</title></head><body>台风灾害 {LINKS}</body></html>".encode(),
    "/a": "<html><head><title>台风 a</title></head><body>台风灾害 a</body></html>".encode(),
    "/b": "<html><head><title>灾害 b</title></head><body>台风灾害 b</body></html>".encode(),
    # a page whose HTML stops short (the lab's badlength: the declared length is what was sent)
    "/cut": "<html><head><title>台风预警</title></head><body>台风灾害 预警 ".encode(),
    # GBK bytes, declared utf-8 in the header and gbk in the page
    "/gbk": ('<html><head><meta charset="gbk"><title>台风路径图</title></head>'
             "<body>台风灾害 路径</body></html>").encode("gbk"),
    # an empty page, whole as declared: nothing was cut from it
    "/empty": b"",
}


class _GzipWeb(QuietHandler):
    def do_GET(self):
        self.server.hits.append(self.path)
        page = PAGES.get(self.path)
        if self.path in CORRUPT:
            reply(self, 200, CORRUPT[self.path], headers={"Content-Encoding": "gzip"})
        elif page is None:  # robots.txt and anything else
            reply(self, 404, content_type=None)
        else:
            reply(self, 200, gzip.compress(page), headers={"Content-Encoding": "gzip"})


@pytest.fixture
def web():
    with loopback_server(_GzipWeb, hits=[]) as server:
        yield server


def test_gzip_pages_are_checked_after_decompression(tmp_path, web):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "seeds": f"http://localhost:{web.server_port}/",
                                          "strategy": "bfs", "max_pages": 10},
                          settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "localhost",
                                    "TOPICCRAWL_PLOT_ENABLED": "false", "RETRY_TIMES": "0",
                                    "DOWNLOAD_TIMEOUT": "5"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p for p in web.hits if p != "/robots.txt") == sorted([*PAGES, *CORRUPT]), web.hits
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    faults = {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("topiccrawl/faults/")}
    assert faults == {"badlength": 1, "wrong_charset": 1, "bad_encoding": 1}, faults  # /cut, /gbk, /badgz
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if "/badgz" in line and "ERROR" not in line]
    assert any(f"WARNING: Ignored response <200 http://localhost:{web.server_port}/badgz>: its body does not "
               "decompress as gzip (" in line for line in lines), lines
    assert not any("ERROR" in line and "/badgz" in line for line in proc.stderr.splitlines())
    titles = {json.loads(line)["url"].rsplit("/", 1)[1]: json.loads(line)["title"]
              for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()}
    assert titles["gbk"] == "台风路径图"  # decoded with the page's own charset
    assert stats["topiccrawl/dp"] == len(PAGES)


@pytest.mark.parametrize("user", [None, 590, "absent"])
def test_scrapys_compression_middleware_named_by_the_user_is_left_as_given(user):
    # None for Scrapy's HttpCompressionMiddleware (decompression off) installed the project's copy in
    # its place, so bodies were decompressed anyway; an order keeps Scrapy's; not named: the project's
    from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
    from scrapy.settings import Settings
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    from topiccrawl.crawl.addon import TopicCrawlAddon
    from topiccrawl.crawl.middlewares import CompressionFaultMiddleware
    from topiccrawl.spiders.focused import FocusedSpider

    path = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
    settings = Settings({"DOWNLOADER_MIDDLEWARES": {} if user == "absent" else {path: user}})
    TopicCrawlAddon(type("Crawler", (), {"spidercls": FocusedSpider})()).update_settings(settings)
    enabled = [load_object(x) for x in build_component_list(
        settings.get_component_priority_dict_with_base("DOWNLOADER_MIDDLEWARES"))]  # as Scrapy builds it
    if user == "absent":
        assert CompressionFaultMiddleware in enabled and HttpCompressionMiddleware not in enabled
    elif user is None:  # decompression off, as in Scrapy
        assert CompressionFaultMiddleware not in enabled and HttpCompressionMiddleware not in enabled
    else:
        assert CompressionFaultMiddleware not in enabled and HttpCompressionMiddleware in enabled
