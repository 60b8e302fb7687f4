"""The Redis store against a real redis-server: strategy order, leases, budget, codec, graph, errors."""

from __future__ import annotations

import json
import random
import time

import pytest
from scrapy import Request
from scrapy.settings import Settings

from conftest import free_port
from redis_fixture import PASSWORD, redis_server, redis_server_auth  # noqa: F401
from topiccrawl.crawl.codec import decode, encode
from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig
from topiccrawl.redis import RedisStoreError, connect, crawl_keys
from topiccrawl.redis.frontier import RedisFrontier, sortable_hex
from topiccrawl.redis.graph import SharedLinkGraph
from topiccrawl.scoring.importance import LinkGraph
from topiccrawl.strategies.simple import Link, make_frontier


def _relevant(url: str) -> bool:
    return int(url.rsplit("/", 1)[1]) % 3 == 0


def _links(n: int, seed: int) -> list[Link]:
    rng = random.Random(seed)
    pool = [0.0, 1.0, 0.5, 0.5 + 1e-17, 0.5 + 2e-16, 1e-300, 0.3333333333333333]
    return [Link(f"http://h{i % 7}.test/{i}", rng.choice(pool) if rng.random() < 0.4 else rng.random(),
                 depth=i % 4, domain=f"h{i % 7}.test", payload={"i": i}) for i in range(n)]


def _frontier(server, strategy, crawl="c", **kw) -> RedisFrontier:
    return RedisFrontier(server.client(), crawl_keys(crawl), strategy, _relevant, **kw)


def test_sortable_hex_orders_like_floats():
    xs = [-1.0, -0.5, -1e-300, -0.0, 0.0, 1e-300, 0.5, 0.5 + 1.2e-16, 1.0, 3.0]
    keys = [sortable_hex(x) for x in xs]
    assert keys == sorted(keys)
    assert sortable_hex(-0.0) == sortable_hex(0.0)
    assert len(set(keys)) == len(xs) - 1  # only -0.0 == 0.0 collide


@pytest.mark.parametrize("strategy", ["bfs", "bestfirst", "oracle"])
def test_redis_order_equals_the_memory_strategy(redis_server, strategy):
    memory = make_frontier(strategy, _relevant)
    shared = _frontier(redis_server, strategy)
    rng = random.Random(3)
    popped_m, popped_r = [], []
    for i, (a, b) in enumerate(zip(_links(400, 1), _links(400, 1))):
        memory.push(a)
        shared.push(b)
        assert a.seq == b.seq == i
        if rng.random() < 0.3:  # interleaved pops, as in a crawl
            popped_m.append(memory.pop().url)
            popped_r.append(shared.pop().url)
    while len(memory):
        popped_m.append(memory.pop().url)
        popped_r.append(shared.pop().url)
    assert shared.pop() is None and len(shared) == 0
    assert popped_r == popped_m and len(popped_m) == 400


def test_popped_link_keeps_fields_and_payload(redis_server):
    f = _frontier(redis_server, "bestfirst")
    f.push(Link("http://a.test/1", 0.25, depth=3, domain="a.test", potential=True, payload={"x": ["台风", 1]}))
    link = f.pop()
    assert (link.url, link.score, link.depth, link.domain, link.potential, link.payload, link.seq) == \
        ("http://a.test/1", 0.25, 3, "a.test", True, {"x": ["台风", 1]}, 0)


def test_expired_lease_returns_with_its_priority_and_is_counted(redis_server):
    a = _frontier(redis_server, "bestfirst", lease_seconds=0.3, worker="a")
    b = _frontier(redis_server, "bestfirst", lease_seconds=30, worker="b")
    for i, score in enumerate([0.9, 0.5, 0.1]):
        a.push(Link(f"http://x.test/{i}", score))
    first = a.pop()
    assert first.url == "http://x.test/0"
    assert b.status() == {"queued": 2, "leased": 1, "dp": 0, "reclaimed": 0}
    time.sleep(0.6)  # let a's lease run out (a worker killed with kill -9 renews nothing)
    again = b.pop()
    assert again.url == first.url and b.last["reclaimed"] == 1  # the best link again, not x.test/1
    assert b.counters()["lease_expired"] == 1
    assert a.count(a.member(first)) == 1  # the slow worker a counts it first: once
    assert b.count(b.member(again)) == -2  # b's copy is a counted re-delivery, not a second page
    assert b.status() == {"queued": 2, "leased": 0, "dp": 1, "reclaimed": 0}


def test_renewed_lease_does_not_expire(redis_server):
    a = _frontier(redis_server, "bfs", lease_seconds=1.0, worker="a")
    a.push(Link("http://x.test/1"))
    link = a.pop()
    for _ in range(4):  # 1.2 s in all: past the first lease period, 0.7 s margin per renewal
        time.sleep(0.3)
        assert a.renew([a.member(link)]) == 1
    assert a.status()["leased"] == 1 and a.status()["queued"] == 0


def test_ack_release_and_done_account_for_every_link(redis_server):
    f = _frontier(redis_server, "bestfirst", worker="w")
    other = _frontier(redis_server, "bestfirst", worker="v")
    for i in range(5):
        f.push(Link(f"http://x.test/{i}", i / 10))
    best, second, third = f.pop(), f.pop(), f.pop()
    assert other.release([f.member(best)]) == 0  # not v's lease
    assert f.release([f.member(best)]) == 1
    assert f.pop().url == best.url  # back with its original priority
    assert f.count(f.member(best), lp=True, truth=True) == 1
    assert f.finish(f.member(second), "failed:TimeoutError") == 1
    assert f.finish(f.member(second), "nopage") == -2
    r, k = f.r, f.keys
    assert r.hgetall(k["done"]) == {f.member(best): "counted|w", f.member(second): "failed:TimeoutError|w"}
    assert f.counters() == {"dp": 1, "lp": 1, "truth": 1, "uncounted": 1, "released": 1}
    # every accepted link is in exactly one of queue, leases, done
    members = set(r.zrange(k["requests"], 0, -1)) | set(r.zrange(k["leases"], 0, -1)) | set(r.hkeys(k["done"]))
    assert len(members) == int(r.get(k["requests:seq"])) == 5
    assert f.member(third) in r.zrange(k["leases"], 0, -1)


def test_budget_counts_leases_and_refuses_pops(redis_server):
    f = _frontier(redis_server, "bfs", budget=2)
    for i in range(4):
        f.push(Link(f"http://x.test/{i}"))
    one, two = f.pop(), f.pop()
    assert f.pop() is None and f.last["blocked"]  # 0 counted + 2 leased = budget
    assert f.count(f.member(one)) == 1
    f.finish(f.member(two), "failed:HttpError")  # a failed page frees its budget slot
    three = f.pop()
    assert three.url == "http://x.test/2"
    assert f.count(f.member(three)) == 2
    assert f.pop() is None and f.last["blocked"] and f.last["dp"] == 2


def test_state_lists_queued_links_in_order(redis_server):
    f = _frontier(redis_server, "bestfirst")
    for link in _links(20, 2):
        f.push(link)
    memory = make_frontier("bestfirst")
    memory.load_state(f.state())
    g = _frontier(redis_server, "bestfirst", crawl="copy")
    g.load_state(f.state())
    assert [memory.pop().url for _ in range(20)] == [g.pop().url for _ in range(20)] == \
        [f.pop().url for _ in range(20)]


def test_request_json_round_trip():
    req = Request("http://例子.test/a?q=台风", method="POST", body="体=1".encode("gbk"),
                  headers={"X-Raw": b"\xff\xfe", "Accept": "text/html"},
                  meta={"topiccrawl": {"score": 0.5, "depth": 2, "anchor": "台风"}}, priority=3)
    data = json.loads(json.dumps(encode(req, None)))
    back = decode(data, None)
    assert (back.url, back.method, back.body, back.meta, back.priority) == (req.url, req.method, req.body, req.meta, 3)
    assert back.headers.getlist("X-Raw") == [b"\xff\xfe"]
    with pytest.raises(TypeError, match="cannot be stored in Redis as JSON"):
        encode(Request("http://a.test/", meta={"obj": object()}), None)


def test_shared_link_graph_gives_every_worker_the_whole_graph(redis_server):
    key = crawl_keys("g")["graph"]
    a, b = SharedLinkGraph(redis_server.client(), key), SharedLinkGraph(redis_server.client(), key)
    whole = LinkGraph()
    pages = [(f"http://p{i}.test/", [f"http://p{(i * 7 + j) % 30}.test/" for j in range(4)]) for i in range(30)]
    for i, (url, out) in enumerate(pages):
        (a if i % 3 else b).add_page(url, out)
        whole.add_page(url, out)
    b.add_page("http://p0.test/", [])  # b catches up on a's pages on its next page
    late = SharedLinkGraph(redis_server.client(), key)  # a restarted worker replays the list
    for g in (b, late):
        assert (g.n_pages, g.n_edges) == (whole.n_pages, whole.n_edges)
        assert g.pagerank() == pytest.approx(whole.pagerank())


def test_shared_dupefilter_and_fingerprints(redis_server):
    from scrapy.utils.test import get_crawler

    from topiccrawl.redis.dupefilter import RedisDupeFilter

    fp = get_crawler().request_fingerprinter
    key = crawl_keys("d")["dupefilter"]
    one, two = RedisDupeFilter(redis_server.client(), key, fp), RedisDupeFilter(redis_server.client(), key, fp)
    assert not one.request_seen(Request("http://a.test/x"))
    assert two.request_seen(Request("http://a.test/x"))
    assert not two.request_seen(Request("http://a.test/y"))


def test_password_url_and_one_line_errors(redis_server_auth):
    url = redis_server_auth.url
    assert connect(url).ping()
    wrong = url.replace(PASSWORD, "wrong-pw")
    with pytest.raises(RedisStoreError) as exc:
        connect(wrong)
    msg = str(exc.value)
    assert "\n" not in msg and "wrong-pw" not in msg and "***" in msg and "password" in msg
    with pytest.raises(RedisStoreError, match="Authentication required|NOAUTH|password"):
        connect(url.replace(f":{PASSWORD}@", ""))
    with pytest.raises(RedisStoreError, match="cannot reach Redis"):
        connect(f"redis://127.0.0.1:{free_port()}/0", timeout=2)
    with pytest.raises(RedisStoreError, match="redis://"):
        connect("http://127.0.0.1:6379/0")
    # a database that is not a number: redis-py would use database 0 without a word
    with pytest.raises(RedisStoreError, match="the database after the port must be a number") as exc:
        connect(url.replace("/0", "/crawls"))
    assert PASSWORD not in str(exc.value)
    # a malformed URL is said to be one, not "cannot reach"
    for bad in (f"redis://:{PASSWORD}@127.0.0.1:port/0", "redis://[::1/0", f"{url}?socket_timeout=abc",
                f"{url}?ssl_cert_reqs=none"):
        with pytest.raises(RedisStoreError, match=r"is not a valid URL: ") as exc:
            connect(bad)
        assert PASSWORD not in str(exc.value) and "\n" not in str(exc.value)


def test_config_takes_every_strategy_on_redis(redis_server):
    from topiccrawl.strategies.base import STRATEGIES as MEMORY
    REDIS = [name for name, strategy in MEMORY.items() if strategy.redis]

    settings = Settings({"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url})
    # a new strategy must come with its Redis store, or be refused with one line: only the
    # benchmark bound that reads the offline web's whole link graph has none
    assert set(MEMORY) - set(REDIS) == {"oracle-path"}
    with pytest.raises(ConfigError, match="TOPICCRAWL_STORE=redis supports the strategies .* not 'oracle-path'") as exc:
        TopicCrawlConfig.from_settings(settings, {"strategy": "oracle-path"})
    assert "\n" not in str(exc.value)
    assert TopicCrawlConfig.from_settings(settings, {"strategy": "learned"}).strategy == "learned"
    assert TopicCrawlConfig.from_settings(settings, {"strategy": "bfs"}).store == "redis"
    assert TopicCrawlConfig.from_settings(settings, {"strategy": "fcsa-host"}).strategy == "fcsa-host"
    assert TopicCrawlConfig.from_settings(settings, {"strategy": "sitefinder"}).strategy == "sitefinder"
    with pytest.raises(ConfigError, match="expected memory or redis"):
        TopicCrawlConfig.from_settings(Settings({"TOPICCRAWL_STORE": "disk"}))
