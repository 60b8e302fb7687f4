"""The site finder's shared task list (topiccrawl.redis.sites) against a real redis-server:
each task once, leases that expire back to the head of the list, verdicts written once."""

from __future__ import annotations

import json
import time

from redis_fixture import redis_server  # noqa: F401
from topiccrawl.redis.sites import RedisSiteTasks, site_keys

PREFIX = "topiccrawl:t:"
QUERY = {"text": "网上书店", "weight": 1.0}


def _tasks(server, worker: str, lease: float = 30.0) -> RedisSiteTasks:
    return RedisSiteTasks(server.client(), PREFIX, worker=worker, lease_seconds=lease)


def test_offers_are_once_per_crawl_and_queries_accumulate(redis_server):
    a, b = _tasks(redis_server, "a"), _tasks(redis_server, "b")
    assert a.offer_search("local", QUERY, 1) and not b.offer_search("local", QUERY, 1)
    assert b.offer_search("local", QUERY, 2)
    assert a.offer_site("shop.example.cn", "http://shop.example.cn/", "网上书店")
    assert not b.offer_site("shop.example.cn", "http://shop.example.cn/x.html", "图书 折扣")
    assert not a.offer_site("shop.example.cn", "http://shop.example.cn/", "网上书店")  # the same query once
    assert a.found_by("shop.example.cn") == ["网上书店", "图书 折扣"]
    assert a.candidates() == {"shop.example.cn": {"entry": "http://shop.example.cn/",
                                                  "found_by": ["网上书店", "图书 折扣"]}}
    claimed = [json.loads(b.claim()[0]) for _ in range(3)]
    assert [t["kind"] for t in claimed] == ["search", "search", "site"]  # FIFO
    assert [t.get("pageno") for t in claimed[:2]] == [1, 2] and claimed[2]["entry"] == "http://shop.example.cn/"
    assert b.claim() == (None, 0) and a.status() == {"waiting": 0, "leased": 3, "reclaimed": 0, "results": 0}


def test_an_expired_lease_goes_back_first_and_its_verdict_counts_once(redis_server):
    a, b = _tasks(redis_server, "a", lease=1.0), _tasks(redis_server, "b", lease=30)
    a.offer_site("one.cn", "http://one.cn/")
    a.offer_site("two.cn", "http://two.cn/")
    member, _ = a.claim()
    assert json.loads(member)["site"] == "one.cn"
    time.sleep(0.3)
    assert a.renew([member]) == 1  # renewed: a's until 1.3 s
    time.sleep(0.3)
    assert b.renew([member]) == 0  # not b's to renew
    time.sleep(1.2)  # a died: no renewal
    again, reclaimed = b.claim()
    assert again == member and reclaimed == 1  # back at the head of the list, before two.cn
    assert b.done(member, "one.cn", {"site": "one.cn", "verdict": "relevant"})
    assert not a.done(member, "one.cn", {"site": "one.cn", "verdict": "irrelevant"})  # a came back late
    assert b.results() == {"one.cn": {"site": "one.cn", "verdict": "relevant"}}
    assert b.counters() == {"sites": 2, "reclaimed": 1, "duplicate_verdicts": 1}
    assert b.status() == {"waiting": 1, "leased": 0, "reclaimed": 0, "results": 1}


def test_release_gives_only_own_unfinished_tasks_back(redis_server):
    a, b = _tasks(redis_server, "a"), _tasks(redis_server, "b")
    for i in range(3):
        a.offer_site(f"s{i}.cn", f"http://s{i}.cn/")
    mine = [a.claim()[0], a.claim()[0]]
    theirs = b.claim()[0]
    assert a.done(mine[0], "s0.cn", {"site": "s0.cn"})
    assert a.release([*mine, theirs]) == 1  # s0 is done, s2 is b's
    assert json.loads(b.claim()[0])["site"] == "s1.cn"
    r = redis_server.client()
    k = site_keys(PREFIX)
    assert r.zcard(k["sites:leases"]) == 2 and r.hget(k["sites:owner"], theirs) == "b"


def test_a_late_done_also_takes_the_requeued_task_off_the_list(redis_server):
    a, b = _tasks(redis_server, "a", lease=0.2), _tasks(redis_server, "b")
    a.offer_site("slow.cn", "http://slow.cn/")
    member, _ = a.claim()
    time.sleep(0.4)
    assert a.status()["waiting"] == 1  # expired: back in the list
    assert a.done(member, "slow.cn", {"site": "slow.cn", "verdict": "irrelevant"})  # a finished after all
    assert b.claim() == (None, 0)  # nobody verifies it again
    assert b.status() == {"waiting": 0, "leased": 0, "reclaimed": 0, "results": 1}


def test_a_candidate_whose_task_ended_without_a_verdict_is_offered_again_once(redis_server):
    a, b = _tasks(redis_server, "a"), _tasks(redis_server, "b")
    a.offer_site("kept.cn", "http://kept.cn/")
    a.offer_site("lost.cn", "http://lost.cn/")
    kept, lost = a.claim()[0], a.claim()[0]
    assert json.loads(lost)["site"] == "lost.cn"
    assert b.sweep() == []  # two leases: nothing is swept while any task is held
    assert a.done(kept, "kept.cn", {"site": "kept.cn", "verdict": "relevant"})
    assert a.done(lost)  # ended as a search task would be: no verdict
    assert a.status()["waiting"] == 0 and a.status()["leased"] == 0
    assert b.sweep() == ["lost.cn"]  # the decided site stays decided
    again, _ = b.claim()
    assert json.loads(again)["site"] == "lost.cn" and json.loads(again)["entry"] == "http://lost.cn/"
    assert b.sweep() == []  # leased again
    b.done(again)  # lost a second time: not offered a third time (no endless loop)
    assert b.sweep() == [] and b.status()["waiting"] == 0
    assert b.counters()["swept"] == 1 and set(b.candidates()) == {"kept.cn", "lost.cn"}


def test_an_alias_host_counts_for_its_site(redis_server):
    a = _tasks(redis_server, "a")
    a.offer_site("x.cn", "http://x.cn/", "q1")
    a.offer_site("www.y.cn", "http://www.y.cn/", "q2")  # offered before anyone knew it is y.cn's
    a.offer_site("y.cn", "http://y.cn/", "q3")
    a.add_alias("www.x.cn", "x.cn")  # x.cn's pages redirected to www.x.cn
    assert not a.offer_site("www.x.cn", "http://www.x.cn/", "q4")  # no candidate of its own
    assert a.found_by("x.cn") == ["q1", "q4"] and "www.x.cn" not in a.candidates()
    first = a.claim()[0]
    second = a.claim()[0]
    assert json.loads(second)["site"] == "www.y.cn"
    a.add_alias("www.y.cn", "y.cn")
    a.merge(second, "www.y.cn", "y.cn")  # found out at claim time: its queries go to y.cn
    assert set(a.candidates()) == {"x.cn", "y.cn"} and a.found_by("y.cn") == ["q3", "q2"]
    assert a.status()["leased"] == 1 and a.counters()["aliases_merged"] == 1
    assert json.loads(first)["site"] == "x.cn"


def test_a_sites_search_hits_are_kept_in_order_for_the_worker_that_claims_it(redis_server):
    from topiccrawl.redis.sites import MAX_HITS

    a, b = _tasks(redis_server, "a"), _tasks(redis_server, "b")
    a.add_hit("hits.example.cn", "http://hits.example.cn/a.html")
    assert a.offer_site("hits.example.cn", "http://hits.example.cn/", "q1")
    b.add_hit("hits.example.cn", "http://hits.example.cn/b.html")  # another worker's search, same site
    member, _ = b.claim()
    assert json.loads(member)["site"] == "hits.example.cn"
    assert b.hits("hits.example.cn") == ["http://hits.example.cn/a.html", "http://hits.example.cn/b.html"]
    for i in range(MAX_HITS + 5):
        a.add_hit("hits.example.cn", f"http://hits.example.cn/{i}.html")
    assert len(b.hits("hits.example.cn")) == MAX_HITS  # the first ones are kept
    assert b.hits("other.example.cn") == []
