"""Batched enqueues of the Redis store against a real redis-server: the push script's duplicate
filter (one batch, two workers), flush before a lease is settled, the leased retry/redirect path,
and the compact request JSON."""

from __future__ import annotations

import json

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from redis_fixture import redis_server  # noqa: F401
from test_redis_wl import check_structures
from topiccrawl.crawl.codec import RequestCodecError, decode, encode
from topiccrawl.crawl.meta import META_KEY
from topiccrawl.crawl.scheduler import TopicScheduler
from topiccrawl.redis import crawl_keys
from topiccrawl.redis.frontier import RedisFrontier
from topiccrawl.redis.scheduler import RedisScheduler
from topiccrawl.redis.wanglandau import RedisWLFrontier
from topiccrawl.spiders.focused import FocusedSpider
from topiccrawl.strategies.simple import Link

WEB = "generated:zh-disaster?pages=1000&seed=1"


def _fp(url: str) -> str:
    return f"fp:{url}"


def _batch(f: RedisFrontier, urls: list[str], score: float = 0.5) -> list:
    links = [Link(u, score, domain=u.split("/")[2]) for u in urls]
    return f.push_many([(link, f.entry(link, _fp(link.url))) for link in links])


@pytest.mark.parametrize("cls", [RedisFrontier, RedisWLFrontier])
def test_push_many_filters_duplicates_in_a_batch_and_across_workers(redis_server, cls):
    a, b = (cls(redis_server.client(), crawl_keys("c"), worker=w) for w in ("a", "b"))
    urls = [f"http://h{i % 3}.test/{i}" for i in range(6)]
    first = _batch(a, [*urls[:4], urls[1], urls[0]])  # the last two repeat earlier links of the batch
    assert [m is not None for m in first] == [True] * 4 + [False] * 2
    second = _batch(b, [urls[3], urls[4], urls[4], urls[5], urls[0]])  # the other worker
    assert [m is not None for m in second] == [False, True, False, True, False]
    members = [m for m in first + second if m]
    assert [int(m[-12:]) for m in members] == list(range(6))  # seq in batch order
    assert a.last["queued"] == 4 and b.last["queued"] == 6 and len(a) == 6
    r, k = a.r, a.keys
    assert r.scard(k["dupefilter"]) == 6 and r.hlen(k["requests:data"]) == 6
    assert sorted(a.pop().url for _ in range(6)) == sorted(urls) and a.pop() is None
    if cls is RedisWLFrontier:
        check_structures(a)


def test_wl_batch_drops_below_the_threshold_but_marks_seen(redis_server):
    f = RedisWLFrontier(redis_server.client(), crawl_keys("c"), link_threshold=0.4)
    low = Link("http://a.test/low", 0.1, domain="a.test")
    kept = Link("http://a.test/pot", 0.1, domain="a.test", potential=True)
    high = Link("http://b.test/high", 0.9, domain="b.test")
    answers = f.push_many([(link, f.entry(link, _fp(link.url))) for link in (low, kept, high)])
    assert answers[0] == "" and answers[1] and answers[2]
    assert f.stats()["wl/dropped"] == 1 and len(f) == 2
    again = f.push_many([(low, f.entry(low, _fp(low.url)))])  # seen: a duplicate, not dropped twice
    assert again == [None] and f.stats()["wl/dropped"] == 1
    check_structures(f)


# -- the scheduler ------------------------------------------------------------------------------

def _scheduler(url: str, strategy: str = "bfs", **settings):
    crawler = get_crawler(FocusedSpider, {
        "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9", "TOPICCRAWL_STORE": "redis",
        "TOPICCRAWL_REDIS_URL": url, "TOPICCRAWL_CRAWL_ID": "batch", "TOPICCRAWL_STRATEGY": strategy,
        "TOPICCRAWL_PLOT_ENABLED": False, **settings})
    crawler.spider = crawler._create_spider(topic="台风灾害")
    scheduler = RedisScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    scheduler._renewal.stop()  # the lease-renewal loop needs a running reactor
    return scheduler


def _request(spider, i: int, parent: str = "http://p.test/list.html", **meta) -> scrapy.Request:
    topic = {"score": 0.1 + i / 100, "depth": 2, "parent": parent, "anchor": f"台风 {i}", "potential": False, **meta}
    return scrapy.Request(f"http://h{i % 4}.test/{i}.html", callback=spider.parse, meta={META_KEY: topic, "depth": 2},
                          headers={"Referer": parent})


def _queued(scheduler) -> int:
    return scheduler.r.zcard(scheduler.keys["requests"])


def test_two_schedulers_batch_and_filter_duplicates(redis_server):
    a, b = _scheduler(redis_server.url), _scheduler(redis_server.url)
    assert all(a.enqueue_request(_request(a.spider, i)) for i in [0, 1, 2, 1])  # buffered: True, no round trip
    assert _queued(a) == 0 and len(a.buffer) == 4
    assert all(b.enqueue_request(_request(b.spider, i)) for i in [2, 3, 0, 3])
    assert len(b) == 3  # b flushes first: 2, 3, 0 are new, its second 3 a duplicate within its batch
    assert b.stats.get_value("dupefilter/filtered") == 1 and b.stats.get_value("scheduler/enqueued") == 3
    assert len(a) == 4  # a's 1 is new; its 0 and 2 are b's, its second 1 its own
    assert a.stats.get_value("dupefilter/filtered") == 3 and a.stats.get_value("scheduler/enqueued") == 1
    assert not a.buffer and not b.buffer
    popped = [a.next_request() for _ in range(4)]
    assert sorted(r.url for r in popped) == [f"http://h{i}.test/{i}.html" for i in range(4)]
    assert a.next_request() is None and not a.has_pending_requests()


def test_buffer_flushes_at_the_batch_size(redis_server):
    a = _scheduler(redis_server.url)
    a.BATCH = 5
    for i in range(12):
        a.enqueue_request(_request(a.spider, i))
    assert _queued(a) == 10 and len(a.buffer) == 2


@pytest.mark.parametrize("settle", ["count", "finish", "requeue"])
def test_a_lease_is_settled_only_after_its_links_are_in_redis(redis_server, settle):
    a = _scheduler(redis_server.url)
    a.enqueue_request(_request(a.spider, 0))
    page = a.next_request()
    member = page.meta[META_KEY]["lease"]
    for i in range(1, 6):  # the page's links, buffered in this process
        a.enqueue_request(_request(a.spider, i, parent=page.url))
    assert _queued(a) == 0
    if settle == "count":
        a.responding[page.url] = member
        assert a.count({"url": page.url, "relevance": 0.9})
    elif settle == "finish":
        a.finish(member, "nopage")
    else:
        a.requeue(page)
    r, k = a.r, a.keys
    assert not a.buffer and _queued(a) == 5 + (settle == "requeue")
    assert (member in r.hgetall(k["done"])) == (settle != "requeue") and not r.zcard(k["leases"])
    data = [json.loads(d) for d in r.hvals(k["requests:data"])]
    assert {d[0] for d in data} >= {f"http://h{i % 4}.test/{i}.html" for i in range(1, 6)}


def test_leased_retries_and_redirects_are_checked_at_once(redis_server):
    a = _scheduler(redis_server.url)
    for i in range(2):
        a.enqueue_request(_request(a.spider, i))
    page = a.next_request()
    member = page.meta[META_KEY]["lease"]
    retry = page.replace(dont_filter=True)
    assert a.enqueue_request(retry) and a.local == [retry] and not a.buffer
    assert a.next_request() is retry
    redirect = page.replace(url="http://h2.test/new.html")
    assert a.enqueue_request(redirect) and a.local == [redirect]
    assert a.next_request() is redirect
    seen = page.replace(url="http://h1.test/1.html")  # a redirect to a page already queued
    assert not a.enqueue_request(seen)
    assert a.r.hget(a.keys["done"], member) == f"duplicate|{a.worker}" and member not in a.leases
    assert a.stats.get_value("dupefilter/filtered") == 1


# -- the compact JSON -----------------------------------------------------------------------------

class Spider(scrapy.Spider):
    name = "s"

    def parse(self, response):
        pass

    def failed(self, failure):
        pass


def _roundtrip(request, spider, link=None):
    stored = json.loads(json.dumps(encode(request, spider, link)))
    return stored, decode(stored, spider, link)


def test_compact_json_round_trips_non_default_requests():
    spider = Spider()
    requests = [
        scrapy.Request("http://a.test/form", method="POST", body="体=1".encode("gbk"), callback=spider.parse,
                       errback=spider.failed, cb_kwargs={"page": 2, "tags": ["台风"]}, priority=-3, dont_filter=True,
                       headers={"X-Raw": b"\xff\xfe", "Accept": "text/html"}, cookies={"sid": "1"}, flags=["x"],
                       encoding="gbk", meta={"topiccrawl": {"score": 0.5}, "k": [1, None]}),
        scrapy.FormRequest("http://a.test/search", formdata={"q": "台风"}, callback=spider.parse),
        scrapy.Request("http://a.test/plain"),
    ]
    for request in requests:
        for link in (None, TopicScheduler._link(request)):
            stored, back = _roundtrip(request, spider, link)
            assert back.to_dict(spider=spider) == request.to_dict(spider=spider)
            assert type(back) is type(request)
    stored, _ = _roundtrip(requests[2], spider)
    assert stored == {"url": "http://a.test/plain"}  # every default left out


def test_what_the_link_carries_is_not_stored_twice():
    spider = Spider()
    parent = "http://p.test/list.html"
    request = scrapy.Request("http://a.test/1", callback=spider.parse, headers={"Referer": parent},
                             meta={META_KEY: {"score": 0.25, "depth": 3, "parent": parent, "anchor": "台风",
                                              "potential": True}, "depth": 3})
    link = TopicScheduler._link(request)
    stored, back = _roundtrip(request, spider, link)
    assert stored == {"callback": "parse", "meta": {META_KEY: {"parent": parent, "anchor": "台风"}}, "~": "sdpDr"}
    assert back.to_dict(spider=spider) == request.to_dict(spider=spider)
    other = request.replace(headers={"Referer": "http://elsewhere.test/"}, meta={**request.meta, "depth": 4})
    stored, back = _roundtrip(other, spider, TopicScheduler._link(other))
    assert stored["~"] == "sdp" and stored["headers"] == {"Referer": ["http://elsewhere.test/"]}
    assert back.to_dict(spider=spider) == other.to_dict(spider=spider)
    with pytest.raises(RequestCodecError, match="http://a.test/x cannot be stored in Redis as JSON"):
        encode(scrapy.Request("http://a.test/x", meta={"obj": object()}), spider, link)


def test_entries_of_an_older_crawl_still_pop(redis_server):
    f = RedisFrontier(redis_server.client(), crawl_keys("c"))
    member = f.push(Link("http://a.test/1", 0.5, 2, "a.test", True, {"url": "http://a.test/1"}))
    old = {"url": "http://a.test/1", "score": 0.5, "depth": 2, "domain": "a.test", "potential": True,
           "payload": {"url": "http://a.test/1"}}  # requests:data as a JSON object, before the array
    f.r.hset(f.keys["requests:data"], member, json.dumps(old))
    link = f.pop()
    assert (link.url, link.score, link.depth, link.domain, link.potential, link.payload, link.seq) == \
        ("http://a.test/1", 0.5, 2, "a.test", True, {"url": "http://a.test/1"}, 0)


def test_example_pages_stay_with_the_worker_that_asked_for_them(redis_server):
    from topiccrawl.crawl.meta import LOCAL_META

    a, b = _scheduler(redis_server.url, "learned"), _scheduler(redis_server.url, "learned")
    example = scrapy.Request("http://h1.test/example.html", callback=a.spider.parse_example, dont_filter=True,
                             meta={META_KEY: {"score": 2.0, "depth": 0}, LOCAL_META: True})
    assert a.enqueue_request(example) and a.enqueue_request(_request(a.spider, 7))
    a.flush()
    assert _queued(a) == 1  # the link went to the shared queue, the example did not
    assert b.next_request().url == "http://h3.test/7.html" and b.next_request() is None
    got = a.next_request()
    assert got is example and got.callback == a.spider.parse_example  # fetched here, no lease
