"""topiccrawl.crawl.dupefilter: Scrapy's fingerprints on a fast path, and the compact duplicate filter."""

from __future__ import annotations

import random
import tracemalloc

import scrapy
from scrapy.dupefilters import RFPDupeFilter
from scrapy.utils.request import fingerprint
from w3lib.url import canonicalize_url, safe_url_string

from topiccrawl.crawl.dupefilter import CompactDupeFilter, RequestFingerprinter, is_canonical
from topiccrawl.crawl.runtime import _domain_of_host, registered_domain

TRICKY = ["http://a.com:80/x", "http://A.com/x", "http://a.com/./x", "http://a.com/a/../x", "http://a.com/x/..",
          "http://a.com/x/.", "http://a.com//x", "http://a.com/x?b=2&a=1", "http://a.com/x#frag", "http://a.com/%7Ex",
          "http://a.com/x y", "http://a.com/台风", "http://台风.cn/x", "http://a.com:/x", "http://u:p@a.com/x",
          "http://[::1]/x", "http://a.com", "https://a.com/", "http://a.com/x;p", "http://a.com/x.html",
          "http://xn--fiqs8s.cn/a", "http://a.com/.x/..y/...", "ftp://a.com/x", "http://a.com/X/Y.HTML"]


def random_urls(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcXYZ019._~-/%?#&=;:@ 台"
    out = []
    for _ in range(n):
        host = "".join(rng.choice("abcdef0.-Q") for _ in range(rng.randint(1, 8))) or "a"
        port = rng.choice(["", "", ":80", ":8080", ":"])
        path = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        out.append(f"{rng.choice(['http', 'https'])}://{host}{port}/{path}")
    return out


def test_fingerprints_are_scrapys_on_both_paths():
    fp = RequestFingerprinter()
    fast = 0
    for url in TRICKY + random_urls(3000):
        try:
            req = scrapy.Request(url)
        except ValueError:
            continue
        fast += is_canonical(req.url)
        assert fp.fingerprint(req) == fingerprint(req), url
        for other in (req.replace(method="POST"), req.replace(body=b"x"), req.replace(meta={"verbatim_url": True})):
            assert fp.fingerprint(other) == fingerprint(other), (url, other)
    assert fast > 300  # the fast path was exercised, not only the fallback


def test_the_fast_path_only_takes_urls_that_scrapy_leaves_unchanged():
    urls = [u for u in TRICKY + random_urls(20000, seed=2) if is_canonical(u)]
    assert len(urls) > 1000
    for url in urls:
        assert canonicalize_url(url) == url and safe_url_string(url) == url, url


def test_registered_domain_fast_path_matches_urlsplit():
    from urllib.parse import urlsplit

    for url in TRICKY + random_urls(3000, seed=3) + ["http://news.sina.com.cn/a", "https://www.bbc.co.uk/x"]:
        host = urlsplit(url).hostname
        assert registered_domain(url) == _domain_of_host(host or url), url
    assert registered_domain("http://news.sina.com.cn/c/1.html") == "sina.com.cn"


def _requests(n: int, seed: int = 5) -> list[scrapy.Request]:
    rng = random.Random(seed)
    return [scrapy.Request(f"http://h{rng.randrange(500)}.example.cn/a/{i:x}{rng.getrandbits(40):010x}.html")
            for i in range(n)]


def test_compact_filter_answers_like_scrapys_across_merges():
    reqs = _requests(12000)
    stream = reqs + reqs[::7] + _requests(3000, seed=6) + reqs[5000:5100]
    compact, plain = CompactDupeFilter(fingerprinter=RequestFingerprinter()), RFPDupeFilter()
    answers = [(compact.request_seen(r), plain.request_seen(r)) for r in stream]
    assert [a for a, _ in answers] == [b for _, b in answers]
    assert sum(a for a, _ in answers) == len(reqs[::7]) + 100
    assert len(compact) == 15000 and len(compact._sorted) >= 8192  # merged into the sorted array


def test_jobdir_file_is_scrapys_format_both_ways(tmp_path):
    reqs = _requests(6000)
    first = CompactDupeFilter(str(tmp_path), fingerprinter=RequestFingerprinter())
    assert not any(first.request_seen(r) for r in reqs[:5000])
    first.close("shutdown")
    scrapy_side = RFPDupeFilter(str(tmp_path))  # reads what the compact filter wrote
    assert all(scrapy_side.request_seen(r) for r in reqs[:5000]) and not scrapy_side.request_seen(reqs[5000])
    scrapy_side.close("shutdown")
    resumed = CompactDupeFilter(str(tmp_path), fingerprinter=RequestFingerprinter())
    assert all(resumed.request_seen(r) for r in reqs[:5001]) and not resumed.request_seen(reqs[5001])
    resumed.close("finished")


def test_a_seen_request_costs_a_fraction_of_scrapys_memory():
    urls = [r.url for r in _requests(40000, seed=7)]

    def per_request(df) -> float:  # requests come and go, as in the scheduler that packs them
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for url in urls:
            df.request_seen(scrapy.Request(url))
        size = (tracemalloc.get_traced_memory()[0] - base) / len(urls)
        tracemalloc.stop()
        return size

    plain = per_request(RFPDupeFilter())
    compact = per_request(CompactDupeFilter(fingerprinter=RequestFingerprinter()))
    assert compact < plain / 3, (compact, plain)
