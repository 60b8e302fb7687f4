"""One scheduler contract for every strategy × store (memory, Redis) × (fresh, reopened).

Modelled on Scrapy's tests/test_scheduler.py: the scheduler is built the way Scrapy builds it
(``get_crawler`` with the project's settings, ``load_object(SCHEDULER).from_crawler``), its methods
are called directly, no engine. The requests are the focused spider's (its ``parse`` callback and
``meta["topiccrawl"]``). The contract:

* ``enqueue_request`` accepts a new URL; a duplicate is never stored (``len`` does not grow, it
  never comes out, ``dupefilter/filtered`` counts it) and the memory store answers False; the Redis
  store answers True, as its docstring says: it checks duplicates at the batched flush;
* ``len(scheduler)`` is the number of queued requests and ``has_pending_requests()`` agrees;
* each request comes out of ``next_request`` exactly once with its meta, Referer and callback
  (calling it runs the spider's ``parse``), then None; bfs is FIFO, bestfirst non-increasing R(l)
  with ties in insertion order, oracle truly relevant first; the sampling strategies are
  deterministic for a fixed seed;
* reopened: a shutdown after k of N requests (memory: JOBDIR; Redis: the same crawl id) loses
  nothing: a new scheduler hands out the k in flight first, then the rest as the uninterrupted
  scheduler would, each once, and still knows every URL seen.

The ``sitefinder`` strategy is driven by its own spider (candidate sites, not scored links): its
contract is :func:`test_sitefinder_strategy_hands_out_each_candidate_site_once`.
"""

from __future__ import annotations

import random

import pytest
import scrapy
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from redis_fixture import redis_server  # noqa: F401
from topiccrawl.crawl.scheduler import META_KEY
from topiccrawl.spiders.focused import FocusedSpider
from topiccrawl.spiders.sitefinder import SiteFinderSpider

try:  # the strategy registry with a Redis flag per strategy
    from topiccrawl.strategies.base import STRATEGIES as _REGISTRY

    REDIS_STRATEGIES = tuple(name for name, strategy in _REGISTRY.items() if strategy.redis)
except ModuleNotFoundError as exc:  # the registry of names; the Redis store lists its strategies
    if exc.name != "topiccrawl.strategies.base":
        raise
    from topiccrawl.redis import STRATEGIES as REDIS_STRATEGIES
    from topiccrawl.strategies.simple import STRATEGIES as _REGISTRY

#: strategies of the site finder's spider, tested on their own below
SITE_STRATEGIES = ("sitefinder",)
#: strategies that read an offline web's whole link graph (this contract crawls the live web with a
#: labels file): tests/test_frontier.py and tests/test_crawl.py
OFFLINE_STRATEGIES = ("oracle-path",)
CASES = [("memory", s) for s in _REGISTRY if s not in SITE_STRATEGIES + OFFLINE_STRATEGIES] + \
        [("redis", s) for s in REDIS_STRATEGIES if s not in SITE_STRATEGIES]
#: what ``enqueue_request`` answers for a duplicate (Redis: checked at the batched flush, see
#: topiccrawl/redis/scheduler.py, RedisScheduler.enqueue_request)
DUPLICATE_ANSWER = {"memory": False, "redis": True}

TOPIC, LABEL = "台风灾害", "topic:台风灾害"
N, K = 30, 7  # requests, and how many are in flight at the shutdown
TOPIC_KEYS = ("score", "depth", "parent", "anchor", "potential")


def _url(i: int) -> str:
    return f"http://news{i % 4}.example.com/a/{i}.html"


#: ground truth of the oracle: every third page is truly relevant
RELEVANT = frozenset(_url(i) for i in range(N) if i % 3 == 0)


def _project_settings() -> dict:
    settings = BaseSettings()
    settings.setmodule("topiccrawl.settings")
    return settings.copy_to_dict()


def _crawler(spidercls, tmp_path, store: str, strategy: str, crawl_id: str, redis_url: str = "",
             jobdir=None, **spider_args):
    """A crawler with the project's settings, its spider, and the scheduler Scrapy would build."""
    labels = tmp_path / "truth.tsv"
    labels.write_text("".join(f"{u}\t{LABEL}\n" for u in sorted(RELEVANT)), encoding="utf-8")
    settings = {
        **_project_settings(),
        "TOPICCRAWL_TOPIC": TOPIC, "TOPICCRAWL_STRATEGY": strategy, "TOPICCRAWL_STORE": store,
        "TOPICCRAWL_CRAWL_ID": crawl_id, "TOPICCRAWL_WEB": "live", "TOPICCRAWL_GROUND_TRUTH": str(labels),
        "TOPICCRAWL_OUTPUT_DIR": str(tmp_path / "out" / crawl_id), "TOPICCRAWL_PLOT_ENABLED": False,
        "TOPICCRAWL_WL_SEED": 7, "TOPICCRAWL_SA_SEED": 7,
        # the queue's contract: no engine answers the pages handed out, so patient dispatch (the
        # default for learned with words, its first pages) would hold; it is tested in test_dispatch
        "TOPICCRAWL_DISPATCH": "eager",
    }
    if spidercls is SiteFinderSpider:  # it pins an offline web: read through a proxy, no web lab
        settings["TOPICCRAWL_WEB_PROXY"] = "http://127.0.0.1:9"  # (refused beside the live web of the others)
    if redis_url:
        settings["TOPICCRAWL_REDIS_URL"] = redis_url
    if jobdir is not None:
        settings["JOBDIR"] = str(jobdir)
    crawler = get_crawler(spidercls, settings)
    crawler.spider = spidercls.from_crawler(crawler, **spider_args)
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(crawler.spider)
    return crawler, scheduler


def _requests(spider) -> list[scrapy.Request]:
    """N requests as the focused spider yields them (a seed, then links of fetched pages), with
    the ``depth`` and Referer that Scrapy's spider middlewares add; ties in R(l) on purpose."""
    rng = random.Random(5)
    requests = [scrapy.Request(_url(0), callback=spider.parse, meta={META_KEY: {"score": 1.0, "depth": 0}})]
    for i in range(1, N):
        parent = requests[(i - 1) // 4]
        depth = parent.meta[META_KEY]["depth"] + 1
        score = rng.choice([0.2, 0.45, 0.45, 0.7]) if i % 2 else round(rng.random(), 6)
        topic = {"score": score, "depth": depth, "parent": parent.url, "anchor": f"台风 新闻 {i}",
                 "potential": i % 5 == 0}
        requests.append(scrapy.Request(_url(i), callback=spider.parse, meta={META_KEY: topic, "depth": depth},
                                       headers={"Referer": parent.url}))
    return requests


def _expected(strategy: str, requests: list[scrapy.Request]) -> list[str] | None:
    """The order the contract states for ``strategy`` (None: a sampling strategy)."""
    index = {r.url: i for i, r in enumerate(requests)}

    def best_first(r):
        return -r.meta[META_KEY]["score"], index[r.url]

    if strategy == "bfs":
        return [r.url for r in requests]
    if strategy == "bestfirst":
        return [r.url for r in sorted(requests, key=best_first)]
    if strategy == "oracle":
        return [r.url for r in sorted(requests, key=lambda r: (r.url not in RELEVANT, *best_first(r)))]
    return None


def _enqueue_all(scheduler, requests, store: str) -> None:
    for r in requests:
        assert scheduler.enqueue_request(r) is True
    duplicates = [requests[i].replace() for i in (0, 5, N - 1)]  # new objects, same URLs
    for r in duplicates:
        assert scheduler.enqueue_request(r) is DUPLICATE_ANSWER[store]
    assert len(scheduler) == N and scheduler.has_pending_requests()
    assert scheduler.stats.get_value("dupefilter/filtered") == len(duplicates)


def _pop(scheduler, n: int, queued: int) -> list[scrapy.Request]:
    """``n`` requests; ``len`` and ``has_pending_requests`` follow every pop."""
    out = []
    for _ in range(n):
        request = scheduler.next_request()
        assert request is not None, f"None with {len(scheduler)} queued"
        out.append(request)
        queued -= 1
        assert len(scheduler) == queued and scheduler.has_pending_requests() == (queued > 0)
    return out


def _drain(scheduler, queued: int) -> list[scrapy.Request]:
    out = _pop(scheduler, queued, queued)
    assert scheduler.next_request() is None
    assert len(scheduler) == 0 and not scheduler.has_pending_requests()
    return out


def _check_requests(crawler, popped: list[scrapy.Request], requests: list[scrapy.Request]) -> None:
    """Meta and Referer as enqueued; the callback runs the spider's ``parse`` (a non-HTML response
    is only counted there: ``topiccrawl/non_html``)."""
    sent = {r.url: r for r in requests}
    for got in popped:
        want = sent[got.url]
        topic = got.meta.get(META_KEY) or {}
        sent_topic = want.meta[META_KEY]
        assert {k: topic[k] for k in TOPIC_KEYS if k in topic} == {k: sent_topic[k] for k in TOPIC_KEYS if k in sent_topic}
        assert got.meta.get("depth") == want.meta.get("depth"), got.url
        assert got.headers.get("Referer") == want.headers.get("Referer"), got.url
    before = crawler.stats.get_value("topiccrawl/non_html", 0)
    for got in popped:
        assert list(got.callback(Response(got.url, request=got)) or ()) == []
    assert crawler.stats.get_value("topiccrawl/non_html", 0) - before == len(popped)


def _fresh(tmp_path, store, strategy, redis_url):
    orders = []
    for run in ("a", "b"):  # two schedulers, the same input: the same order
        crawler, scheduler = _crawler(FocusedSpider, tmp_path, store, strategy, f"contract-{run}", redis_url)
        assert len(scheduler) == 0 and not scheduler.has_pending_requests()
        assert scheduler.next_request() is None
        requests = _requests(crawler.spider)
        _enqueue_all(scheduler, requests, store)
        popped = _drain(scheduler, N)
        urls = [r.url for r in popped]
        assert sorted(urls) == sorted(r.url for r in requests)  # each once
        _check_requests(crawler, popped, requests)
        expected = _expected(strategy, requests)
        if expected is not None:
            assert urls == expected
        orders.append(urls)
        scheduler.close("finished")
    assert orders[0] == orders[1]


def _reopened(tmp_path, store, strategy, redis_url):
    jobdir = tmp_path / "job"
    crawler, scheduler = _crawler(FocusedSpider, tmp_path, store, strategy, "contract", redis_url, jobdir)
    requests = _requests(crawler.spider)
    _enqueue_all(scheduler, requests, store)
    inflight = [r.url for r in _pop(scheduler, K, N)]
    scheduler.close("shutdown")  # Ctrl-C / SIGTERM with K requests in flight

    crawler, scheduler = _crawler(FocusedSpider, tmp_path, store, strategy, "contract", redis_url, jobdir)
    assert len(scheduler) == N and scheduler.has_pending_requests()
    assert scheduler.enqueue_request(requests[3].replace()) is DUPLICATE_ANSWER[store]  # still known
    again = [scrapy.Request(_url(N), callback=crawler.spider.parse, headers={"Referer": _url(0)},  # a new URL
                            meta={META_KEY: {"score": 0.45, "depth": 1, "parent": _url(0), "anchor": "台风"}, "depth": 1})]
    assert scheduler.enqueue_request(again[0]) is True
    popped = _drain(scheduler, N + 1)
    urls = [r.url for r in popped]
    assert sorted(urls) == sorted(r.url for r in [*requests, *again])  # nothing lost, nothing twice
    _check_requests(crawler, popped, [*requests, *again])
    expected = _expected(strategy, requests)
    if expected is not None:  # the requests in flight first, then the uninterrupted order
        assert inflight == expected[:K] and set(urls[:K]) == set(inflight)
        assert [u for u in urls[K:] if u != again[0].url] == expected[K:]
    scheduler.close("finished")


@pytest.mark.parametrize("mode", ["fresh", "reopened"])
@pytest.mark.parametrize(("store", "strategy"), CASES, ids=[f"{s}-{t}" for s, t in CASES])
def test_scheduler_contract(request, tmp_path, store, strategy, mode):
    redis_url = request.getfixturevalue("redis_server").url if store == "redis" else ""
    (_fresh if mode == "fresh" else _reopened)(tmp_path, store, strategy, redis_url)


def test_every_strategy_is_in_the_contract():
    assert {s for _, s in CASES} | set(SITE_STRATEGIES) | set(OFFLINE_STRATEGIES) == set(_REGISTRY)
    assert set(REDIS_STRATEGIES) <= set(_REGISTRY) and {"bfs", "bestfirst"} <= set(REDIS_STRATEGIES)


# -- the site finder's strategy -------------------------------------------------------------------

#: candidate sites as the ``sites`` spider argument gives them; the last is a second page of a site
SITES = [f"http://www.shop{i}.example.cn/books/{i}.html" for i in range(6)] + ["http://www.shop1.example.cn/about"]
#: each site's first entry page: the URL that named it (docs/sitefinder.md, "Entry pages")
ENTRIES = SITES[:6]
SITE_STORES = [s for s, names in (("memory", _REGISTRY), ("redis", REDIS_STRATEGIES)) if "sitefinder" in names]


def _offer_sites(spider, scheduler) -> None:
    """What ``SiteFinderSpider.start()`` does with its ``sites`` argument (its meta-search needs a
    running engine: the spider reaches the frontier through ``crawler.engine.scheduler``)."""
    for url in spider.extra_sites:
        for entry in scheduler.frontier.add_site(url, "sites argument"):
            assert scheduler.enqueue_request(spider._page_request(entry, 0)) is True


def _site_requests(scheduler, spider, n: int | None = None) -> list[scrapy.Request]:
    """Up to ``n`` (all: until None) entry requests, each the spider's own."""
    out = []
    while n is None or len(out) < n:
        request = scheduler.next_request()
        if request is None:
            assert n is None, f"None after {len(out)} of {n}"
            break
        assert (request.callback, request.errback, request.dont_filter) == (spider.parse_page, spider.page_failed, True)
        topic = {k: v for k, v in request.meta[META_KEY].items() if k != "seq"}  # seq: the scheduler's
        assert topic == {"score": 1.0, "depth": 0, "parent": None, "anchor": ""}
        out.append(request)
    return out


@pytest.mark.parametrize("mode", ["fresh", "reopened"])
@pytest.mark.parametrize("store", SITE_STORES)
def test_sitefinder_strategy_hands_out_each_candidate_site_once(request, tmp_path, store, mode):
    """Each candidate site's first entry page (the URL that named it) comes out once, in the order
    the sites were found; then None while the sites wait for their scores, their other entry pages
    queued (a reopened crawl: the ones in flight first).
    ``len`` and ``has_pending_requests`` are read before the requests and checked after them."""
    redis_url = request.getfixturevalue("redis_server").url if store == "redis" else ""
    jobdir = tmp_path / "job" if mode == "reopened" else None
    args = {"sites": ",".join(SITES)}
    crawler, scheduler = _crawler(SiteFinderSpider, tmp_path, store, "sitefinder", "sites", redis_url, jobdir, **args)
    empty = (scheduler.has_pending_requests(), len(scheduler))
    _offer_sites(crawler.spider, scheduler)
    _offer_sites(crawler.spider, scheduler)  # found again (another query): checked once
    offered = (scheduler.has_pending_requests(), len(scheduler))
    if mode == "reopened":
        inflight = [r.url for r in _site_requests(scheduler, crawler.spider, 2)]
        scheduler.close("shutdown")
        crawler, scheduler = _crawler(SiteFinderSpider, tmp_path, store, "sitefinder", "sites", redis_url, jobdir,
                                      **args)
        _offer_sites(crawler.spider, scheduler)  # a resumed crawl runs start() again
        resumed = (scheduler.has_pending_requests(), len(scheduler))
        assert inflight == ENTRIES[:2]
    urls = [r.url for r in _site_requests(scheduler, crawler.spider)]
    assert sorted(urls) == sorted(ENTRIES)  # each site once
    assert urls == ENTRIES  # in the order found (resumed: the ones in flight first, in that order)
    # each site's further entry pages (its root, /sitemap.xml, shop1's second hit) wait, queued,
    # until its first page is scored (minimum cost): next_request says None meanwhile
    waiting = (scheduler.has_pending_requests(), len(scheduler))
    assert waiting == (True, 2 * len(ENTRIES) + 1) and scheduler.next_request() is None
    assert empty == (False, 0) and offered == (True, len(ENTRIES) + waiting[1])
    if mode == "reopened":
        assert resumed == offered
    scheduler.close("finished")
