"""Only HTML responses are pages (docs/scoring.md, "Which responses are pages"): a real HTTP server
on loopback serves a small site whose links lead to a feed, a sitemap, JSON, plain text and an
XHTML page; a page without a declared charset in Big5 is decoded as Big5. Real ``scrapy crawl``
runs in live mode with the loopback host allowed."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import loopback_server, reply, run_crawl

WORDS = "volcano lava magma eruption volcano lava"
HTML = "<html><head><title>{title}</title></head><body><p>{text}</p>{links}</body></html>"
LINKED = {
    "/page2.html": "text/html; charset=utf-8",
    "/xhtml.xml": "application/xml",
    "/big5.html": "text/html",  # no charset, no meta: sniffed
    "/feed.xml": "application/rss+xml",
    "/feed-text.xml": "text/xml",
    "/sitemap.xml": "application/xml",
    "/data.json": "application/json",
    "/notes.txt": "text/plain",
    "/feed-untyped.xml": None,  # no Content-Type: an XML document, not XHTML
}
NOT_PAGES = {"/feed.xml", "/feed-text.xml", "/sitemap.xml", "/data.json", "/notes.txt", "/feed-untyped.xml"}
BIG5_TITLE = "火山噴發與岩漿災害報導"


def _body(path: str) -> bytes:
    if path == "/":
        links = "".join(f'<a href="{p}">volcano {p}</a> ' for p in LINKED)
        return HTML.format(title="Volcano home", text=WORDS, links=links).encode()
    if path == "/page2.html":
        return HTML.format(title="Lava flows", text=WORDS, links="").encode()
    if path == "/xhtml.xml":
        return ('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Magma chambers'
                f"</title></head><body><p>{WORDS}</p></body></html>").encode()
    if path == "/big5.html":
        return HTML.format(title=BIG5_TITLE, text="火山噴發。岩漿從火山口流出，火山灰瀰漫天空。", links="").encode("big5")
    if path in ("/feed.xml", "/feed-text.xml", "/feed-untyped.xml"):
        return (f'<?xml version="1.0"?><rss><channel><title>Volcano feed</title><item><title>{WORDS}</title>'
                "<link>/page2.html</link></item></channel></rss>").encode()
    if path == "/sitemap.xml":
        return ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>'
                f"/page2.html</loc></url><!-- {WORDS} --></urlset>").encode()
    if path == "/data.json":
        return json.dumps({"title": "volcano", "text": WORDS}).encode()
    return f"{WORDS}\n".encode()  # /notes.txt


class _Site(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hits.append(self.path)
        if self.path != "/" and self.path not in LINKED:
            reply(self, 404, content_type=None)
        else:
            reply(self, 200, _body(self.path), LINKED.get(self.path, "text/html; charset=utf-8"))

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    with loopback_server(_Site, hits=[]) as server:
        yield server


def _crawl(tmp_path, site, topic_lines: list[str], strategy: str = "bestfirst"):
    base = f"http://127.0.0.1:{site.server_port}"
    topic = tmp_path / "volcano.toml"
    topic.write_text("\n".join(['name = "volcano"', "beta = 0.3", f'seeds = ["{base}/"]',
                                *(line.format(base=base) for line in topic_lines)]) + "\n", encoding="utf-8")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": strategy}, settings={
        "TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "127.0.0.1", "TOPICCRAWL_PLOT_ENABLED": "false",
        "RETRY_TIMES": "0", "DOWNLOAD_TIMEOUT": "5"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    return proc, {i["url"].removeprefix(base): i for i in items}, stats


WORDS_TOML = ["[words]", "volcano = 1.0", "lava = 0.8", "magma = 0.8", "火山 = 1.0", "岩浆 = 0.8"]


def test_only_html_responses_are_pages(tmp_path, site):
    proc, items, stats = _crawl(tmp_path, site, WORDS_TOML)
    assert NOT_PAGES <= set(site.hits)  # fetched: a link led to each
    assert set(items) == {"/", "/page2.html", "/xhtml.xml", "/big5.html"}
    assert stats["topiccrawl/non_html"] == len(NOT_PAGES)
    assert stats["topiccrawl/dp"] == 4
    assert items["/xhtml.xml"]["title"] == "Magma chambers"
    assert items["/big5.html"]["title"] == BIG5_TITLE and items["/big5.html"]["relevance"] > 0


def test_an_example_that_is_not_html_is_not_used(tmp_path, site):
    proc, items, stats = _crawl(tmp_path, site, [
        'examples = ["{base}/page2.html", "{base}/xhtml.xml", "{base}/data.json", "{base}/notes.txt"]',
        *WORDS_TOML], strategy="learned")
    assert stats["topiccrawl/examples/fetched"] == 2
    assert stats["topiccrawl/examples/not_html"] == 2
    assert f"example page http://127.0.0.1:{site.server_port}/data.json is not an HTML page " \
           "(Content-Type application/json): not used" in proc.stderr
    assert "Traceback" not in proc.stderr
