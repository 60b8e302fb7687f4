"""The memory scheduler keeps queued requests packed (topiccrawl.crawl.codec.pack/unpack)."""

from __future__ import annotations

import sys
import tracemalloc

import scrapy

from conftest import memory_scheduler
from topiccrawl.crawl.codec import RequestPacker, pack, unpack
from topiccrawl.crawl.meta import META_KEY
from topiccrawl.crawl.middlewares import TRAP_META
from topiccrawl.crawl.scheduler import TopicScheduler


class Spider(scrapy.Spider):
    name = "s"

    def parse(self, response):
        pass

    def other(self, response):
        pass


def _spider_request(i: int, parent: str, **kw) -> scrapy.Request:
    topic = {"score": 0.25 + i / 1000, "depth": 3, "parent": parent, "anchor": f"台风新闻 {i}", "potential": i % 2 == 0}
    req = scrapy.Request(f"http://www.site{i % 7}.example.cn/a/{i}.html", callback=kw.pop("callback", None),
                         meta={META_KEY: topic, "depth": 3, **kw.pop("meta", {})}, headers={"Referer": parent}, **kw)
    return req


def _roundtrip(req, spider, packer: RequestPacker | None = None):
    link = TopicScheduler._link(req)
    link.payload = packer.pack(req) if packer is not None else pack(req, spider)
    return link, unpack(link, spider)


def test_spider_shaped_requests_pack_and_unpack_to_equal_requests():
    spider = Spider()
    parent = "http://www.site1.example.cn/list/1.html"
    for req in (_spider_request(4, parent, callback=spider.parse), _spider_request(5, parent, callback=spider.other),
                _spider_request(6, parent),
                _spider_request(7, parent, callback=spider.parse, meta={TRAP_META: 3}),
                scrapy.Request("http://seed.example/", callback=spider.parse,
                               meta={META_KEY: {"score": 1.0, "depth": 0}}),
                scrapy.Request("http://seed.example/b", callback=spider.parse, meta={META_KEY: {}, TRAP_META: 2})):
        link, back = _roundtrip(req, spider)
        assert isinstance(link.payload, tuple)
        assert back.to_dict(spider=spider) == req.to_dict(spider=spider)


def test_a_referer_that_is_not_the_parent_is_kept():
    spider = Spider()
    req = _spider_request(1, "http://a.example/p", callback=spider.parse)
    req.headers["Referer"] = "http://elsewhere.example/"
    link, back = _roundtrip(req, spider)
    assert isinstance(link.payload, tuple) and back.headers["Referer"] == b"http://elsewhere.example/"


def test_other_requests_stay_requests():
    spider = Spider()
    parent = "http://a.example/p"
    for req in (_spider_request(1, parent, callback=spider.parse, method="POST", body=b"x"),
                _spider_request(2, parent, callback=spider.parse, cookies={"a": "b"}),
                _spider_request(3, parent, callback=spider.parse, priority=5),
                _spider_request(4, parent, callback=spider.parse, dont_filter=True),
                _spider_request(5, parent, callback=spider.parse, errback=spider.other),
                _spider_request(6, parent, callback=spider.parse, cb_kwargs={"x": 1}),
                scrapy.Request("http://a.example/", callback=spider.parse, meta={"proxy": "http://p:1"}),
                scrapy.Request("http://a.example/", callback=lambda r: None),
                scrapy.FormRequest("http://a.example/", formdata={"q": "x"}),
                scrapy.Request("http://a.example/", headers={"Accept": "text/html"})):
        link, back = _roundtrip(req, spider)
        assert link.payload is req and back is req


def test_packed_requests_take_a_fraction_of_the_memory():
    spider = Spider()
    parents = [f"http://www.site{j}.example.cn/list/{j}.html" for j in range(200)]
    reqs = [_spider_request(i, parents[i // 10], callback=spider.parse) for i in range(2000)]

    def measure(convert) -> float:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        kept = [convert(r) for r in reqs]
        size = (tracemalloc.get_traced_memory()[0] - base) / len(kept)
        tracemalloc.stop()
        return size

    full = measure(lambda r: scrapy.Request(r.url, callback=r.callback,
                                            meta={k: dict(v) if isinstance(v, dict) else v for k, v in r.meta.items()},
                                            headers={"Referer": r.meta[META_KEY]["parent"]}))
    packed = measure(lambda r: pack(r, spider))
    assert packed < full / 3, (packed, full)
    print(f"bytes per queued request: Request {full:.0f}, packed {packed:.0f}", file=sys.stderr)


def test_requests_of_one_shape_share_it_and_odd_anchors_stay_requests():
    spider = Spider()
    parent = "http://www.site1.example.cn/list/1.html"
    packer = RequestPacker(spider)
    a, _ = _roundtrip(_spider_request(1, parent, callback=spider.parse), spider, packer)
    b, _ = _roundtrip(_spider_request(2, parent, callback=spider.parse), spider, packer)
    assert a.payload[0] is b.payload[0]  # (callback, meta extras, keys, Referer flag): one tuple
    assert isinstance(a.payload[2], bytes)  # the anchor is kept as UTF-8
    odd = _spider_request(3, parent, callback=spider.parse)
    odd.meta[META_KEY]["anchor"] = None
    assert pack(odd, spider) is odd


def test_scheduler_counts_reach_the_stats_when_published_and_wl_queues_its_own_links():
    from topiccrawl.strategies.wanglandau import WLLink

    for strategy in ("bestfirst", "wl"):
        s = memory_scheduler(strategy)
        parent = "http://www.site1.example.cn/list/1.html"
        requests = [_spider_request(i, parent, callback=s.spider.parse) for i in range(5)]
        assert all(s.enqueue_request(r) for r in requests) and not s.enqueue_request(requests[0].copy())
        if strategy == "wl":
            assert all(type(l) is WLLink for d in s.frontier._domains for l in d.entries)
        popped = [s.next_request() for _ in range(2)]
        assert {r.url for r in popped} < {r.url for r in requests}
        assert s.stats.get_value("scheduler/enqueued") is None  # counted in the scheduler, not yet published
        s.publish_stats()
        assert s.stats.get_value("scheduler/enqueued") == 5 and s.stats.get_value("scheduler/dequeued") == 2
        assert s.stats.get_value("topiccrawl/frontier_size") == 3
        s.next_request()
        s.publish_stats()
        assert s.stats.get_value("scheduler/enqueued") == 5 and s.stats.get_value("scheduler/dequeued") == 3
