"""Search backends: request URLs, parsing SearXNG-shaped JSON (hand-written fixtures in the shapes
SearXNG answers with), one-line errors, and the local backend against a real offline web lab."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest

from topiccrawl.discovery.search import (
    LocalSearchBackend,
    SearchBackend,
    SearchBackendError,
    SearchResult,
    SearXNGBackend,
    make_backend,
)
from topiccrawl.scoring.text import extract
from topiccrawl.weblab.api import WebLab

#: a general-category SearXNG answer: merged engines, an infobox, a null content, a duplicate URL
SEARXNG_GENERAL = {
    "query": "real estate shenyang", "number_of_results": 0,
    "results": [
        {"url": "https://www.example-homes.com/shenyang", "title": "Shenyang homes for sale",
         "content": "Browse apartments and villas in Shenyang.", "engine": "duckduckgo",
         "parsed_url": ["https", "www.example-homes.com", "/shenyang", "", "", ""],
         "template": "default.html", "engines": ["duckduckgo", "brave"], "positions": [1, 3],
         "score": 3.5, "category": "general", "publishedDate": None, "thumbnail": None},
        {"url": "http://house.example.cn/sy/", "title": "沈阳房产网", "content": None,
         "engine": "bing", "engines": ["bing"], "positions": [2], "score": 0.5,
         "category": "general"},
        {"url": "https://www.example-homes.com/shenyang", "title": "dup", "content": "",
         "engine": "brave", "engines": ["brave"], "positions": [4], "score": 0.2},
    ],
    "answers": [], "corrections": [],
    "infoboxes": [{"infobox": "Real estate", "id": "https://en.wikipedia.org/wiki/Real_estate",
                   "content": "Real estate is property...", "engine": "wikipedia",
                   "urls": [{"title": "Wikipedia", "url": "https://en.wikipedia.org/wiki/Real_estate"}]}],
    "suggestions": ["real estate agent"], "unresponsive_engines": [["google", "timeout"]],
}
#: an images-category result carries img_src/thumbnail_src next to url
SEARXNG_IMAGES = {"query": "楼盘", "results": [
    {"url": "https://pics.example.cn/a", "title": "楼盘 实景", "content": "", "template": "images.html",
     "img_src": "https://pics.example.cn/a.jpg", "thumbnail_src": "https://pics.example.cn/a_t.jpg",
     "engine": "bing images", "category": "images"}]}
SEARXNG_EMPTY = {"query": "zzqqxx", "number_of_results": 0, "results": [], "answers": [],
                 "corrections": [], "infoboxes": [], "suggestions": [],
                 "unresponsive_engines": []}


def body(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


def test_searxng_urls():
    for base in ("http://127.0.0.1:8888", "http://127.0.0.1:8888/", "http://127.0.0.1:8888/search"):
        backend = SearXNGBackend(base)
        url = backend.search_url("房地产 物业", 2)
        parts = urlsplit(url)
        assert parts.path == "/search"
        assert parse_qs(parts.query) == {"q": ["房地产 物业"], "format": ["json"], "pageno": ["2"]}
    searx = SearXNGBackend("https://searx.example/sx/", language="zh-CN", categories="general")
    assert parse_qs(urlsplit(searx.search_url("x")).query)["language"] == ["zh-CN"]
    assert urlsplit(searx.search_url("x")).path == "/sx/search"
    assert searx.capabilities == {"KS"}
    assert searx.query("KS", "房产 沈阳") == "房产 沈阳"
    with pytest.raises(SearchBackendError, match="searxng search backend cannot serve RS"):
        searx.query("RS", "http://a.cn/")


def test_local_queries_and_factory():
    local = make_backend("local")
    assert local.base_url == "http://search.topiccrawl.test/search"
    assert local.capabilities == {"KS", "RS", "BC"}
    assert local.query("RS", "http://a.cn/x") == "related:http://a.cn/x"
    assert local.query("BC", "http://a.cn/x") == "link:http://a.cn/x"
    assert isinstance(make_backend("searxng", "http://s.test"), SearXNGBackend)
    with pytest.raises(SearchBackendError, match="unknown search backend 'bing'"):
        make_backend("bing")
    with pytest.raises(SearchBackendError, match="needs the instance's base URL"):
        make_backend("searxng")
    with pytest.raises(SearchBackendError, match="'ftp://x' is not an absolute http"):
        SearXNGBackend("ftp://x")
    with pytest.raises(SearchBackendError, match="pageno must be a positive integer"):
        local.search_url("x", 0)
    with pytest.raises(SearchBackendError, match="empty query"):
        local.search_url("  ")


def test_parse_searxng_shapes():
    backend = SearXNGBackend("http://s.test")
    got = backend.parse(body(SEARXNG_GENERAL))
    assert got == [SearchResult("https://www.example-homes.com/shenyang", "Shenyang homes for sale",
                                "Browse apartments and villas in Shenyang."),
                   SearchResult("http://house.example.cn/sy/", "沈阳房产网", "")]
    assert backend.parse(body(SEARXNG_IMAGES)) == [SearchResult("https://pics.example.cn/a", "楼盘 实景")]
    assert backend.parse(body(SEARXNG_EMPTY)) == []


def test_hits_that_are_not_http_are_skipped_not_the_page():
    raw = json.dumps({"results": [{"url": "http://a.test/1", "title": "one"},
                                  {"url": "ftp://ftp.cs.a.test/pub/paper.ps", "title": "ftp"},
                                  {"url": "javascript:void(0)"}, {"url": "mailto:x@a.test"}, {"url": "/relative"},
                                  {"url": "https://b.test/2"}]}).encode()
    for backend in (LocalSearchBackend(), SearXNGBackend("http://s.test")):
        assert [r.url for r in backend.parse(raw)] == ["http://a.test/1", "https://b.test/2"]
    assert LocalSearchBackend().parse(b'{"results": [{"url": "ftp://x.test/a"}]}') == []


def test_site_query_string_is_passed_through():
    assert SearchBackend.site_query("WWW.cs.A.test.", "professor  ") == "site:www.cs.a.test professor"
    assert SearchBackend.site_query("a.test") == "site:a.test"
    for backend in (LocalSearchBackend(), SearXNGBackend("http://s.test", language="en")):
        url = backend.search_url(backend.site_query("a.test", "course syllabus"))
        assert parse_qs(urlsplit(url).query)["q"] == ["site:a.test course syllabus"]
    for bad in ("http://a.test/", "a.test/x", " ", "a b"):
        with pytest.raises(SearchBackendError, match="site: needs a bare host name"):
            SearchBackend.site_query(bad, "x")


@pytest.mark.parametrize("raw, message", [
    (b"", "searxng search response is not JSON"),
    (b"<!DOCTYPE html><html><body>403 Forbidden</body></html>",
     "not JSON .* is 'json' listed under search.formats"),
    (b"\xff\xfe\x00", "not JSON \\(not UTF-8"),
    (b"[1, 2]", "is a JSON list, expected an object"),
    (b'{"query": "x"}', "has no 'results' list"),
    (b'{"results": {"url": "http://a/"}}', "has no 'results' list"),
    (b'{"results": [{"url": "http://a/"}, {"title": "no url"}]}', "result 1 has no 'url' string"),
    (b'{"results": [{"url": "http://a/"}, "http://b/"]}', "result 1 has no 'url' string"),
    (b'{"error": "search index building"}', "search engine error: search index building"),
])
def test_malformed_bodies_give_one_line_errors(raw, message):
    with pytest.raises(SearchBackendError, match=message) as err:
        SearXNGBackend("http://s.test").parse(raw)
    assert "\n" not in str(err.value)


# -- the local backend against the offline web lab --------------------------------------------

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    old = os.environ.get("TOPICCRAWL_CACHE")
    os.environ["TOPICCRAWL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        with WebLab("generated:zh-realestate?pages=3000") as running:
            yield running
    finally:
        if old is None:
            os.environ.pop("TOPICCRAWL_CACHE", None)
        else:
            os.environ["TOPICCRAWL_CACHE"] = old


def get(url: str) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=120) as resp:
            return resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.read()


def test_local_backend_keywords_related_and_links(lab):
    backend = LocalSearchBackend(lab.search_url)
    first = backend.parse(get(backend.search_url(backend.query("KS", "房产 楼盘"))))
    second = backend.parse(get(backend.search_url(backend.query("KS", "房产 楼盘"), 2)))
    assert len(first) == 10 and second and not {r.url for r in first} & {r.url for r in second}
    assert all(r.url.startswith("http://") and r.title for r in first)

    target = first[0].url
    related = backend.parse(get(backend.search_url(backend.query("RS", target))))
    assert related and target not in {r.url for r in related}

    linked = [r for r in first + second
              if backend.parse(get(backend.search_url(backend.query("BC", r.url))))]
    assert linked, "no result page has backlinks"
    hubs = backend.parse(get(backend.search_url(backend.query("BC", linked[0].url))))
    for hub in hubs[:3]:
        status, headers, page = lab.fetch(hub.url)
        assert status == 200
        anchors = {a.url for a in extract(page, hub.url, headers.get("Content-Type")).anchors}
        assert linked[0].url in anchors


def test_local_backend_site_query_over_http(lab):
    backend = LocalSearchBackend(lab.search_url)
    first = backend.parse(get(backend.search_url("房产")))
    host = urlsplit(first[-1].url).hostname
    own = backend.parse(get(backend.search_url(backend.site_query(host, "房产"))))
    assert own and {urlsplit(r.url).hostname for r in own} == {host}
    assert first[-1].url in {r.url for r in own}
    assert len({urlsplit(r.url).hostname for r in first}) > 1  # the filter did something


def test_local_backend_default_host_through_the_proxy(lab):
    backend = LocalSearchBackend()
    status, _, answer = lab.fetch(backend.search_url("房价"))
    assert status == 200
    direct = LocalSearchBackend(lab.search_url)
    assert backend.parse(answer) == direct.parse(get(direct.search_url("房价")))


def test_local_engine_error_body(lab):
    with pytest.raises(SearchBackendError, match="local search engine error: empty query"):
        LocalSearchBackend(lab.search_url).parse(get(f"{lab.search_url}?q=&format=json"))
