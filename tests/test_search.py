"""The web lab search engine on a small known corpus: ranking, Chinese, related:, link:, paging,
errors, the on-disk cache, and the HTTP endpoint."""

from __future__ import annotations

import json

import pytest

from topiccrawl.weblab.api import WebLab, WebLabError
from topiccrawl.weblab.corpus import MemoryCorpus, Page
from topiccrawl.weblab.search import SearchError, SearchIndex, cache_path

HTML = {"Content-Type": "text/html; charset=utf-8"}
TYPHOON = "http://news.test/typhoon.html"
SURGE = "http://news.test/surge.html"
ZH = "http://zh.test/taifeng.html"
PASTA = "http://food.test/pasta.html"
BREAD = "http://food.test/bread.html"


def page(url: str, title: str, text: str, links: list[str] = ()) -> Page:
    anchors = "".join(f"<a href='{u}'>→</a>" for u in links)
    body = f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>"
    return Page(url, 200, HTML, body.encode(), list(links))


def open_search_fixture(arg: str = "", params: dict | None = None) -> MemoryCorpus:
    pages = [
        page(TYPHOON, "Typhoon warning issued",
             "The typhoon warning covers the coast. Typhoon winds, storm surge and flooding expected; "
             "evacuation of the coast has begun.", [SURGE, ZH]),
        page(SURGE, "Storm surge flooding",
             "A storm surge floods the coast after the typhoon; coastal flooding and evacuation.", [TYPHOON]),
        page(ZH, "台风红色预警", "气象台发布台风红色预警，沿海地区注意防范风暴潮和暴雨。", [TYPHOON]),
        page(PASTA, "Fresh pasta recipe", "Knead flour and eggs, roll the pasta dough thin.", [BREAD, TYPHOON]),
        page(BREAD, "Sourdough bread", "Flour, water and salt make bread dough; bake hot.", [PASTA]),
    ]
    pages += [page(f"http://weather.test/day{i:02d}.html", f"Weather diary {i}",
                   f"forecast weather day {i} " + "sunny " * (i % 5 + 1)) for i in range(25)]
    pages.append(Page("http://news.test/feed.xml", 200, {"Content-Type": "application/xml"}, b"<rss/>"))
    return MemoryCorpus(pages, name="searchfix")


@pytest.fixture(scope="module")
def index():
    return SearchIndex(open_search_fixture()).build()


def urls(answer: dict) -> list[str]:
    return [r["url"] for r in answer["results"]]


def test_answer_is_searxng_shaped(index):
    answer = index.search("pasta")
    assert answer["query"] == "pasta" and answer["number_of_results"] == 1
    (hit,) = answer["results"]
    assert hit["url"] == PASTA and hit["title"] == "Fresh pasta recipe"
    assert "pasta" in hit["content"]
    for key in ("answers", "corrections", "infoboxes", "suggestions", "unresponsive_engines"):
        assert answer[key] == []


def test_keyword_ranking_bm25(index):
    answer = index.search("typhoon")
    # the typhoon page (title + 3 mentions) beats the surge page (1 mention); pasta only links to it
    assert urls(answer) == [TYPHOON, SURGE]
    assert answer["number_of_results"] == 2
    assert answer["results"][0]["score"] > answer["results"][1]["score"]


def test_terms_are_anded_and_or_groups_union(index):
    assert set(urls(index.search("coast evacuation surge"))) == {SURGE, TYPHOON}
    assert urls(index.search("coast recipe")) == []
    assert urls(index.search("typhoon dough")) == []
    assert set(urls(index.search("sourdough OR pasta"))) == {BREAD, PASTA}
    assert index.search("the of and")["number_of_results"] == 0  # only stop words


def test_chinese_query(index):
    answer = index.search("台风预警")
    assert urls(answer) == [ZH]
    assert "台风" in answer["results"][0]["content"]
    assert urls(index.search("风暴潮")) == [ZH]


def test_related_excludes_the_page_and_prefers_similar_pages(index):
    related = urls(index.search(f"related:{TYPHOON}"))
    assert TYPHOON not in related
    assert related[0] == SURGE
    assert PASTA not in related and BREAD not in related
    assert urls(index.search(f"related:{PASTA}"))[0] == BREAD
    assert index.search("related:http://nowhere.test/")["results"] == []


def test_link_query_lists_the_linking_pages(index):
    answer = index.search(f"link:{TYPHOON}")
    assert set(urls(answer)) == {SURGE, ZH, PASTA}
    assert answer["number_of_results"] == 3
    assert urls(index.search(f"link:{BREAD}")) == [PASTA]
    assert index.search("link:http://nowhere.test/")["number_of_results"] == 0


def test_site_operator_keeps_one_host(index):
    # "flour" is on food.test only; "coast" on news.test; "site:" filters, words still rank
    assert set(urls(index.search("flour"))) == {PASTA, BREAD}
    assert urls(index.search("site:news.test flour")) == []
    answer = index.search("coast site:news.test")
    assert set(urls(answer)) == {TYPHOON, SURGE} and answer["number_of_results"] == 2
    assert urls(index.search("typhoon site:zh.test")) == []
    assert urls(index.search("site:NEWS.test. typhoon")) == urls(index.search("typhoon site:news.test"))
    # alone: the host's pages (HTML ones), paged
    assert set(urls(index.search("site:food.test"))) == {PASTA, BREAD}
    assert index.search("site:weather.test")["number_of_results"] == 25
    assert len(urls(index.search("site:weather.test", pageno=3))) == 5
    assert index.search("site:nowhere.test")["number_of_results"] == 0
    # exact host: not a suffix match; two site: operators = either host
    assert urls(index.search("site:test flour")) == [] and urls(index.search("site:ood.test flour")) == []
    assert set(urls(index.search("dough site:news.test site:food.test"))) == {PASTA, BREAD}
    # combined with link: and related:
    assert urls(index.search(f"link:{TYPHOON} site:food.test")) == [PASTA]
    assert index.search(f"site:food.test link:{TYPHOON}")["number_of_results"] == 1
    assert urls(index.search(f"related:{TYPHOON} site:news.test")) == [SURGE]
    # "site:" inside a word is a word, not the operator
    assert index.search("website:news.test")["number_of_results"] == 0


@pytest.mark.parametrize("q", ["site: typhoon", "site:http://news.test/ typhoon", "site:news.test/x"])
def test_site_operator_takes_a_bare_host(index, q):
    with pytest.raises(SearchError, match="site: takes a host name"):
        index.search(q)


def test_paging(index):
    pages = [urls(index.search("weather", pageno=n)) for n in (1, 2, 3, 4)]
    assert [len(p) for p in pages] == [10, 10, 5, 0]
    seen = [u for p in pages for u in p]
    assert sorted(seen) == sorted(f"http://weather.test/day{i:02d}.html" for i in range(25))
    assert index.search("weather", pageno="2")["number_of_results"] == 25


@pytest.mark.parametrize("q, pageno, message", [
    ("", 1, "empty query"), ("   ", 1, "empty query"),
    ("weather", 0, "pageno must be a positive integer"),
    ("weather", "x", "pageno must be a positive integer"),
])
def test_bad_requests(index, q, pageno, message):
    with pytest.raises(SearchError, match=message):
        index.search(q, pageno)


def test_only_html_pages_are_indexed(index):
    assert index.indexed == len(open_search_fixture()) - 1
    assert index.search("rss")["number_of_results"] == 0


def test_sample_limit():
    small = SearchIndex(open_search_fixture(), limit=5).build()
    assert small.sampled and small.indexed == 4  # the first 5 URLs hold one non-HTML page
    assert small.info()["sampled"] is True


def test_disk_cache_is_reused_and_checked(tmp_path):
    path = tmp_path / "idx.sqlite"
    built = SearchIndex(open_search_fixture(), path).build()
    assert built.ready and path.exists()
    cached = SearchIndex(open_search_fixture(), path)
    assert cached.ready  # opened from disk, no build
    assert cached.search("typhoon") == built.search("typhoon")
    grown = open_search_fixture()
    grown = MemoryCorpus([grown.get(u) for u in grown.iter_urls()] + [page("http://x.test/", "x", "x")])
    assert not SearchIndex(grown, path).ready  # corpus changed: rebuild


def test_cache_path_keyed_by_spec(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPICCRAWL_CACHE", str(tmp_path))
    a = cache_path("generated:zh-disaster?pages=100&seed=1")
    assert a.parent == tmp_path / "search"
    assert a == cache_path("generated:zh-disaster?seed=1&pages=100")
    assert a != cache_path("generated:zh-disaster?pages=200&seed=1")
    assert a != cache_path("generated:zh-disaster?pages=100&seed=1", limit=10)


def test_search_over_http(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPICCRAWL_CACHE", str(tmp_path))
    with WebLab("searchfix:", readers={"searchfix": "tests.test_search:open_search_fixture"}) as lab:
        answer = lab.search("台风")
        assert urls(answer) == [ZH]
        assert urls(lab.search("weather", pageno=3)) == urls(
            SearchIndex(open_search_fixture()).build().search("weather", 3))
        status, headers, body = lab.fetch(lab.search_url + "?q=pasta&format=html")
        assert status == 400 and "unsupported format" in json.loads(body)["error"]
        assert headers["Content-Type"].startswith("application/json")
        with pytest.raises(WebLabError, match="HTTP 400: empty query"):
            lab.search("")
        assert lab.info["search"]["state"] == "ready"
        assert list((tmp_path / "search").glob("searchfix-*.sqlite"))


def test_a_build_stopped_early_leaves_no_half_built_file(tmp_path, monkeypatch):
    """A lab stopped while it built its index (a crawl shorter than the build, the README's first
    command) left NAME.PID.tmp behind for good, one per run; a build now removes its own when
    stopped, and those of processes that are gone (a lab killed with -9)."""
    import subprocess
    import sys

    monkeypatch.setenv("TOPICCRAWL_CACHE", str(tmp_path))
    path = cache_path("generated:zh-disaster?pages=50000")
    path.parent.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = path.with_name(f"{path.name}.{int(gone.stdout)}.tmp")
    orphan.write_bytes(b"half")
    orphan.with_name(orphan.name + "-journal").write_bytes(b"")
    alive = path.with_name(f"{path.name}.1.tmp")  # pid 1: a process still running (another lab's build)
    alive.write_bytes(b"half")
    with WebLab("generated:zh-disaster?pages=50000") as lab:
        assert lab.info["search"]["state"] == "building"  # 50,000 pages take longer than this test
    assert sorted(p.name for p in path.parent.iterdir()) == [alive.name]
