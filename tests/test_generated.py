"""The procedural generated web (topiccrawl.weblab.generated) and the web statistics (webstats)."""

import re
import tracemalloc
from collections import Counter
from urllib.parse import urlsplit

import pytest

from topiccrawl.weblab.corpus import CorpusError, html_to_doc, open_corpus
from topiccrawl.weblab.generated import ALL_TOPICS, PORTAL_URL, PRESETS, GeneratedWeb, load_words
from topiccrawl.weblab.webstats import measure, power_law_fit

SPEC = "generated:zh-disaster?pages=20000&seed=1"


@pytest.fixture(scope="module")
def web():
    return open_corpus(SPEC)


@pytest.fixture(scope="module")
def urls(web):
    return list(web.iter_urls())


@pytest.fixture(scope="module")
def stats(web):
    return measure(web, sample=20000)


@pytest.fixture(scope="module")
def small():
    return GeneratedWeb("mixed", 3000, 5)


def _links(web, urls, every=7):
    for u in urls[::every]:
        yield u, web.get(u)


# -- specs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, message", [
    ("generated:nope", "unknown generated preset"),
    ("generated:mixed?pages=ten", "pages='ten' must be an integer"),
    ("generated:mixed?pages=10", "out of range"),
    ("generated?seed=1&colour=red", "unknown parameter"),
])
def test_bad_specs_give_one_line_errors(spec, message):
    with pytest.raises(CorpusError, match=message) as err:
        open_corpus(spec)
    assert "\n" not in str(err.value)


def test_defaults_and_presets():
    web = open_corpus("generated?pages=2000")
    assert web.name == "generated:zh-disaster" and len(web) == 2000
    assert open_corpus("generated").pages == 50000
    for preset in PRESETS:
        w = open_corpus(f"generated:{preset}?pages=3000")
        kinds = {x.split(":", 1)[1] for u in w.iter_urls() for x in w.labels(u) if x.startswith("kind:")}
        assert kinds == {"portal", "news", "forum", "blog", "gov", "realestate", "company",
                         "bookstore", "phoneshop"}, preset


# -- determinism and addressing -------------------------------------------------------------

def test_same_spec_same_bytes_and_labels_other_seed_other_web(urls):
    a, b = open_corpus(SPEC), open_corpus(SPEC)
    for u in urls[::97]:
        pa, pb = a.get(u), b.get(u)
        assert (pa.status, pa.headers, pa.body, pa.links) == (pb.status, pb.headers, pb.body, pb.links)
        assert a.labels(u) == b.labels(u)
    other = open_corpus("generated:zh-disaster?pages=20000&seed=2")
    assert other.seeds()[0] == a.seeds()[0] == PORTAL_URL
    assert set(other.iter_urls()) != set(urls)
    assert sum(other.labels(u) != a.labels(u) for u in urls[::50]) > 20


def test_every_canonical_url_is_served_and_unique(web, urls):
    assert len(urls) == len(set(urls)) == len(web) == 20000
    for u in urls[::13]:
        page = web.get(u)
        assert page.status == 200 and page.url == u and "Last-Modified" in page.headers
        assert u.startswith("http://") and web.has_host(urlsplit(u).hostname)
        assert all(v.startswith("http://") for v in page.links)


def test_search_sample_is_even_and_deterministic():
    web = GeneratedWeb("mixed", 1_000_000, 1)
    sample = list(web.search_sample(500))
    assert sample == list(web.search_sample(500)) and len(set(sample)) == 500
    assert len({urlsplit(u).hostname for u in sample}) > 100


def test_million_page_web_opens_small_and_serves():
    tracemalloc.start()
    web = open_corpus("generated:mixed?pages=1000000&seed=9")
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert size < 30_000_000  # the host table only, never the pages
    assert len(web) == 1_000_000
    url = next(web.search_sample(1000))
    last = list(web.search_sample(1000))[-1]
    assert web.get(last).status == 200 and web.get(url).status == 200
    assert web.describe()["pages"] == 1_000_000


# -- junk -----------------------------------------------------------------------------------

def test_aliases_redirect_chains_and_duplicates(web, urls):
    seen = Counter()
    for u, page in _links(web, urls, 3):
        for v in page.links:
            if "?from=" in v:
                dup = web.get(v)
                canon = v.split("?")[0]
                assert dup.status == 200 and dup.body == web.get(canon).body
                assert web.labels(v) == web.labels(canon)
                seen["from"] += 1
            elif "/old/" in v:
                first = web.get(v)
                assert first.status == 301 and "/go/" in first.headers["Location"]
                second = web.get(first.headers["Location"])
                assert second.status == 302
                final = web.get(second.headers["Location"])
                assert final.status == 200 and web.labels(v) == web.labels(final.url)
                assert final.url in set(urls)
                seen["chain"] += 1
            elif "/print/" in v:
                assert web.get(v).status == 200 and web.labels(v) == web.labels(u)
                seen["print"] += 1
            elif v.endswith("/index.html"):
                assert web.get(v).body == web.get(v[:-10]).body
                seen["index"] += 1
        if min(seen["chain"], seen["from"], seen["print"]) > 20 and seen["index"]:
            break
    assert min(seen["chain"], seen["from"], seen["print"]) > 20 and seen["index"]
    bare = next(h for h in web.table if h.bare)
    moved = web.get(f"http://{bare.bare}/")
    assert moved.status == 301 and moved.headers["Location"] == f"http://{bare.name}/"
    assert web.get(f"http://{bare.name}/index.php").status == 301


def test_broken_links_and_unknown_paths_are_404(web, urls):
    broken = [v for _, p in _links(web, urls, 5) for v in p.links if web.get(v) is None]
    assert len(broken) > 30
    assert all(web.labels(v) == frozenset() for v in broken)
    home = urls[0]
    for path in ("nothing.html", "a/00012.html", "list/999.html", "calendar/2024/06/",
                 "?q=1", "go/1.html"):
        assert web.get(home + path) is None
    assert web.get("http://not-a-host.example/") is None


def test_spider_trap_calendar_goes_on_forever(web):
    url = web.describe()["trap"]
    host = urlsplit(url).hostname
    assert url in web.get(f"http://{host}/").links
    for _ in range(60):
        page = web.get(url)
        assert page.status == 200
        assert web.labels(url) >= {"kind:gov"} and not any(x.startswith("topic:") for x in web.labels(url))
        url = next(v for v in page.links if "/calendar/" in v and v > url)
    assert re.search(r"/calendar/2029/06/$", url)
    assert web.get(f"http://{host}/calendar/2024/13/") is None


def test_charsets_right_and_wrong(web):
    modes = {h.enc: h for h in web.table}
    assert {"utf8", "gbk", "gb18030", "meta-only", "wrong-header"} <= set(modes)
    for mode, header, meta in (("gbk", "gbk", "gbk"), ("gb18030", "gb18030", "gb18030"),
                               ("meta-only", None, "gb2312"), ("wrong-header", "utf-8", "gbk")):
        h = modes[mode]
        page = web.get(f"http://{h.name}/")
        ctype = page.headers["Content-Type"]
        assert (f"charset={header}" in ctype) if header else ctype == "text/html"
        assert f'<meta charset="{meta}">'.encode() in page.body
        text = page.body.decode(meta)
        assert h.site in text
        with pytest.raises(UnicodeDecodeError):
            page.body.decode("utf-8")


def test_non_html_files_and_huge_pages(web, urls):
    files = [u for u in urls if "/upload/" in u]
    assert len(files) > 100
    magic = {"pdf": (b"%PDF", "application/pdf"), "jpg": (b"\xff\xd8", "image/jpeg"),
             "doc": (b"\xd0\xcf\x11\xe0", "application/msword")}
    for u in files[:30]:
        head, ctype = magic[u.rsplit(".", 1)[1]]
        page = web.get(u)
        assert page.body.startswith(head) and page.headers["Content-Type"] == ctype
        assert web.doc(u) is None and page.links == []
        assert web.get(u.replace("/upload/", "/go/").rsplit(".", 1)[0] + ".html").status == 302
    sizes = [len(web.get(u).body) for u in urls[::40]]
    sizes.sort()
    assert 2000 <= sizes[len(sizes) // 2] <= 15000
    huge = [h for h in web.table if h.huge]
    assert huge and len(web.get(web._url(huge[0], min(huge[0].huge))).body) > 2_000_000


def test_robots_txt(web):
    texts = [web.robots_txt(h) for h in web.hosts()]
    assert any(t is None for t in texts)
    assert sum("Crawl-delay" in t for t in texts if t) >= 1
    assert sum("Disallow: /print/" in t for t in texts if t) >= 5
    for t in filter(None, texts):
        star = t.split("\n\n")[0]
        assert "Disallow: /\n" not in star
        assert not re.search(r"Disallow: /(a|art|post|thread|detail|info|story|page|list)\b", star)


# -- labels and content ---------------------------------------------------------------------

def test_label_scheme(web, urls):
    known = {f"topic:{t}" for t in ALL_TOPICS} | {"site:bookstore", "site:phoneshop"}
    for u in urls[::3]:
        labels = web.labels(u)
        assert sum(x.startswith("kind:") for x in labels) == 1
        assert sum(x.startswith("lang:") for x in labels) == 1
        assert {x for x in labels if x.startswith(("topic:", "site:"))} <= known
    shops = [h for h in web.table if h.spec.shop]
    for h in shops:
        for j in range(0, h.n, 7):
            assert f"site:{h.spec.shop}" in web.labels(web._url(h, j))
    counts = Counter(x for u in urls for x in web.labels(u))
    assert counts["topic:暴雨灾害"] > 200 and counts["kind:portal"] >= 4
    # every topic and site label, counted exactly (a shop's topic label was left out)
    assert {k: n for k, n in counts.items() if k.startswith(("topic:", "site:"))} == web.describe()["label_pages"]
    assert any({"topic:台风灾害", "topic:暴雨灾害"} <= web.labels(u) for u in urls)


def test_urls_do_not_reveal_labels(web, urls):
    tokens = ["baoyu", "taifeng", "fangchan", "fangdichan", "zaihai", "book", "tushu", "shudian",
              "phone", "shouji", "weather", "qixiang", "storm", "typhoon", "flood", "disaster",
              "house", "topic", "site", "kind"]
    words = {w for name in ("zh-rainstorm", "zh-typhoon", "zh-realestate", "zh-bookstore",
                            "zh-phoneshop", "en-weather") for w in load_words(name)[0]}
    words = {w.lower() for w in words if len(w) > 3 and w.isascii()}
    linked = {v for _, p in _links(web, urls, 11) for v in p.links}
    for u in set(urls) | linked:
        low = u.lower()
        assert u.isascii() and not any(t in low for t in tokens) and not any(w in low for w in words), u
    # within a host, relevant and irrelevant content pages share one URL shape
    shapes: dict[tuple, set] = {}
    for u in urls:
        topical = any(x.startswith("topic:") and x[6:] in ("暴雨灾害", "台风灾害", "房产", "en-weather")
                      for x in web.labels(u))
        shapes.setdefault((urlsplit(u).hostname, topical), set()).add(re.sub(r"\d+", "#", u))
    for (host, topical), shape in shapes.items():
        if topical:
            assert shape <= shapes[(host, False)], host


def test_topic_words_and_shared_vocabulary(web, urls):
    rain = [u for u in urls if "topic:暴雨灾害" in web.labels(u) and "topic:台风灾害" not in web.labels(u)]
    typhoon = [u for u in urls if "topic:台风灾害" in web.labels(u)]
    text = " ".join(web.doc(u).text for u in rain[:40])
    for w in ("暴雨", "气象", "天气", "灾害", "预防"):
        assert w in text
    text = " ".join(web.doc(u).text for u in typhoon[:40])
    for w in ("台风", "风暴潮", "暴雨", "气压", "风力"):
        assert w in text
    shares = [web.doc(u).text.count("暴雨") / max(1, len(web.doc(u).text)) for u in rain[:60]]
    assert max(shares) > 3 * min(shares)  # relevant pages vary in strength
    gov = [u for u in urls if web.labels(u) == {"kind:gov", "lang:zh"} and "/art/" in u]
    weather = [web.doc(u).text for u in gov[:200]]
    assert sum("天气" in t and "气压" in t for t in weather) > 10  # irrelevant pages share words


def test_doc_override_matches_served_html(web, urls):
    for u in urls[5::211]:
        page = web.get(u)
        if "html" not in page.headers["Content-Type"] or len(page.body) > 1_000_000:
            continue
        fast = web.doc(u)
        meta = re.search(rb'<meta charset="([\w-]+)"', page.body).group(1).decode()
        parsed = html_to_doc(u, page.body, page.links, meta)
        assert fast.title == parsed.title and fast.links == page.links
        assert set(fast.text.split()) >= set(parsed.text.split()) - {"©", parsed.text.split()[-1]}


def test_shops_portal_and_decoys():
    web = open_corpus("generated:zh-bookstores?pages=20000&seed=4")
    urls = list(web.iter_urls())
    products = [u for u in urls if {"topic:bookstore", "site:bookstore"} <= web.labels(u)
                and "/list.asp" not in u and not u.endswith("/")]
    body = web.get(products[0]).body.decode("gb18030", "replace")
    assert re.search(r"售价：\d+\.\d0元", body) and "ISBN：978-7-" in body
    assert "出版社：" in body and "作者：" in body and "加入购物车" in body and "内容简介" in body
    assert any(re.search(r"/list\.asp\?cat=\d+&page=\d+$", u) for u in urls)
    phones = [u for u in urls if "topic:phoneshop" in web.labels(u) and u.endswith(".html")]
    assert "价格：￥" in web.doc(phones[0]).text
    shop_hosts = {h.name for h in web.table if h.spec.shop}
    for u in urls[::5]:
        if urlsplit(u).hostname in shop_hosts:
            other = {urlsplit(v).hostname for v in web.get(u).links} - {urlsplit(u).hostname}
            assert not other & shop_hosts, u
    portal = web.get(PORTAL_URL)
    pages = [portal] + [web.get(v) for v in portal.links if v.startswith(PORTAL_URL + "dir/")]
    listed = {urlsplit(v).hostname for p in pages for v in p.links}
    stores = {h.name for h in web.table if h.spec.shop == "bookstore"}
    assert 0 < len(listed & stores) < len(stores)
    reviews = {h.name for h in web.table if h.variant == "blog-books"}
    decoys = [u for u in urls if urlsplit(u).hostname in reviews and "/post/" in u]
    assert all(web.labels(u) == {"kind:blog", "lang:zh"} for u in decoys)
    decoy_text = " ".join(web.doc(u).text for u in decoys[:300])
    assert "作者" in decoy_text and "书评" in decoy_text and "加入购物车" not in decoy_text


# -- statistics -----------------------------------------------------------------------------

@pytest.mark.parametrize("label", ["topic:暴雨灾害", "topic:台风灾害", "topic:房产"])
def test_locality_and_tunnelling_within_targets(stats, label):
    loc = stats["locality"][label]
    assert 0.12 <= loc["p_rel_given_rel"] <= 0.30
    assert loc["p_rel_given_irr"] <= 0.03
    tun = stats["tunnelling"][label]
    assert tun["reached"] >= 15 and tun["unreached"] <= tun["clusters"] // 10
    assert 3 <= tun["mean"] <= 7 and tun["min"] >= 1 and tun["max"] <= 12


def test_power_law_in_degree(stats):
    deg = stats["in_degree"]
    assert 1.5 <= deg["alpha"] <= 3.5 and deg["tail"] >= 30
    assert deg["max"] > 50 * deg["median"]
    assert stats["sampled"] == 20000 and 5 <= stats["links_per_page"] <= 30


def test_power_law_fit_recovers_a_known_exponent():
    import numpy as np
    xs = np.random.default_rng(3).zipf(2.5, 5000)
    assert abs(power_law_fit(xs.tolist())["alpha"] - 2.5) < 0.2
