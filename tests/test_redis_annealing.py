"""The shared annealing chains (``sa``, ``fcsa-host``) against a real redis-server: the memory
strategies' decisions with the same uniforms, the cooling, the shared host memory, the budget gate,
and the queue / lease / host-structure invariants under concurrent workers."""

from __future__ import annotations

import random

import pytest

from redis_fixture import redis_server  # noqa: F401
from test_redis_crawl import _ledger, _start, _stats, _urls, _wait, lab  # noqa: F401
from test_redis_wl import hammer
from topiccrawl.crawl.settings import ConfigError
from topiccrawl.redis import crawl_keys
from topiccrawl.redis.annealing import RedisFCSAHostFrontier, RedisSAFrontier, make_redis_frontier
from topiccrawl.redis.frontier import RedisFrontier
from topiccrawl.redis.wanglandau import RedisWLFrontier
from topiccrawl.strategies.annealing import FCSAHostFrontier, SAFrontier
from topiccrawl.strategies.simple import FrontierError, Link
from topiccrawl.strategies.wanglandau import clip01


class Uniforms(random.Random):
    """The memory SA's RNG drawing as the Redis script does: r = floor(u·min(k, n)) of the next
    uniform, the acceptance test the uniform after it (only when Δ > 0)."""

    def randrange(self, n: int) -> int:
        return min(int(self.random() * n), n - 1)


def _link(i: int, hosts: int = 7) -> Link:
    """Scores with exact ties, values outside [0, 1] (clipped) and near-ties."""
    rng = random.Random(i)
    x = rng.random()
    score = rng.choice([0.0, 1.0, -0.3, 1.7, 0.5]) if x < 0.2 else round(rng.random(), 2 if x < 0.6 else 15)
    h = rng.randrange(hosts)
    return Link(f"http://h{h}.test/{i}", score, depth=i % 4, domain=f"h{h}.test", payload={"i": i})


def _sa(server, crawl="c", cls=RedisSAFrontier, **kw):
    return cls(server.client(), crawl_keys(crawl), **kw)


def check_hosts(f: RedisFCSAHostFrontier) -> None:
    """Every fcsa-host structure equals its recomputation from the queued links and host memory."""
    r, k = f.r, f.sa_keys
    queued = r.zrange(f.keys["requests"], 0, -1)
    data = dict(zip(queued, r.hmget(f.keys["requests:data"], queued))) if queued else {}
    link = r.hgetall(k["link"])
    assert set(queued) <= set(link)
    per_host: dict[str, list[str]] = {}
    for m in queued:
        per_host.setdefault(link[m], []).append(m)
    assert sorted(r.zrange(k["hlinks"], 0, -1)) == sorted(f"{h} {m}" for h, ms in per_host.items() for m in ms)
    expect = {}
    for h, ms in per_host.items():
        best = min(ms)  # members order as (−R, seq)
        score = clip01(f._link(best, data[best]).score)
        w = f.host_weight
        p = (1.0 - w) * score + w * f.host_quality(h) if w else score
        expect[f"{best[-12:]} {h}"] = -p
    assert dict(r.zrange(k["hosts"], 0, -1, withscores=True)) == expect
    assert r.hgetall(k["hbest"]) == {key.split(" ", 1)[1]: key for key in expect}


def _mirror(memory, shared, seed: int, steps: int = 600) -> list[str]:
    """Push, pop, release and (fcsa-host) feed back the same way into both; every decision must
    agree, and the temperature after it. Returns the pops."""
    rng = random.Random(seed)
    fcsa = isinstance(memory, FCSAHostFrontier)
    i, leased, popped = 0, [], []
    for _ in range(steps):
        for _ in range(rng.randrange(4)):
            a, b = _link(i), _link(i)
            i += 1
            memory.push(a)
            shared.push(b)
            assert a.seq == b.seq
        if rng.random() < 0.6 and len(memory):
            a, b = memory.pop(), shared.pop()
            assert (a.url, a.seq, a.payload) == (b.url, b.seq, b.payload), f"decision {len(popped) + 1} differs"
            assert shared.temperature == memory.temperature and shared.last["queued"] == len(memory)
            popped.append(b.url)
            leased.append(b)
            if fcsa:
                relevance, beta = rng.random(), rng.choice([None, 0.5])
                memory.feedback(a.url, a.domain, relevance, beta)
                shared.feedback(b.url, b.domain, relevance, beta)
        if rng.random() < 0.05 and leased:  # a released lease goes back to the queue like a push
            x = leased.pop(rng.randrange(len(leased)))
            assert shared.release([shared.member(x)]) == 1
            memory.push(Link(x.url, x.score, x.depth, x.domain, payload=x.payload, seq=x.seq))
    if fcsa:
        check_hosts(shared)
    while len(memory):
        a, b = memory.pop(), shared.pop()
        assert (a.url, a.seq) == (b.url, b.seq)
        popped.append(b.url)
    assert shared.pop() is None and len(shared) == 0
    assert shared.stats() == memory.stats()
    return popped


@pytest.mark.parametrize("options", [
    {"t0": 0.3, "alpha": 0.99, "tmin": 0.01, "top_k": 5},
    {"t0": 10.0, "alpha": 1.0, "tmin": 10.0},  # hot: explores the top 16 throughout
    {"t0": 1e-9, "tmin": 1e-9},  # cold: best-first (a tie still takes the candidate)
    {"t0": 0.5, "top_k": 1},  # k = 1: always the best link, no acceptance uniform
])
def test_same_decisions_as_the_memory_sa(redis_server, options):
    memory = SAFrontier(**options)
    memory._rng = Uniforms(7)
    shared = _sa(redis_server, rng=random.Random(7), **options)
    _mirror(memory, shared, seed=3)
    worse = shared.stats()["sa/accepted_worse"]
    assert (worse > 50) if options["t0"] >= 0.3 and options.get("top_k", 16) > 1 else worse == 0


@pytest.mark.parametrize("options", [
    {"t0": 0.2, "alpha": 0.995, "host_weight": 0.3},
    {"t0": 1e-9, "tmin": 1e-9, "host_weight": 0.7, "host_prior": 0.2, "host_strength": 5.0},
    {"t0": 0.2, "host_weight": 0.0},  # w = 0: sa over the host structures
])
def test_same_decisions_as_the_memory_fcsa_host(redis_server, options):
    memory = FCSAHostFrontier(**options)
    memory._rng = Uniforms(11)
    shared = _sa(redis_server, cls=RedisFCSAHostFrontier, rng=random.Random(11), **options)
    _mirror(memory, shared, seed=5)
    assert shared.stats()["sa/hosts_with_feedback"] == 7
    for h in range(7):
        assert shared.host_quality(f"h{h}.test") == memory.host_quality(f"h{h}.test")


def test_host_memory_is_shared_between_workers(redis_server):
    """One worker's feedback re-ranks the links another worker pops (docs/wl.md, fcsa-host)."""
    cold = {"t0": 1e-9, "tmin": 1e-9, "host_weight": 0.3}
    a = _sa(redis_server, cls=RedisFCSAHostFrontier, worker="a", **cold)
    b = _sa(redis_server, cls=RedisFCSAHostFrontier, worker="b", **cold)
    for url, score, host in [("a1", 0.52, "a.test"), ("a2", 0.50, "a.test"), ("b1", 0.48, "b.test"),
                             ("c1", 0.49, "c.test")]:
        a.push(Link(url, score, domain=host))
    for i in range(6):
        a.feedback(f"http://a.test/{i}", "a.test", 0.05, beta=0.3)  # a.test yields nothing relevant
        a.feedback(f"http://b.test/{i}", "b.test", 0.7, beta=0.3)
    check_hosts(b)
    assert b.host_quality("b.test") == pytest.approx((6 + 2 * 0.5) / (6 + 2))
    assert [b.pop().url for _ in range(4)] == ["b1", "c1", "a1", "a2"]
    assert b.stats() == {"sa/temperature": 1e-9, "sa/decisions": 4, "sa/accepted_worse": 0,
                         "sa/hosts_with_feedback": 2}


def test_cooling_is_geometric_per_decision(redis_server):
    f = _sa(redis_server, t0=0.5, alpha=0.9, tmin=0.05)
    for i in range(60):
        f.push(_link(i))
    temps = []
    for _ in range(40):
        f.pop()
        temps.append(f.temperature)
    assert temps == pytest.approx([max(0.5 * 0.9 ** (i + 1), 0.05) for i in range(40)])
    assert f.stats()["sa/decisions"] == 40


def test_budget_gate(redis_server):
    f = _sa(redis_server, budget=3, worker="a")
    g = _sa(redis_server, budget=3, worker="b")
    for i in range(10):
        f.push(_link(i))
    got = [f.pop(), g.pop(), f.pop()]
    assert all(got) and len({x.url for x in got}) == 3
    t = f.temperature
    assert g.pop() is None and g.last["blocked"] and g.last["queued"] == 7
    kept = list(g._uniforms)
    assert f.temperature == t and len(kept) == 2  # no decision: the drawn uniforms wait
    assert f.count(f.member(got[0])) == 1
    assert f.pop() is None and f.last["blocked"]  # 1 counted + 2 leased = budget
    assert g.release([g.member(got[1])]) == 1
    nxt = g.pop()
    assert nxt is not None and not g.last["blocked"]
    assert list(g._uniforms)[: 2 - g.last["used"]] == kept[g.last["used"]:]  # it used the kept ones
    assert f.count(f.member(got[2])) == 2 and g.count(g.member(nxt)) == 3
    assert f.pop() is None and f.last == {"blocked": True, "dp": 3, "reclaimed": 0, "queued": 7}
    assert f.stats()["sa/decisions"] == 4


def test_options_factory_and_conflicts_are_one_line_errors(redis_server):
    client, keys = redis_server.client(), crawl_keys("f")
    lease = {"lease_seconds": 5.0, "budget": 0, "worker": "w"}
    f = make_redis_frontier(client, keys, "sa", {"sa_t0": "0.2", "sa_top_k": "4", "sa_seed": "3"}, **lease)
    assert type(f) is RedisSAFrontier and (f.name, f.t0, f.top_k, f.lease_seconds) == ("sa", 0.2, 4, 5.0)
    with pytest.raises(ConfigError, match="runs with options") as exc:
        make_redis_frontier(client, keys, "sa", {"sa_t0": "0.3"}, **lease)
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="the fcsa-host chain of this crawl runs with options"):
        make_redis_frontier(client, keys, "fcsa-host", {"sa_t0": "0.2", "sa_top_k": "4"}, **lease)
    g = make_redis_frontier(client, crawl_keys("g"), "fcsa-host", {"sa_host_weight": "0.4"}, **lease)
    assert type(g) is RedisFCSAHostFrontier and (g.name, g.host_weight, g.host_strength) == ("fcsa-host", 0.4, 2.0)
    with pytest.raises(FrontierError, match="TOPICCRAWL_SA_ALPHA"):
        make_redis_frontier(client, crawl_keys("h"), "sa", {"sa_alpha": "1.5"}, **lease)
    with pytest.raises(FrontierError, match="TOPICCRAWL_SA_HOST_WEIGHT"):
        make_redis_frontier(client, crawl_keys("h"), "fcsa-host", {"sa_host_weight": "2"}, **lease)
    assert type(make_redis_frontier(client, crawl_keys("w"), "wl", {}, **lease)) is RedisWLFrontier
    bf = make_redis_frontier(client, crawl_keys("b"), "bestfirst", {}, **lease)
    assert type(bf) is RedisFrontier and bf.name == "bestfirst"


@pytest.mark.parametrize("cls", [RedisSAFrontier, RedisFCSAHostFrontier])
def test_concurrent_workers_share_one_chain(redis_server, cls):
    keys = crawl_keys("hammer")
    options = {"t0": 0.3, "alpha": 0.99, "tmin": 0.01, "top_k": 6}

    def feedback(f, link):
        if cls is RedisFCSAHostFrontier:
            f.feedback(link.url, link.domain, link.score, beta=0.5)

    total, back, leased_by_slow = hammer(
        lambda w, lease: cls(redis_server.client(), keys, seed=w, worker=f"w{w}", lease_seconds=lease, **options),
        5, 150, lambda i, rng: _link(i, hosts=11), feedback)
    f = cls(redis_server.client(), keys, worker="check", **options)
    status = f.status()  # returns the slow worker's expired leases to the queue
    r, k = f.r, f.keys
    stats = {a: int(b) for a, b in r.hgetall(k["stats"]).items()}
    # no member handed out twice: only a released or expired lease comes back
    assert all(n <= 1 + back[m] for m, n in total.items() if m not in leased_by_slow)
    assert stats.get("released", 0) == sum(back.values())
    s = f.stats()
    assert s["sa/decisions"] == sum(total.values()) and s["sa/accepted_worse"] > 0
    t = options["t0"]
    for _ in range(s["sa/decisions"]):  # one cooling step per decision, whichever worker made it
        t = max(t * options["alpha"], options["tmin"])
    assert s["sa/temperature"] == t
    done = r.hgetall(k["done"])
    assert sum(total.values()) == len(done) + stats.get("released", 0) + stats.get("lease_expired", 0) + \
        status["leased"]
    # every accepted link is in exactly one of queue, leases, done
    parts = [set(r.zrange(k["requests"], 0, -1)), set(r.zrange(k["leases"], 0, -1)), set(done)]
    assert sum(map(len, parts)) == len(set().union(*parts)) == int(r.get(k["requests:seq"]))
    assert stats["dp"] == sum(v.startswith("counted|") for v in done.values())
    if cls is RedisFCSAHostFrontier:
        check_hosts(f)
        assert len(r.hgetall(f.sa_keys["link"])) == len(parts[0]) + len(parts[1])
        assert s["sa/hosts_with_feedback"] > 1


@pytest.mark.parametrize("strategy", ["sa", "fcsa-host"])
def test_two_annealing_workers_share_one_chain(tmp_path, redis_server, lab, strategy):
    """End to end: two ``scrapy crawl focused`` workers on one crawl id with strategy sa /
    fcsa-host fetch the budget once, and both report the one shared chain's statistics."""
    workers = [_start(tmp_path, f"w{i}", redis_server.url, lab.proxy_url, strategy=strategy, budget=120,
                      CONCURRENT_REQUESTS=4) for i in range(2)]
    _wait(workers)
    urls = [u for w in workers for u in _urls(w.out)]
    assert len(urls) == len(set(urls)) == 120, "a page was fetched twice or the budget missed"
    client = redis_server.client()
    assert client.hget(crawl_keys("e2e")["meta"], "strategy") == strategy
    ledger = _ledger(client)
    assert ledger["stats"]["dp"] == 120 and not ledger["leased"]
    shared = make_redis_frontier(client, crawl_keys("e2e"), strategy, {"strategy": strategy}, worker="check").stats()
    assert shared["sa/decisions"] >= 120 and shared["sa/temperature"] < 0.1  # cooled once per decision
    for w in workers:
        stats = _stats(w.out)
        assert stats["finish_reason"] == "topiccrawl_max_pages"
        assert stats["topiccrawl/sa/decisions"] == shared["sa/decisions"]
    if strategy == "fcsa-host":  # every counted page of either worker fed the shared host memory
        assert 0 < shared["sa/hosts_with_feedback"] <= len({u.split("/")[2] for u in urls})
