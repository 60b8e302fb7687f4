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


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """(the corpus folder for ``webkb:DIR``, the rules file)."""
    root = tmp_path_factory.mktemp("webkb-synthetic")
    for cls, url, title, body in PAGES:
        folder = root / "webkb" / cls / "misc"
        folder.mkdir(parents=True, exist_ok=True)
        html = f"Content-Type: text/html\n\n<html><head><title>{title}</title></head><body>{body}</body></html>\n"
        (folder / _file(url)).write_text(html, encoding="latin-1")
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
    assert noroot["entry"] == "http://noroot.test/" and noroot["pages_fetched"] <= 5

    # /~x, /~x/index.html and /~x/ are one page: two good pages, not four
    alias = items["alias.test"]
    assert (alias["verdict"], alias["reason"], alias["good_pages"]) == ("irrelevant", "exhausted", 2)
    assert sorted(e["url"] for e in alias["evidence"]) == ["http://alias.test/~x/", "http://alias.test/~y/"]
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
                                  "--json", str(tmp_path / "bench.json")]) == 0
    (res,) = json.loads((tmp_path / "bench.json").read_text())
    assert res["label"] == "class:faculty" and res["true_hosts"] == 2  # noroot.test, map.test (course.test: 0)
    assert res["info"]["labelled_pages"] == 8  # the faculty pages, not the 3 course pages
    assert [q["value"] for q in res["query_rows"]] == ["zebra"]  # the rules file's queries
    spider_row = res["host_rows"][0]
    assert res["host_rows"][2]["value"].startswith("search candidates, entry pages, no NumExpPages limit")
    assert spider_row["candidates"] == 3 and spider_row["true_cands"] == 1  # noroot, alias, course; noroot true
    assert spider_row["precision"] == 1.0 and spider_row["recall_cands"] == 1.0
    text = out.read_text()
    assert "class:faculty" in text and "class:course" not in text and "course pages" not in text
