"""The shared WL sampler and the shared UCB1 bandit against a real redis-server: equality with
the memory implementations, invariants under concurrent workers, and a 2-worker `scrapy crawl wl`."""

from __future__ import annotations

import math
import random
import threading
from collections import Counter

import pytest

from redis_fixture import redis_server  # noqa: F401
from test_redis_crawl import _ledger, _start, _stats, _urls, _wait, lab  # noqa: F401
from topiccrawl.crawl.settings import ConfigError
from topiccrawl.discovery.bandit import UCB1Bandit
from topiccrawl.discovery.pages import DWDBRMError
from topiccrawl.redis import crawl_keys
from topiccrawl.redis.bandit import RedisBandit
from topiccrawl.redis.wanglandau import RedisWLFrontier
from topiccrawl.strategies.simple import FrontierError, Link
from topiccrawl.strategies.wanglandau import WangLandauFrontier


class Uniforms(random.Random):
    """The memory WL's RNG drawing as the Redis script does: the roulette takes floor(u·total) of
    the next uniform, the acceptance the uniform after it (same Mersenne Twister stream)."""

    def randrange(self, n: int) -> int:
        return min(int(self.random() * n), n - 1)


def _link(i: int, rng: random.Random, domains: int = 9) -> Link:
    score = rng.choice([0.0, 1.0, 0.5, 0.2, 1.5, rng.random() ** 3]) if rng.random() < 0.3 else rng.random()
    return Link(f"http://d{i % domains}.test/{i}", score, domain=f"d{i % domains}.test", potential=i % 11 == 0,
                payload={"i": i})


def _frontier(server, crawl="c", **kw) -> RedisWLFrontier:
    return RedisWLFrontier(server.client(), crawl_keys(crawl), **kw)


def check_structures(f: RedisWLFrontier) -> dict:
    """Every incremental WL queue structure equals its recomputation from the links; returns the
    queued members per domain."""
    r, k = f.r, f.wl_keys
    info = {m: tuple(map(int, v.split("|"))) for m, v in r.hgetall(k["link"]).items()}
    queued = set(r.zrange(f.keys["requests"], 0, -1))
    assert queued <= set(info)
    slot, pos, tree = r.hgetall(k["slot"]), r.hgetall(k["pos"]), r.hgetall(k["tree"])
    dsum, dcount = r.hgetall(k["dsum"]), r.hgetall(k["dcount"])
    dmean = dict(r.zrange(k["dmean"], 0, -1, withscores=True))
    by_domain: dict[int, list[str]] = {}
    for d in sorted({info[m][0] for m in queued}):
        n = int(dcount[str(d)])
        members = [slot[f"{d}:{p}"] for p in range(n)]
        assert sorted(members) == sorted(m for m in queued if info[m][0] == d)
        assert all(int(pos[m]) == p for p, m in enumerate(members))
        w = [info[m][1] for m in members]
        assert int(dsum[str(d)]) == sum(w)
        for i in range(1, n + 1):  # Fenwick node i holds the weights of slots (i - lowbit(i), i]
            assert int(tree[f"{d}:{i}"]) == sum(w[i - (i & -i):i])
        assert dmean[f"{d:010d}"] == (n - sum(w)) / n  # the domain-mean ZSET is (n − Σw)/n
        by_domain[d] = members
    assert len(slot) == len(pos) == len(queued) == sum(map(len, by_domain.values()))
    assert len(tree) == len(queued) and set(dmean) == {f"{d:010d}" for d in by_domain}
    per_bin = Counter(info[m][2] for m in queued)
    assert {int(b): int(v) for b, v in r.hgetall(k["queued"]).items() if int(v)} == dict(per_bin)
    return by_domain


def _run_threads(worker, n: int, errors: list) -> None:
    """Run ``worker(0..n-1)`` in n threads at once; exceptions they collected fail the test."""
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors


def hammer(make, n: int, rounds: int, new_link, on_count=None) -> tuple[Counter, Counter, set]:
    """n workers (threads) on one shared Redis frontier, ``make(w, lease_seconds)`` each: per round
    a worker pushes 1–3 links (``new_link(i, rng)``), pops one and counts it (70 %, then
    ``on_count(f, link)``), releases it (15 %) or ends it failed (15 %). The last worker never
    settles, so its leases (0.05 s) expire back to the others. Returns the pops and releases per
    member and the members the slow worker leased."""
    pops: list[Counter] = []
    released: list[Counter] = []
    leased_by_slow: set[str] = set()
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def worker(w: int) -> None:
        try:
            slow = w == n - 1  # never settles: its leases expire and the others get them back
            f = make(w, 0.05 if slow else 60)
            rng, mine, back = random.Random(w), Counter(), Counter()
            pops.append(mine)
            released.append(back)
            start.wait()
            for i in range(rounds):
                for j in range(rng.randrange(1, 4)):
                    f.push(new_link(w * 10_000 + i * 10 + j, rng))
                link = f.pop()
                if link is None:
                    continue
                m = f.member(link)
                mine[m] += 1
                if slow:
                    leased_by_slow.add(m)
                    continue
                x = rng.random()
                if x < 0.7:
                    assert f.count(m) >= 1
                    if on_count is not None:
                        on_count(f, link)
                elif x < 0.85:
                    assert f.release([m]) == 1
                    back[m] += 1
                else:
                    assert f.finish(m, "failed:Test") >= 0
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    _run_threads(worker, n, errors)
    return sum(pops, Counter()), sum(released, Counter()), leased_by_slow


@pytest.mark.parametrize("options", [
    {},
    {"stage_steps": 7, "visited": "stage"},
    {"stage_steps": 5, "visited": "nonempty", "stage_rule": "flat"},
    {"stage_steps": 3, "stage_rule": "zhou-bhatt", "max_rejections": 2, "lnf_floor": 0.1},
    {"stage_steps": 4, "stage_rule": "one-over-t", "visited": "stage", "link_threshold": 0.3},
    {"max_steps": 50, "lnf0": 0.7},
])
def test_same_decisions_as_the_memory_wl(redis_server, options):
    memory = WangLandauFrontier(**options)
    memory._rng = Uniforms(7)  # the memory sampler's RNG, drawing as documented above
    shared = _frontier(redis_server, rng=random.Random(7), **options)
    rng = random.Random(4)
    links, popped_m, popped_r, leased = {}, [], [], []
    for i in range(700):
        a, b = _link(i, random.Random(i)), _link(i, random.Random(i))
        memory.push(a)
        if shared.push(b) is not None:
            assert a.seq == b.seq
            links[b.url] = b
        if rng.random() < 0.45 and len(memory):
            popped_m.append(memory.pop().url)
            popped_r.append(shared.pop().url)
            leased.append(popped_r[-1])
            assert popped_m[-1] == popped_r[-1], f"decision {len(popped_m)} differs"
        if rng.random() < 0.05 and leased:  # a released lease goes back to the queue like a push
            url = leased.pop(rng.randrange(len(leased)))
            assert shared.release([shared.member(links[url])]) == 1
            x = links[url]
            memory.push(Link(url, x.score, domain=x.domain, potential=x.potential, seq=x.seq))
    check_structures(shared)
    while len(memory):
        popped_m.append(memory.pop().url)
        popped_r.append(shared.pop().url)
    assert shared.pop() is None and len(shared) == 0
    assert popped_r == popped_m
    assert shared.stats() == memory.stats() and shared.ln_g() == memory.ln_g()
    assert shared.stats()["wl/steps"] > 0


def test_unsupported_and_conflicting_options_are_one_line_errors(redis_server):
    with pytest.raises(ConfigError, match="TOPICCRAWL_WL_PROPOSAL='uniform' is not supported") as exc:
        _frontier(redis_server, proposal="uniform")
    assert "\n" not in str(exc.value)
    with pytest.raises(FrontierError, match="TOPICCRAWL_WL_STAGE_RULE"):
        RedisWLFrontier.from_options(redis_server.client(), crawl_keys("c"), {"wl_stage_rule": "hot"})
    first = RedisWLFrontier.from_options(redis_server.client(), crawl_keys("c"), {"wl_stage_steps": "50"})
    assert first.options["stage_steps"] == 50
    with pytest.raises(ConfigError, match="runs with options") as exc:
        _frontier(redis_server, stage_steps=60)
    assert "\n" not in str(exc.value)


def test_link_threshold_drops_and_counts(redis_server):
    f = _frontier(redis_server, link_threshold=0.4)
    assert f.push(Link("http://a.test/1", 0.1, domain="a.test")) is None
    assert f.push(Link("http://a.test/2", 0.1, domain="a.test", potential=True)) is not None
    assert f.push(Link("http://a.test/3", 0.9, domain="a.test")) is not None
    assert len(f) == 2 and f.stats()["wl/dropped"] == 1
    assert f.pop().url == "http://a.test/3" and f.last["kind"] == "start"


def _sampler_invariants(f: RedisWLFrontier, lnf0: float) -> dict:
    """The WL bookkeeping identities (docs/wl.md, "WL on Redis")."""
    s = f.sampler()
    st = {k: int(v) for k, v in s["state"].items() if k not in ("lnf", "options")}
    lnf = float(s["state"]["lnf"])
    stages = s["stages"]
    # every ln g update is one step: accepted, rejected and forced proposals
    assert st["accepted"] + st["rejected"] + st["forced"] == st["steps"]
    # H counts the steps of this stage plus each bin's first visit (g = 1, H = 1) in this stage
    last_steps, last_seen = (stages[-1][0], stages[-1][1]) if stages else (0, 0)
    assert sum(s["hist"].values()) == (st["steps"] - last_steps) + (len(s["lng"]) - last_seen)
    # ln f halves at every stage and each step added the ln f in force: Σ ln g is exact
    assert len(stages) == st["stage"] and lnf == lnf0 / 2 ** st["stage"]
    bounds = [0, *(L for L, _, _ in stages), st["steps"]]
    used = [lnf0 / 2 ** i for i in range(len(stages) + 1)]
    assert [x for _, _, x in stages] == used[:-1]
    assert sum(s["lng"].values()) == sum(x * (b - a) for x, a, b in zip(used, bounds, bounds[1:]))
    assert all((g * 2 ** st["stage"] / lnf0).is_integer() for g in s["lng"].values())
    # every decision fetches one link: the start, an accepted proposal or a forced move
    assert sum(s["fetches"].values()) == st["accepted"] + st["forced"] + 1
    return st


def test_concurrent_workers_keep_the_sampler_and_queue_consistent(redis_server):
    keys = crawl_keys("hammer")
    options = {"stage_steps": 25, "visited": "stage", "lnf0": 1.0}
    total, back, leased_by_slow = hammer(
        lambda w, lease: RedisWLFrontier(redis_server.client(), keys, seed=w, worker=f"w{w}", lease_seconds=lease,
                                         **options),
        6, 160, lambda i, rng: _link(i, rng, domains=13))
    f = RedisWLFrontier(redis_server.client(), keys, worker="check", **options)
    status = f.status()  # returns the slow worker's expired leases to the queue
    st = _sampler_invariants(f, 1.0)
    assert st["stage"] >= 2 and st["rejected"] > 0
    by_domain = check_structures(f)
    assert len(by_domain) > 1
    # no link popped twice: only a released or expired lease comes back
    assert all(n <= 1 + back[m] for m, n in total.items() if m not in leased_by_slow)
    assert sum(total.values()) == st["accepted"] + st["forced"] + 1
    ledger = _ledger_of(f)
    assert sum(total.values()) == len(ledger["done"]) + ledger["stats"].get("released", 0) + \
        ledger["stats"].get("lease_expired", 0) + status["leased"]
    assert ledger["stats"].get("released", 0) == sum(back.values())
    # every accepted link is in exactly one of queue, leases, done
    parts = [ledger["queued"], ledger["leased"], set(ledger["done"])]
    assert sum(map(len, parts)) == len(set().union(*parts)) == ledger["accepted"]
    print(f"6 workers: {sum(total.values())} decisions, {st}, {ledger['stats']}")


def _ledger_of(f: RedisWLFrontier) -> dict:
    k = f.keys
    r = f.r
    return {"accepted": int(r.get(k["requests:seq"]) or 0), "queued": set(r.zrange(k["requests"], 0, -1)),
            "leased": set(r.zrange(k["leases"], 0, -1)), "done": r.hgetall(k["done"]),
            "stats": {a: int(b) for a, b in r.hgetall(k["stats"]).items()}}


# -- the shared bandit ----------------------------------------------------------------------------

def test_bandit_choice_equals_memory_on_the_same_statistics(redis_server):
    shared = RedisBandit(redis_server.client(), "topiccrawl:b:")
    memory = UCB1Bandit()
    assert shared.select() == memory.select() == "KS"  # nothing played: +inf, first listed
    plays = [("KS", 0.25), ("RS", 0.1), ("FC", 0.7), ("BC", 0.0), ("FC", 0.3), ("KS", 1 / 3), ("BC", 0.9),
             ("RS", 0.1), ("RS", 0.6)]
    for op, reward in plays:
        rec_s = shared.update(op, reward, ["http://s.test/"], ["http://n.test/"])
        rec_m = memory.update(op, reward, ["http://s.test/"], ["http://n.test/"])
        assert rec_s == rec_m
        assert shared.scores() == memory.scores() and shared.select() == memory.select()
    assert shared.plays == memory.plays and shared.totals == memory.totals and shared.n == len(plays)
    assert UCB1Bandit.from_state(shared.state()).state() == memory.state()
    shared.drop("FC", "gone")
    memory.drop("FC", "gone")
    assert shared.select() == memory.select() and shared.active == memory.active
    with pytest.raises(DWDBRMError, match="was dropped"):
        shared.update("FC", 0.1)
    with pytest.raises(DWDBRMError, match="finite"):
        shared.update("KS", math.nan)
    with pytest.raises(DWDBRMError, match="unknown operator"):
        shared.update("XX", 0.1)
    with pytest.raises(ConfigError, match="has operators"):
        RedisBandit(redis_server.client(), "topiccrawl:b:", ["KS", "FC"])


def test_concurrent_bandit_updates_lose_nothing(redis_server):
    applied: list[list[tuple[str, float]]] = []
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            b = RedisBandit(redis_server.client(), "topiccrawl:cb:")
            rng, mine = random.Random(w), []
            applied.append(mine)
            for _ in range(150):
                op = b.select() if rng.random() < 0.5 else rng.choice(b.operators)
                reward = rng.randrange(1025) / 1024  # dyadic: every order of additions is exact
                b.update(op, reward)
                mine.append((op, reward))
        except BaseException as exc:
            errors.append(exc)

    _run_threads(worker, 5, errors)
    shared = RedisBandit(redis_server.client(), "topiccrawl:cb:")
    flat = [x for mine in applied for x in mine]
    assert sum(shared.plays.values()) == shared.n == len(flat) == 750
    assert shared.plays == dict(Counter(op for op, _ in flat))
    assert shared.totals == {op: sum(r for o, r in flat if o == op) for op in shared.operators}
    # the log, replayed in order by the memory bandit, gives every record's scores and the totals
    memory = UCB1Bandit()
    log = shared.log
    assert [r.iteration for r in log] == list(range(1, 751))
    for rec in log:
        assert rec.scores == memory.scores()
        memory.update(rec.operator, rec.reward)
    assert memory.plays == shared.plays and memory.totals == shared.totals
    assert memory.select() == shared.select()


# -- end to end -----------------------------------------------------------------------------------

def test_two_wl_workers_share_one_sampler(tmp_path, redis_server, lab):
    paper = {"TOPICCRAWL_LINK_THRESHOLD": "0.2", "TOPICCRAWL_ANCHOR_WEIGHT": "0.3"}  # the wl spider's settings
    workers = [_start(tmp_path, f"w{i}", redis_server.url, lab.proxy_url, strategy="wl", budget=120,
                      CONCURRENT_REQUESTS=4, **paper) for i in range(2)]
    _wait(workers)
    urls = [u for w in workers for u in _urls(w.out)]
    assert len(urls) == len(set(urls)) == 120, "a page was fetched twice or the budget missed"
    client = redis_server.client()
    assert client.hget(crawl_keys("e2e")["meta"], "strategy") == "wl"
    ledger = _ledger(client)
    assert ledger["stats"]["dp"] == 120 and not ledger["leased"]
    f = RedisWLFrontier(client, crawl_keys("e2e"), worker="check")
    st = _sampler_invariants(f, 1.0)
    check_structures(f)
    for w in workers:  # no decision after the budget: both report the final, global sampler
        stats = _stats(w.out)
        assert stats["finish_reason"] == "topiccrawl_max_pages"
        assert all(stats[f"topiccrawl/wl/{key}"] == st[key] for key in ("steps", "accepted", "rejected", "forced"))
        assert stats["topiccrawl/wl/lnf"] == f.stats()["wl/lnf"] and stats["topiccrawl/wl/visited_bins"] > 1
    print(f"2 wl workers, 120 pages: {[len(_urls(w.out)) for w in workers]} pages each, sampler {st}")
