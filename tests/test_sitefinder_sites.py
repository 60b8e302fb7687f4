"""The site finder on sites shaped like WebKB's: verification from the entry pages (search hits,
root, sitemap), pages identified by where the response landed, the k-pages site-truth rule, and
the WebKB bench scoring against the rules file's own label.

The crawl runs ``scrapy crawl sitefinder`` over loopback on a tiny **synthetic** corpus in WebKB's
layout (``webkb/<class>/<university>/<URL with ^ for />``), served by the real ``webkb:`` reader
(which answers ``/~x`` and ``/~x/index.html`` with a 301 to ``/~x/``, as 1996 servers did).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import run_crawl
from topiccrawl.sitefinder.frontier import SiteFinderFrontier
from topiccrawl.sitefinder.truth import SiteTruth
from topiccrawl.sitefinder.verifier import entry_pages, sitemap_links, verify_site
from topiccrawl.strategies.base import Link

PROF = "Professor of Computer Science. Research interests: databases."

#: (class, URL, title, body) of the synthetic corpus
PAGES = [
    # noroot.test: no root page, no sitemap; three faculty pages, the first one a search hit
    ("faculty", "http://noroot.test/~ada/", "Ada", f"{PROF} zebra <a href='/~bob/'>Bob</a> <a href='/~cy/'>Cy</a>"),
    ("faculty", "http://noroot.test/~bob/", "Bob", PROF),
    ("faculty", "http://noroot.test/~cy/", "Cy", PROF),
    # alias.test: two faculty pages, the first also linked as /~x and /~x/index.html (301 to /~x/)
    ("other", "http://alias.test/", "Welcome", "Department. <a href='/~x'>x</a> <a href='/~x/index.html'>x</a> "
                                               "<a href='/~x/'>x</a> <a href='/~y/'>y</a>"),
    ("faculty", "http://alias.test/~x/", "X", f"{PROF} zebra"),
    ("faculty", "http://alias.test/~y/", "Y", f"{PROF} zebra"),
    # map.test: no root page; its sitemap lists three faculty pages nothing links to
    ("faculty", "http://map.test/a.html", "A", PROF),
    ("faculty", "http://map.test/b.html", "B", PROF),
    ("faculty", "http://map.test/c.html", "C", PROF),
    # course.test: three course pages (no "professor"): a decoy for faculty rules
    ("course", "http://course.test/cs101.html", "CS 101", "Instructor office hours zebra homework"),
    ("course", "http://course.test/cs102.html", "CS 102", "Instructor office hours zebra exam"),
    ("course", "http://course.test/cs103.html", "CS 103", "Instructor office hours zebra"),
]
SITEMAP = ("http://map.test/sitemap.xml",
           '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
           + "".join(f"<url><loc>http://map.test/{n}.html</loc></url>\n" for n in "abc") + "</urlset>\n")
RULES = """name = "faculty-test"
language = "en"
label = "class:faculty"

[[rules]]
name = "professor"
weight = 1.0
regex = 'professor'

[queries]
query = ["zebra"]
"""


def _file(url: str) -> str:
    return url.replace("/", "^")


def _write_pages(root: Path, pages) -> None:
    """``(class, url, title, body)`` pages as WebKB files under ``root/webkb``."""
    for cls, url, title, body in pages:
        folder = root / "webkb" / cls / "misc"
        folder.mkdir(parents=True, exist_ok=True)
        html = f"Content-Type: text/html\n\n<html><head><title>{title}</title></head><body>{body}</body></html>\n"
        (folder / _file(url)).write_text(html, encoding="latin-1")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """(the corpus folder for ``webkb:DIR``, the rules file)."""
    root = tmp_path_factory.mktemp("webkb-synthetic")
    _write_pages(root, PAGES)
    url, xml = SITEMAP
    (root / "webkb" / "other" / "misc" / _file(url)).write_text(f"Content-Type: text/xml\n\n{xml}", encoding="latin-1")
    rules = root / "faculty-test.toml"
    rules.write_text(RULES, encoding="utf-8")
    return root, rules


# -- pure parts -------------------------------------------------------------------------------


def test_k_pages_truth_rule_counts_each_labelled_page_once():
    labels = {"http://a.test/1": {"class:faculty"}, "http://a.test/2": {"class:faculty"},
              "http://a.test/2#top": {"class:faculty"},  # the same page (canonical URL)
              "http://a.test/3": {"class:course"}, "http://b.test/1": {"class:faculty"},
              "http://b.test/2": {"class:faculty"}, "http://b.test/3": {"class:faculty", "univ:misc"}}
    truth = SiteTruth.from_pages(labels, lambda u: labels[u], "class:faculty", k=3)
    assert truth.labelled("a.test") == 2 and truth.labelled("http://b.test/any") == 3
    assert not truth.is_true("a.test") and truth.is_true("b.test") and truth.is_true("http://b.test/")
    assert truth.true_sites() == {"b.test"} and len(truth) == 1
    assert SiteTruth.from_pages(labels, lambda u: labels[u], "class:faculty", k=2).true_sites() == {"a.test", "b.test"}
    assert SiteTruth.from_pages(labels, lambda u: labels[u], "class:course", k=1).true_sites() == {"a.test"}
    with pytest.raises(ValueError):
        SiteTruth({}, k=0)


def test_frontier_statistics_use_the_truth_rule_at_site_and_page_level():
    truth = SiteTruth({"good.test": 3, "thin.test": 2}, k=3)
    f = SiteFinderFrontier(num_rel_pages=1, sitemap=False)
    f.set_truth(truth.is_true, lambda: 2, lambda url: "/fac" in url)
    for host in ("good.test", "thin.test", "bad.test"):
        f.add_site(f"http://{host}/fac.html", "q")
    for host in ("good.test", "thin.test"):  # both judged relevant from their hit
        f.report(f"http://{host}/fac.html", 0.9, ["r"])
    f.report("http://bad.test/fac.html", 0.1)
    s = f.stats()
    assert s["sites/truly_relevant_candidates"] == 1 and s["sites/precision"] == 0.5
    assert s["sites/recall_candidates"] == 1.0 and s["sites/recall"] == 0.5 and s["sites/truth_pages"] == 3
    assert s["sites/good_pages"] == 2 and s["sites/page_precision"] == 1.0


def test_a_retried_search_request_is_served_again_not_ignored():
    f = SiteFinderFrontier()
    search = "http://search.test/search?q=x&pageno=1"
    f.expect(search)
    f.push(Link(url=search, payload="first"))
    assert f.pop().payload == "first"
    f.push(Link(url=search, payload="retry"))  # RetryMiddleware: the same URL after a timeout
    assert f.pop().payload == "retry" and f.ignored == 0


def test_links_to_another_candidate_site_do_not_keep_a_site_waiting():
    f = SiteFinderFrontier(sitemap=False)
    f.add_site("http://a.test/", "q")
    f.add_site("http://b.test/", "q")
    f.push(Link(url="http://a.test/", payload="a"))
    assert f.pop().url == "http://a.test/"
    # a.test's only page links to b.test (another candidate): a.test has nothing left to wait for
    done = f.report("http://a.test/", 0.0, links=["http://b.test/x.html"])
    assert done is not None and (done["verdict"], done["reason"]) == ("irrelevant", "exhausted")


def test_entry_pages_order_and_sitemap_parsing():
    hits = ["http://h.test/~a/", "http://other.test/x", "http://h.test/~a/#top", "http://h.test/"]
    assert entry_pages("http://h.test/", hits) == ["http://h.test/~a/", "http://h.test/", "http://h.test/sitemap.xml"]
    assert entry_pages("http://h.test/", [], sitemap=False) == ["http://h.test/"]
    assert sitemap_links(SITEMAP[1].encode(), SITEMAP[0]) == [f"http://map.test/{n}.html" for n in "abc"]
    index = b"<sitemapindex><sitemap><loc> /s1.xml </loc></sitemap></sitemapindex>"
    assert sitemap_links(index, "http://h.test/sitemap.xml") == ["http://h.test/s1.xml"]
    assert sitemap_links(b"<html><body>not found</body></html>", "http://h.test/sitemap.xml") is None


def test_verifier_counts_a_page_reached_under_several_urls_once():
    good = "http://h.test/~x/"
    redirects = {"http://h.test/~x": good, "http://h.test/~x/index.html": good}
    links = {"http://h.test/": ["http://h.test/~x", "http://h.test/~x/index.html", good]}

    def fetch(url):
        final = redirects.get(url, url)
        return final, 0.9 if final == good else 0.0, [], links.get(final, [])

    v = verify_site("http://h.test/", fetch, num_rel_pages=2)
    assert (v.verdict, v.reason, len(v.good)) == ("irrelevant", "exhausted", 1)
    assert len(v.expansions) == 4 and [r["url"] for r in v.good] == [good]
    dups = [r for r in v.expansions if r.get("note") == "duplicate"]
    assert len(dups) == 2 and all(r["url"] == good for r in dups)
    assert v.expansions[1] == {"url": good, "requested": "http://h.test/~x", "score": 0.9, "rules": [], "class": "/~x"}


# -- the spider over loopback -------------------------------------------------------------------


def test_spider_verifies_from_hits_and_sitemap_and_counts_aliases_once(tmp_path, corpus):
    root, rules = corpus
    proc, out = run_crawl(tmp_path, "sitefinder", args={"rules": str(rules), "sites": "http://map.test/"},
                          settings={"TOPICCRAWL_WEB": f"webkb:{root}", "LOG_LEVEL": "INFO"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    items = {i["site"]: i for i in map(json.loads, (out / "pages.jsonl").read_text().splitlines())}
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert set(items) == {"noroot.test", "alias.test", "map.test", "course.test"}

    # no root page: verified from the search hit and what it links to
    noroot = items["noroot.test"]
    assert noroot["verdict"] == "relevant" and noroot["truly_relevant"]
    assert {urlsplit(e["url"]).path for e in noroot["evidence"]} == {"/~ada/", "/~bob/", "/~cy/"}
    # the hit, the root (404), the sitemap (404), the site search (a fetch too), two linked pages
    assert noroot["entry"] == "http://noroot.test/" and noroot["pages_fetched"] <= 6 and noroot["searches"] == 1

    # /~x, /~x/index.html and /~x/ are one page: two good pages, not four
    alias = items["alias.test"]
    assert (alias["verdict"], alias["reason"], alias["good_pages"]) == ("irrelevant", "exhausted", 2)
    # an irrelevant site's evidence: its three best pages, the two good ones first, each once
    assert sorted(e["url"] for e in alias["evidence"][:2]) == ["http://alias.test/~x/", "http://alias.test/~y/"]
    assert len(alias["evidence"]) == 3 and len({e["url"] for e in alias["evidence"]}) == 3
    assert not alias["truly_relevant"]  # 2 labelled pages < k = 3

    # no root, no hit: its sitemap names the pages
    assert items["map.test"]["verdict"] == "relevant" and items["map.test"]["truly_relevant"]
    assert items["course.test"]["verdict"] == "irrelevant" and not items["course.test"]["truly_relevant"]

    # the k-pages rule (default k = 3) in the statistics, site and page level side by side
    assert stats["topiccrawl/sites/truth_pages"] == 3
    assert stats["topiccrawl/sites/true_sites"] == 2  # noroot.test and map.test
    assert stats["topiccrawl/sites/truly_relevant_candidates"] == 2
    assert stats["topiccrawl/sites/precision"] == 1.0 and stats["topiccrawl/sites/recall_candidates"] == 1.0
    assert stats["topiccrawl/sites/recall"] == 1.0
    assert stats["topiccrawl/sites/good_pages"] == 8 and stats["topiccrawl/sites/page_precision"] == 1.0


def test_webkb_bench_scores_a_non_course_rules_file_against_its_own_label(tmp_path, corpus, monkeypatch):
    from bench import sitefinder_webkb

    root, rules = corpus
    monkeypatch.setenv("TOPICCRAWL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "bench.md"
    assert sitefinder_webkb.main(["--web", f"webkb:{root}", "--rules", str(rules), "--out", str(out),
                                  "--json", str(tmp_path / "bench.json"), "--site-queries", "0,1,2"]) == 0
    (res,) = json.loads((tmp_path / "bench.json").read_text())
    assert res["label"] == "class:faculty" and res["true_hosts"] == 2  # noroot.test, map.test (course.test: 0)
    assert res["info"]["labelled_pages"] == 8  # the faculty pages, not the 3 course pages
    assert [q["value"] for q in res["query_rows"]] == ["zebra"]  # the rules file's queries
    rows = {r["kind"]: r for r in res["host_rows"][:len(res["host_rows"]) // 2]}  # PageThreshold 0.7
    spider_row = rows["spider"]  # the spider's default number of site queries
    assert f"{sitefinder_webkb.SITE_QUERIES} site queries" in spider_row["value"] and "(default)" in spider_row["value"]
    assert [r["site_queries"] for r in rows.values() if "site_queries" in r] == [0, 1, 2]
    assert spider_row["candidates"] == 3 and spider_row["true_cands"] == 1  # noroot, alias, course; noroot true
    assert spider_row["precision"] == 1.0 and spider_row["recall_cands"] == 1.0
    # one query in the rules file: one site query per candidate, whatever the number asked
    assert spider_row["searches"] == rows["site1"]["searches"] == 3 and rows["entry"]["searches"] == 0
    assert rows["reach"]["value"].startswith("search candidates, entry pages without site queries, no NumExpPages")
    text = out.read_text()
    assert "class:faculty" in text and "class:course" not in text and "course pages" not in text
    assert "| `faculty-test` | 1 | 3 | 1 |" in text  # the table per number of site queries


# -- site-restricted queries (site:HOST words) as entry pages -----------------------------------------


def test_site_query_words_put_the_finding_query_first():
    from topiccrawl.sitefinder.verifier import site_query_texts

    queries = ["a b", "c", "d"]
    assert site_query_texts(["c"], queries, 1) == ["c"]
    assert site_query_texts(["sites argument", "d", "c"], queries, 2) == ["d", "c"]  # not a query: skipped
    assert site_query_texts([], queries, 5) == queries and site_query_texts(["c"], queries, 0) == []


def test_site_query_hits_are_entry_pages_within_the_budget():
    hidden = [f"http://h.test/~p{i}/" for i in range(3)]
    pages = {"http://h.test/": (0.0, [], [f"http://h.test/dead{i}.html" for i in range(5)])}
    pages.update({u: (0.9, ["r"], []) for u in hidden})
    asked = []

    def fetch(url):
        return (url, *pages[url]) if url in pages else None

    def search(q):
        asked.append(q)
        return ["http://other.test/x", "http://h.test/", *hidden]

    v = verify_site("http://h.test/", fetch, search=search, site_queries=["prof", "prof"])
    assert asked == ["site:h.test prof"]  # the same words once
    # the search request is one fetch; its hits (the root among them) are expanded first, ahead of the root's dead links
    assert (v.verdict, len(v.good), v.spent()) == ("relevant", 3, 5)
    assert [r["url"] for r in v.expansions] == ["http://h.test/", *hidden]
    assert v.result()["pages_fetched"] == 5 and v.result()["searches"] == 1
    without = verify_site("http://h.test/", fetch)
    assert (without.verdict, without.reason, without.spent()) == ("irrelevant", "exhausted", 6)
    # a search costs a page of NumExpPages: asked only when NumRelPages pages of the budget remain after it
    tight = verify_site("http://h.test/", fetch, search=search, site_queries=["other words"], num_exp_pages=3)
    assert tight.searches == [] and tight.spent() == 3 and tight.reason == "budget"
    assert verify_site("http://h.test/", fetch, search=search, site_queries=["w"], num_exp_pages=5).verdict == "relevant"


def test_frontier_waits_for_a_site_search_and_gives_its_hits_priority():
    f = SiteFinderFrontier(sitemap=False, num_rel_pages=2, site_queries=1)
    assert f.add_site("http://h.test/", "q") == ["http://h.test/"]
    assert f.plan_site_queries("http://h.test/x", ["other", "q"]) == ["q"]
    assert f.plan_site_queries("http://h.test/", ["other", "q"]) == []  # once per site
    f.push(Link(url="http://h.test/", payload="root"))
    assert f.pop().url == "http://h.test/"
    assert f.report("http://h.test/", 0.0) is None  # nothing queued, but the site search is pending
    f.push(Link(url="http://h.test/late.html"))  # a link queued before the search answer
    new, verdict = f.site_searched("h.test", "q", ["http://h.test/", "http://h.test/found.html", "http://x.test/"])
    assert new == ["http://h.test/found.html"] and verdict is None
    f.push(Link(url="http://h.test/found.html"))
    assert f.pop().url == "http://h.test/found.html"  # ahead of the older link
    assert f.report("http://h.test/found.html", 0.9) is None
    # a hit already queued as a link is moved ahead, not requested again
    f.push(Link(url="http://h.test/linked.html"))
    assert f.plan_site_queries("http://h.test/", ["other"]) == []  # planned once per site
    v = f.sites["h.test"]
    assert v.start_search("other")
    assert f.site_searched("h.test", "other", ["http://h.test/linked.html"]) == ([], None)
    assert f.pop().url == "http://h.test/linked.html"
    done = f.report("http://h.test/linked.html", 0.9)
    assert done["verdict"] == "relevant" and done["pages_fetched"] == 5 and done["searches"] == 2
    assert f.stats()["sites/site_searches"] == 2
    # a failed search ends an otherwise exhausted site; 0 turns the feature off
    g = SiteFinderFrontier(sitemap=False)
    g.add_site("http://e.test/", "q")
    g.plan_site_queries("http://e.test/", ["q"])
    g.push(Link(url="http://e.test/"))
    g.pop()
    assert g.report("http://e.test/", 0.0) is None
    _, verdict = g.site_searched("e.test", "q", [])
    assert (verdict["verdict"], verdict["reason"], verdict["pages_fetched"]) == ("irrelevant", "exhausted", 2)
    off = SiteFinderFrontier(site_queries=0)
    off.add_site("http://e.test/", "q")
    assert off.plan_site_queries("http://e.test/", ["q"]) == []


HIDDEN_RULES = RULES.replace('name = "faculty-test"', 'name = "faculty-hidden"')
#: hidden.test: its root (the only hit) links nowhere; three faculty pages match the query too but
#: rank below ten louder pages of other hosts, so only ``site:hidden.test zebra`` finds them
HIDDEN = [("other", "http://hidden.test/", "Welcome zebra", "Department zebra zebra.")]
HIDDEN += [("faculty", f"http://hidden.test/~f{i}/", f"F{i}", f"{PROF} {'databases ' * 30} zebra") for i in range(3)]
HIDDEN += [("other", f"http://loud{i}.test/zebra.html", "zebra zebra", "zebra zebra zebra zebra") for i in range(9)]


@pytest.fixture(scope="module")
def hidden_corpus(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("webkb-hidden")
    _write_pages(root, HIDDEN)
    rules = root / "faculty-hidden.toml"
    rules.write_text(HIDDEN_RULES, encoding="utf-8")
    return root, rules


def test_spider_finds_pages_nothing_links_to_through_a_site_query(tmp_path, hidden_corpus):
    from topiccrawl.weblab.corpus import open_corpus
    from topiccrawl.weblab.search import SearchIndex

    root, rules = hidden_corpus
    index = SearchIndex(open_corpus(f"webkb:{root}")).build()
    top = [r["url"] for r in index.search("zebra")["results"]]
    assert "http://hidden.test/" in top and not any("/~f" in u for u in top)  # the premise of the test
    found = {}
    for n in ("0", "1"):
        proc, out = run_crawl(tmp_path / n, "sitefinder", args={"rules": str(rules)},
                              settings={"TOPICCRAWL_WEB": f"webkb:{root}", "TOPICCRAWL_SITES_SITE_QUERIES": n})
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        items = {i["site"]: i for i in map(json.loads, (out / "pages.jsonl").read_text().splitlines())}
        found[n] = (items, json.loads((out / "stats.json").read_text(encoding="utf-8")))
    items, stats = found["0"]
    assert len(items) == 10 and stats["topiccrawl/sites/site_searches"] == 0
    assert (items["hidden.test"]["verdict"], items["hidden.test"]["reason"]) == ("irrelevant", "exhausted")
    assert items["hidden.test"]["truly_relevant"]
    items, stats = found["1"]
    hidden = items["hidden.test"]
    assert hidden["verdict"] == "relevant" and hidden["searches"] == 1
    assert sorted(e["url"] for e in hidden["evidence"]) == [f"http://hidden.test/~f{i}/" for i in range(3)]
    # the root, the site search (counted as a fetch), its 3 hits first: decided before the sitemap
    assert hidden["pages_fetched"] == 5
    assert stats["topiccrawl/sites/site_searches"] == 10  # one per candidate site
    assert stats["topiccrawl/sites/recall_candidates"] == 1.0 and stats["topiccrawl/sites/precision"] == 1.0
    assert all(i["verdict"] == "irrelevant" for s, i in items.items() if s != "hidden.test")


def test_site_queries_setting_is_read_and_checked():
    from topiccrawl.crawl.errors import ConfigError
    from topiccrawl.crawl.settings import build_frontier, strategy_options

    assert build_frontier({}, "sitefinder").site_queries == 2
    assert build_frontier({"TOPICCRAWL_SITES_SITE_QUERIES": "0"}, "sitefinder").site_queries == 0
    assert strategy_options({"TOPICCRAWL_SITES_SITE_QUERIES": "3"}, "sitefinder").kwargs()["site_queries"] == 3
    for bad in ("-1", "two"):
        with pytest.raises(ConfigError, match="TOPICCRAWL_SITES_SITE_QUERIES"):
            strategy_options({"TOPICCRAWL_SITES_SITE_QUERIES": bad}, "sitefinder")
