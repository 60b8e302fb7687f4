"""Site finder (Li et al.): AbstractURL, the rule language, the verifier and its frontier."""

from __future__ import annotations

import pytest

from topiccrawl.sitefinder.frontier import SiteFinderFrontier
from topiccrawl.sitefinder.rules import SiteFinderError, load_queries, load_rules, parse_expression
from topiccrawl.sitefinder.verifier import SiteVerifier, abstract_url, entry_url, site_of, verify_site
from topiccrawl.strategies.simple import FrontierError, Link, make_frontier

# -- AbstractURL ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url, expected", [
    ("http://www.shop.com/computers/result.asp?typeid=3", "/computers/result.asp?typeid"),  # paper
    ("http://www.shop.com/computers/result.asp?typeid=17", "/computers/result.asp?typeid"),
    ("http://shop.x.cn/list.asp?cat=12&page=3", "/list.asp?cat&page"),
    ("http://shop.x.cn/list.asp?page=3&cat=12", "/list.asp?cat&page"),  # attribute order
    ("http://x.com", "/"),  # no path
    ("http://x.com?b=1&a=&a=2", "/?a&b"),  # repeated and empty attributes
    ("http://x.com/p.php?=5&&x", "/p.php?x"),  # empty attribute names ignored
    ("http://x.com/a/b.html#top", "/a/b.html"),  # fragment dropped
    ("http://x.com/%E4%B9%A6/list", "/书/list"),  # percent-decoded
    ("http://x.com/Dir/", "/Dir/"),  # case and trailing slash kept
])
def test_abstract_url(url, expected):
    assert abstract_url(url) == expected


def test_abstract_url_digits_extension():
    assert abstract_url("http://x.cn/12345.html") != abstract_url("http://x.cn/678.html")
    assert abstract_url("http://x.cn/12345.html", digits=True) == abstract_url("http://x.cn/678.html", digits=True) == "/*.html"
    assert abstract_url("http://x.cn/go/1.html?from=rss", digits=True) == "/go/*.html?from"


def test_site_and_entry():
    assert site_of("http://WWW.Shop.CN:8080/a?b=1") == "www.shop.cn"
    assert entry_url("http://WWW.Shop.CN/a/b.html?x=1#f") == "http://www.shop.cn/"
    assert entry_url("http://x.cn:8080/a") == "http://x.cn:8080/"
    assert site_of("not a url") == ""


# -- rules ----------------------------------------------------------------------------------------


def test_expression_precedence():
    names = ["a", "b", "c"]
    assert parse_expression("a or b and not c", names) == ("or", [("re", "a"), ("and", [("re", "b"), ("not", ("re", "c"))])])
    assert parse_expression("(a or b) and c", names) == ("and", [("or", [("re", "a"), ("re", "b")]), ("re", "c")])
    assert parse_expression("not not a", names) == ("not", ("not", ("re", "a")))


@pytest.mark.parametrize("source, problem", [
    ("", "empty"), ("a and", "too early"), ("(a or b", "missing ')'"), ("a b", "unexpected 'b'"),
    ("d", "unknown pattern 'd'"), ("__import__('os')", "unexpected character"), ("a & b", "unexpected character"),
    ("and a", "unexpected 'and'"),
])
def test_expression_errors(source, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_expression(source, ["a", "b", "c"])


def write(tmp_path, text, name="r.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


RULES = """
name = "t"
label = "site:x"
[patterns]
price = '售价\\s*(:|：)\\s*[0-9.]+'
cart = '购物车'
review = '书评'
[[rules]]
name = "price"
weight = 1
match = "price"
[[rules]]
name = "buy"
weight = 2
match = "cart and not review"
[[rules]]
name = "isbn"
weight = 1
regex = 'ISBN\\s*[0-9-]{10,17}'
"""


def test_rules_weights_boolean_logic_and_full_width(tmp_path):
    rules = load_rules(str(write(tmp_path, RULES)))
    assert [round(r.weight, 3) for r in rules.rules] == [0.25, 0.5, 0.25]  # normalised to sum 1
    assert rules.label == "site:x"
    assert rules.score("售价：39.00 购物车") == (0.75, ["price", "buy"])  # full-width colon
    assert rules.score("售价: 39 ISBN 978-7-111-2") == (0.5, ["price", "isbn"])  # ASCII colon
    assert rules.score("购物车 书评") == (0.0, [])  # NOT
    assert rules.score("售价 便宜") == (0.0, [])  # price needs a number


def test_shipped_bookstore_rules_separate_products_from_reviews():
    rules = load_rules("bookstore-zh")
    price = next(r for r in rules.rules if r.name == "price")
    assert price.weight == pytest.approx(0.263)  # the paper's weight
    product = ("海光 作者：新瑞 出版社：青和出版社 ISBN：978-7-74726-1658-4 定价：34.00元 "
               "售价：24.20元 加入购物车 内容简介 正版包邮")
    review = "书评：这部小说的作者是一位青年作家，出版社今年推出了它的译本，读者评价很高。"
    f_product, matched = rules.score(product)
    assert f_product >= 0.7 and {"price", "isbn", "author", "publisher"} <= set(matched)
    assert rules.score(review)[0] < 0.7
    for name in ("phoneshop-zh", "bookstore-en", "course-en"):
        assert load_rules(name).rules
    assert load_rules("bookstore-en").score("Our price: $12.99 Add to cart ISBN: 978-0-12-345678-9 "
                                            "Publisher: Acme Author: J. Doe Paperback")[0] >= 0.7


@pytest.mark.parametrize("edit, problem", [
    (("match = \"price\"", "match = \"price and\""), "rule 'price': bad expression 'price and'"),
    (("match = \"price\"", "match = \"prize\""), "rule 'price': bad expression 'prize': unknown pattern"),
    (("cart = '购物车'", "cart = '购物车('"), "pattern 'cart': bad regular expression"),
    (("regex = 'ISBN", "regex = '(ISBN"), "rule 'isbn': bad regular expression"),
    (("weight = 2", "weight = 0"), "rule 'buy': 'weight' must be a number > 0"),
    (("weight = 2", "weight = -1"), "rule 'buy': 'weight' must be a number > 0"),
    (("weight = 2", "weight = \"2\""), "rule 'buy': 'weight' must be a number > 0"),
    (("weight = 2\n", ""), "rule 'buy': 'weight' must be a number > 0"),
    (("regex = 'ISBN", "match = \"price\"\nregex = 'ISBN"), "rule 'isbn': give exactly one of"),
    (("name = \"buy\"", "name = \"price\""), "rule 'price': duplicate rule name"),
    (("label = ", "lable = "), "unknown key 'lable'"),
    (("name = \"t\"", "name = \"t"), "not valid TOML"),
    # a string for a boolean was read as true; an infinite weight made every normalised weight nan
    (("name = \"t\"", "name = \"t\"\nignore_case = \"false\""), "'ignore_case' must be true or false"),
    (("weight = 2", "weight = inf"), "rule 'buy': 'weight' must be a number > 0"),
])
def test_invalid_rules_are_one_line_errors_naming_file_and_rule(tmp_path, edit, problem):
    path = write(tmp_path, RULES.replace(*edit, 1), "broken.toml")
    with pytest.raises(SiteFinderError) as err:
        load_rules(str(path))
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path)) and problem in message


def test_rules_file_missing_and_no_rules(tmp_path):
    with pytest.raises(SiteFinderError, match="no shipped rule set.*bookstore-zh"):
        load_rules("no-such-rules")
    with pytest.raises(SiteFinderError, match="no rules"):
        load_rules(str(write(tmp_path, "name = 'x'\n")))


def test_queries_files(tmp_path):
    queries, pages = load_queries("data/rules/bookstore-queries-zh.toml")
    kinds = {q.kind for q in queries}
    assert kinds == {"domain", "attribute", "instance", "concept"} and pages >= 1
    text = write(tmp_path, "# comment\n网上书店\n\n售价 出版社\n", "q.txt")
    assert [(q.text, q.kind) for q in load_queries(str(text))[0]] == [("网上书店", "query"), ("售价 出版社", "query")]
    with pytest.raises(SiteFinderError, match="no queries"):
        load_queries(str(write(tmp_path, "# nothing\n", "empty.txt")))
    with pytest.raises(SiteFinderError, match="queries 'domain' must be a list"):
        load_queries(str(write(tmp_path, "[queries]\ndomain = 3\n", "bad.toml")))


# -- the verifier on a hand-made site -------------------------------------------------------------

H = "http://shop.test"
SITE = {  # url -> (F, links)
    f"{H}/": (0.2, [f"{H}/list.asp?cat=1&page=1", f"{H}/help/about.html", f"{H}/item.asp?id=1",
                    "http://other.test/x.html"]),
    f"{H}/list.asp?cat=1&page=1": (0.1, [f"{H}/item.asp?id=2", f"{H}/item.asp?id=3", f"{H}/list.asp?cat=1&page=2"]),
    f"{H}/list.asp?cat=1&page=2": (0.1, [f"{H}/item.asp?id=5"]),
    f"{H}/help/about.html": (0.0, [f"{H}/"]),
    f"{H}/item.asp?id=1": (0.9, [f"{H}/item.asp?id=4", f"{H}/missing.html"]),
    f"{H}/item.asp?id=2": (0.8, []),
    f"{H}/item.asp?id=3": (0.5, []),
    f"{H}/item.asp?id=4": (0.95, []),
    f"{H}/item.asp?id=5": (0.9, []),
}


def fetch(site):
    def get(url):
        if url not in site:
            return None
        score, links = site[url]
        return url, score, ["r"] if score >= 0.7 else [], links
    return get


def expanded(v):
    return [row["url"][len(H):] for row in v.expansions]


def test_verifier_expansion_order_and_relevant_verdict():
    v = verify_site(f"{H}/item.asp?id=9", fetch(SITE), num_rel_pages=3, num_exp_pages=50, prior=0.5)
    # entry; then the classes at the prior in order of discovery (list, help, item); the item
    # class (H = 0.9) is then kept until three pages reach F >= 0.7
    assert expanded(v) == ["/", "/list.asp?cat=1&page=1", "/help/about.html", "/item.asp?id=1",
                           "/item.asp?id=2", "/item.asp?id=3", "/item.asp?id=4"]
    result = v.result()
    assert (result["verdict"], result["good_pages"], result["pages_fetched"]) == ("relevant", 3, 7)
    assert [e["url"][len(H):] for e in result["evidence"]] == ["/item.asp?id=1", "/item.asp?id=2", "/item.asp?id=4"]
    assert v.h(v.classes["/item.asp?id"]) == pytest.approx((0.9 + 0.8 + 0.5 + 0.95) / 4)


def test_verifier_prior_changes_the_order():
    v = verify_site(f"{H}/", fetch(SITE), num_rel_pages=3, prior=0.0)
    # with prior 0 the list class (H = 0.1 > 0) is exhausted before unexplored classes are tried
    assert expanded(v)[:4] == ["/", "/list.asp?cat=1&page=1", "/list.asp?cat=1&page=2", "/help/about.html"]
    assert v.verdict == "relevant"


def test_verifier_budget_and_exhaustion_and_failures():
    v = verify_site(f"{H}/", fetch(SITE), num_rel_pages=3, num_exp_pages=4)
    assert (v.verdict, v.reason, len(v.expansions)) == ("irrelevant", "budget", 4)
    # an irrelevant site's evidence is its three best pages (it was its one good page alone)
    assert len(v.good) == 1 and [e["score"] for e in v.result()["evidence"]] == [0.9, 0.2, 0.1]
    v = verify_site(f"{H}/", fetch(SITE), num_rel_pages=3, page_threshold=0.99)
    assert (v.verdict, v.reason) == ("irrelevant", "exhausted")
    assert len(v.expansions) == 10  # all nine pages and the broken link, each once
    failed = [row for row in v.expansions if row.get("note") == "failed"]
    assert [row["url"] for row in failed] == [f"{H}/missing.html"] and failed[0]["score"] == 0.0
    assert v.next() is None and not v.add(f"{H}/new.html")


def test_verifier_waits_for_announced_links():
    v = SiteVerifier("s.test")
    v.add("http://s.test/")
    url, _ = v.next()
    assert v.next() is None  # one page in flight at a time
    assert not v.record(url, 0.1, links=["http://s.test/a.html"])  # not exhausted: a link is coming
    assert v.add("http://s.test/a.html") and v.next()[0] == "http://s.test/a.html"
    assert v.record("http://s.test/a.html", 0.0) and v.reason == "exhausted"


# -- the frontier -----------------------------------------------------------------------------


def link(url):
    return Link(url=url, payload=url)


def test_frontier_interleaves_sites_and_ignores_others():
    f = make_frontier("sitefinder", options={"sites_num_rel_pages": "1", "sites_page_threshold": "0.5",
                                             "sites_sitemap": "false"})
    assert isinstance(f, SiteFinderFrontier)
    f.expect("http://search.test/search?q=x")
    f.push(link("http://search.test/search?q=x"))
    assert f.pop().url == "http://search.test/search?q=x"  # search requests first
    assert f.add_site("http://a.test/", "q1") == ["http://a.test/"]
    assert f.add_site("http://a.test", "q2") == []  # each site checked once
    assert f.add_site("http://b.test/", "q1") == ["http://b.test/"]
    for url in ("http://a.test/", "http://b.test/", "http://c.test/"):
        f.push(link(url))
    assert len(f) == 2 and f.ignored == 1
    a, b = f.pop(), f.pop()
    assert (a.url, b.url) == ("http://a.test/", "http://b.test/") and f.pop() is None  # both busy
    f.push(link("http://a.test/1.html"))  # links arrive after the report (see announce)
    assert f.report("http://a.test/", 0.1, links=["http://a.test/2.html"]) is None
    f.push(link("http://a.test/2.html"))
    assert f.pop().url == "http://a.test/1.html"
    verdict = f.report("http://a.test/1.html", 0.9, ["r"])
    assert verdict["verdict"] == "relevant" and verdict["queries"] == ["q1", "q2"]
    assert len(f) == 0 and f.pop() is None  # a.test decided: its queue is dropped; b.test busy
    done = f.report("http://b.test/", 0.0)
    assert done["verdict"] == "irrelevant" and done["reason"] == "exhausted"
    stats = f.stats()
    assert stats["sites/checked"] == 2 and stats["sites/judged_relevant"] == 1
    assert stats["sites/pages_per_site"] == 1.5 and "sites/precision" not in stats


def test_frontier_redirect_continues_and_alias_joins_site():
    f = SiteFinderFrontier()
    f.add_site("http://bare.test/")
    f.push(link("http://bare.test/"))
    out = f.pop()
    redirected = Link(url="http://www.bare.test/", payload="r", seq=out.seq)  # same request, new URL
    f.push(redirected)
    assert f.pop() is redirected
    assert f.landed("http://bare.test/", "http://www.bare.test/") == "bare.test"
    assert f.wants("http://www.bare.test/a.html")
    f.report("http://bare.test/", 0.2, links=["http://www.bare.test/a.html"])
    f.push(link("http://www.bare.test/a.html"))
    assert f.pop().url == "http://www.bare.test/a.html"


def test_frontier_truth_statistics_and_state_round_trip(tmp_path):
    f = SiteFinderFrontier(num_rel_pages=1)
    f.set_truth(lambda url: url.startswith("http://good"), lambda: 4)
    for host in ("good1.test", "bad.test", "good2.test"):
        f.add_site(f"http://{host}/", f"q-{host[:3]}")
        f.push(link(f"http://{host}/"))
    f.report(f.pop().url, 0.9)  # good1: relevant
    f.report(f.pop().url, 0.9)  # bad: relevant (a false positive)
    stats = f.stats()
    assert stats["sites/precision"] == 0.5 and stats["sites/recall"] == 0.25
    assert stats["sites/query_relevance"] == {"q-goo": 1.0, "q-bad": 0.0}
    f.push(link("http://good2.test/x.html"))  # good2's entry is still queued
    g = SiteFinderFrontier(num_rel_pages=1)
    g.load_state(f.state())
    assert len(g) == 2 and [g.pop().url for _ in range(1)] == ["http://good2.test/"]
    assert g.sites["good1.test"].verdict == "relevant" and not g.sites["good1.test"].wants("http://good1.test/")
    path = f.write_report(tmp_path)
    assert path.name == "sites-summary.json" and len((tmp_path / "sites.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("key, value", [("sites_page_threshold", "1.5"), ("sites_num_rel_pages", "0"),
                                        ("sites_prior", "x"), ("sites_abstract_digits", "maybe")])
def test_bad_settings(key, value):
    with pytest.raises(FrontierError, match=f"TOPICCRAWL_{key.upper()}"):
        make_frontier("sitefinder", options={key: value})


def test_an_irrelevant_sites_evidence_keeps_every_good_page():
    """Its evidence (three best pages) dropped good pages beyond three, and the summary, which
    counts good pages from the evidence, undercounted them (NumRelPages 5, four good pages)."""
    scores = {f"http://a.test/p{i}": s for i, s in enumerate([0.9, 0.8, 0.75, 0.72, 0.1, 0.1])}
    links = {"http://a.test/": list(scores)}

    def fetch(url):
        return url, scores.get(url, 0.0), [], links.get(url, [])

    v = verify_site("http://a.test/", fetch, num_rel_pages=5, num_exp_pages=7)
    assert (v.verdict, len(v.good)) == ("irrelevant", 4)
    evidence = v.result()["evidence"]
    assert sorted(e["score"] for e in evidence) == [0.72, 0.75, 0.8, 0.9]
    f = make_frontier("sitefinder", options={"sites_num_rel_pages": "5", "sites_num_exp_pages": "7"})
    assert f.summarize([v.result()])["sites/good_pages"] == 4
