"""``learned`` on the Redis store: workers share one queue, their labels and one model version.

The frontier is driven directly over a real redis-server (a synthetic web: links whose anchor holds
"gold" lead to relevant pages), and end to end by ``scrapy crawl focused`` workers on one web lab."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from conftest import free_port, run_crawl
from redis_fixture import StartGate, redis_server, start_worker  # noqa: F401
from topiccrawl.crawl.settings import ConfigError
from topiccrawl.learning.association import TermAssociation
from topiccrawl.learning.linkvalue import LinkFeatures, url_tokens
from topiccrawl.redis import crawl_keys
from topiccrawl.redis.annealing import make_redis_frontier
from topiccrawl.redis.learned import RedisLearnedFrontier
from topiccrawl.strategies.base import Link
from topiccrawl.strategies.learned import make_learned
from topiccrawl.weblab.api import WebLab

OPTIONS = {"learned_retrain_every": "20", "learned_epsilon": "0", "learned_seed": "1"}
LEASE = {"lease_seconds": 30.0, "budget": 0}


def _frontier(client, worker: str, crawl: str = "lr", options=None, shared=None, **lease) -> RedisLearnedFrontier:
    return make_redis_frontier(client, crawl_keys(crawl), "learned", options or OPTIONS, shared=shared,
                               **{**LEASE, **lease, "worker": worker})


def _page(url: str) -> tuple[bool, list[tuple[str, LinkFeatures]]]:
    """A synthetic page: relevant when its number is a multiple of 3; its 6 out-links, those to
    relevant pages with "gold" in the anchor (a signal R(l) does not see: every score is 0.3)."""
    n = int(url.rsplit("p", 1)[1])
    rng = random.Random(n)
    out = []
    for _ in range(6):
        t = rng.randrange(1, 4000)
        target = f"http://s{t % 7}.test/p{t}"
        anchor = ["gold", "item"] if t % 3 == 0 else ["plain", "item"]
        out.append((target, LinkFeatures(anchor=anchor, url=url_tokens(target), score=0.3, depth=1)))
    return n % 3 == 0, out


def _crawl(frontiers, pages: int) -> list[str]:
    """Frontiers take turns: pop, observe the page, push its new out-links (deduplicated across
    all, as the shared dupefilter would)."""
    seen = {link.url for f in frontiers for link in f.state()["links"]}
    fetched = []
    for i in range(pages):
        f = frontiers[i % len(frontiers)]
        link = f.pop()
        assert link is not None
        relevant, out = _page(link.url)
        f.observe_page(link.url, link.url.split("/")[2], 0.9 if relevant else 0.1, out)
        fetched.append(link.url)
        for target, feat in out:
            if target not in seen:
                seen.add(target)
                f.push(Link(target, feat.score, depth=1, domain=target.split("/")[2], payload=None))
    return fetched


def _crawl_with_terms(frontiers, pages: int) -> tuple[list[str], list[tuple[list[str], float]]]:
    """As :func:`_crawl`, with the anchor association's inputs: each link's anchor words, and each
    page's terms (a word of its own, "gold" when relevant) and R(P)."""
    seen = {link.url for f in frontiers for link in f.state()["links"]}
    fetched, texts = [], []
    for i in range(pages):
        f = frontiers[i % len(frontiers)]
        link = f.pop()
        assert link is not None
        relevant, out = _page(link.url)
        for _, feat in out:
            feat.terms = tuple(feat.anchor)
        n = int(link.url.rsplit("p", 1)[1])
        terms = ["page", f"own{n % 11}"] + (["gold"] if relevant else [])
        relevance = 0.6 if relevant else 0.2
        f.observe_page(link.url, link.url.split("/")[2], 0.9 if relevant else 0.1, out, terms=terms,
                       relevance=relevance)
        fetched.append(link.url)
        texts.append((terms, relevance))
        for target, feat in out:
            if target not in seen:
                seen.add(target)
                f.push(Link(target, feat.score, depth=1, domain=target.split("/")[2], payload=None))
    return fetched, texts


def _seed(frontier) -> None:
    for n in (3, 5, 7):
        frontier.push(Link(f"http://s{n % 7}.test/p{n}", 0.3, domain=f"s{n % 7}.test", payload=None))


def test_two_workers_share_labels_and_one_model_version(redis_server):
    client = redis_server.client()
    a, b = _frontier(client, "a"), _frontier(client, "b")
    _seed(a)
    _crawl([a, b], 120)
    for f in (a, b, a):  # each sends its last labels and loads the newest model; a then reads b's
        f.leave()
    meta = a.model_meta()
    assert meta["version"] >= 1 and meta["trainer"] == "a"  # the first to step holds the trainer lease
    assert a.model.version_ == b.model.version_ == meta["version"]
    assert np.array_equal(a.model.coef_, b.model.coef_) and a.model.blend_ == b.model.blend_
    # every worker applied every label: the same graph and replay buffer
    assert a.model.n_pages == b.model.n_pages == 120
    assert a.model.n_examples == b.model.n_examples > 120
    # the same relevant pages reported by both (b, not the trainer, relabels for its stats)
    assert a.stats()["learned/relevant_pages"] == b.stats()["learned/relevant_pages"]
    assert a.model.labels().tolist() == b.model.labels().tolist()
    assert meta["by_worker"]["a"] > 0 and meta["by_worker"]["b"] > 0  # trained on both workers' pages
    assert a.stats()["learned/trained_here"] >= 1 and b.stats()["learned/trained_here"] == 0
    # the stats written at the close say who held the trainer lease until it left
    assert a.stats()["learned/trainer"] is True and b.stats()["learned/trainer"] is False
    # the signal the words cannot see was learned: a "gold" link is worth more than a plain one
    gold, plain = (LinkFeatures(anchor=[w, "item"], url=["s1", "test", "#4"], score=0.3, depth=1,
                                distance=a.model.k + 1) for w in ("gold", "plain"))
    assert a.model.predict(gold) > a.model.predict(plain)
    # re-scored after the retrains: the shared queue holds model values, not R(l) = 0.3 only
    k = a.learned_keys
    scores = {float(s) for _, s in client.zrange(a.keys["requests"], 0, -1, withscores=True)}
    assert len(scores) > 1 and int(client.hget(k["state"], "rescored")) > 0


def test_with_words_auto_workers_share_both_models_and_the_choice(redis_server):
    """TOPICCRAWL_LEARNED_WORDS=auto on Redis: the model without words and which of the two predicts
    travel with the published weights, so every worker predicts as the trainer does."""
    client = redis_server.client()
    options = {**OPTIONS, "learned_words": "auto"}
    a, b = _frontier(client, "a", crawl="lw", options=options), _frontier(client, "b", crawl="lw", options=options)
    _seed(a)
    _crawl([a, b], 120)
    for f in (a, b, a):
        f.leave()
    meta = a.model_meta()
    assert meta["version"] >= 2 and meta["plain_auc"] and "words" in meta
    assert a.model.words_ == b.model.words_ == meta["words"]
    assert b.model.plain_ is not None and a.stats()["learned/words"] == int(meta["words"])
    assert np.array_equal(a.model.plain_.coef_, b.model.plain_.coef_)
    assert np.array_equal(a.model.classifier_.coef_, b.model.classifier_.coef_)
    assert np.array_equal(a.model.coef_, b.model.coef_) and a.model.plain_auc_ == b.model.plain_auc_
    mask = a.model.structural_mask()
    assert not b.model.plain_.coef_.ravel()[~mask].any()  # the model without words has none


def test_a_worker_joining_after_a_retrain_loads_the_model_before_its_first_push(redis_server):
    client = redis_server.client()
    a = _frontier(client, "a")
    _seed(a)
    _crawl([a], 60)
    published = a.model_meta()["version"]
    assert published >= 1
    late = _frontier(client, "late")
    assert late.stats()["learned/start_version"] == late.model.version_ == published
    assert np.array_equal(late.model.coef_, a.model.coef_)
    assert late.model.n_pages == 60  # the labels replayed too
    # its first push is valued by the published model, not by R(l)
    link = Link("http://s2.test/p9999", 0.3, domain="s2.test", payload=None)
    member = late.push(link)
    want = late.model.predict(late._fallback_features(link))
    assert want != 0.3
    assert client.zscore(late.keys["requests"], member) == pytest.approx(-want)


def test_the_trainer_lease_moves_on_and_training_continues(redis_server):
    client = redis_server.client()
    a, b = _frontier(client, "a"), _frontier(client, "b")
    _seed(a)
    _crawl([a, b], 60)
    before = a.model_meta()["version"]
    assert before >= 1 and a.trainer and not b.trainer
    a.leave()  # gives the lease up: b takes it at its next page and continues the same model
    _crawl([b], 60)
    meta = b.model_meta()
    assert meta["trainer"] == "b" and meta["version"] > before and b.model.version_ == meta["version"]
    assert meta["pages"] >= 100 and b.stats()["learned/trained_here"] >= 1
    # b dies holding the lease (its expiry moved to the past, as after TOPICCRAWL_LEASE_SECONDS):
    # the next worker to fetch a page takes over, and b's late publish is refused
    k = b.learned_keys
    client.zadd(k["trainer"], {"trainer": 0})
    c = _frontier(client, "c")
    _crawl([c], 40)
    assert c.trainer and c.model_meta()["trainer"] == "c" and client.hget(k["state"], "trainer_expired") == "1"
    assert b._publish(keys=b._publish_keys, args=["b", 10**6, 0, "", "{}"]) == 0  # not the trainer any more
    assert c._publish(keys=c._publish_keys, args=["c", c.model.version_, 0, "", "{}"]) == 0  # not newer
    client.hset(c.keys["stats"], "dp", 40)  # the global budget of 40 pages is spent: no new version
    assert c._publish(keys=c._publish_keys, args=["c", c.model.version_ + 1, 40, "", "{}"]) == 0


def test_the_global_budget_and_leases_hold_and_exploration_is_seeded(redis_server):
    client = redis_server.client()
    f = _frontier(client, "a", budget=2)
    for n in range(5):
        f.push(Link(f"http://x.test/p{n}", n / 10, domain="x.test", payload=None))
    first, second = f.pop(), f.pop()
    assert (first.url, second.url) == ("http://x.test/p4", "http://x.test/p3")  # best first
    assert f.pop() is None and f.last["blocked"]  # two leased: the budget is used up
    assert f.release([f.member(first), f.member(second)]) == 2  # back with their values
    f2 = _frontier(client, "b")
    assert f2.pop().url == "http://x.test/p4"
    explore = {"learned_epsilon": "1", "learned_seed": "1", "learned_retrain_every": "20"}
    orders = []
    for crawl in ("e1", "e2"):
        g = _frontier(client, "w", crawl, explore)
        for n in range(8):
            g.push(Link(f"http://x.test/p{n}", n / 10, domain="x.test", payload=None))
        orders.append([g.pop().url for _ in range(8)])
        assert g.stats()["learned/explored"] == 8
    assert orders[0] == orders[1] and orders[0] != [f"http://x.test/p{n}" for n in range(7, -1, -1)]


def test_exploration_takes_the_best_of_k_uniform_picks(redis_server):
    client = redis_server.client()
    picks = {}
    for k in ("1", "8"):
        g = _frontier(client, "w", f"k{k}", {"learned_epsilon": "1", "learned_seed": "1",
                                             "learned_retrain_every": "20", "learned_explore_sample": k})
        for n in range(200):
            g.push(Link(f"http://x.test/p{n}", n / 200, domain="x.test", payload=None))
        picks[k] = [int(g.pop().url.rsplit("p", 1)[1]) for _ in range(40)]
    assert min(picks["1"]) < 50  # anywhere in the queue
    assert sum(picks["8"]) / 40 > sum(picks["1"]) / 40 + 40  # the stronger part, mostly
    assert any(i < 160 for i in picks["8"])  # but not greedy


def test_other_options_are_refused_with_one_line(redis_server):
    client = redis_server.client()
    _frontier(client, "a")
    with pytest.raises(ConfigError, match="learned model of this crawl runs with options") as exc:
        _frontier(client, "b", options={**OPTIONS, "learned_hops": "2"})
    assert str(exc.value).startswith("the learned model of this crawl runs with options other than this worker's: "
                                     "learned_hops 3 (this worker: 2) (set TOPICCRAWL_CRAWL_ID"), exc.value
    # crawl settings outside the options that the scheduler claims with them (the page scores the
    # shared model and association are fed) are compared too
    scores = {"holder_score": "auto", "association_score": "holder"}
    _frontier(client, "a", crawl="sc", shared=scores)
    _frontier(client, "b", crawl="sc", shared=dict(scores))
    with pytest.raises(ConfigError, match="association_score"):
        _frontier(client, "c", crawl="sc", shared={**scores, "association_score": "relevance"})


# -- end to end -------------------------------------------------------------------------------------

WEB = "generated:zh-disaster?pages=5000&seed=11"


@pytest.fixture(scope="module")
def slow_lab():
    """Every answer 0.1 s late, so both workers (begun together through a ``StartGate``) fetch a
    share of the budget (tests/test_redis_crawl.py)."""
    with WebLab(WEB, faults="latency=0.1@1") as running:
        yield running


def _start(tmp_path, name: str, redis_url: str, proxy: str, budget: int, spider_args: tuple = (), **extra):
    settings = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_url, "TOPICCRAWL_CRAWL_ID": "lrn",
                "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": proxy, "TOPICCRAWL_PROGRESS_INTERVAL": "0",
                "TOPICCRAWL_PLOT_ENABLED": "false", "TOPICCRAWL_IDLE_TIMEOUT": "30",
                "TOPICCRAWL_LEARNED_RETRAIN_EVERY": "50", "CONCURRENT_REQUESTS": "4", **extra}
    return start_worker(tmp_path, name, "focused",
                        ["-a", "topic=台风灾害", "-a", "strategy=learned", "-a", f"max_pages={budget}", *spider_args],
                        settings)


def _finish(procs) -> list[dict]:
    for p in procs:
        p.wait(300)
        assert p.returncode == 0, p.log.read_text()[-3000:]
    return [json.loads((p.out / "stats.json").read_text(encoding="utf-8")) for p in procs]


def _urls(proc) -> list[str]:
    path = proc.out / "pages.jsonl"
    return [json.loads(line)["url"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_two_scrapy_workers_crawl_with_one_model_and_a_late_worker_starts_from_it(tmp_path, redis_server, slow_lab):
    with StartGate(slow_lab.proxy_url) as gate:  # both begin together (tests/redis_fixture.py)
        workers = [_start(tmp_path, f"w{i}", redis_server.url, gate.url, 300) for i in range(2)]
        gate.open_when(workers, "Spider opened")
        stats = _finish(workers)
    feeds = [_urls(w) for w in workers]
    union = [u for feed in feeds for u in feed]
    assert len(union) == len(set(union)) == 300 and all(feeds), [len(f) for f in feeds]
    client = redis_server.client()
    meta = json.loads(client.hget("topiccrawl:lrn:learned:model", "meta"))
    # one model version, the same in both workers at the end, trained on both workers' pages
    versions = {s["topiccrawl/learned/model_version"] for s in stats}
    assert versions == {meta["version"]} and meta["version"] >= 1
    assert len(meta["by_worker"]) == 2 and all(n > 0 for n in meta["by_worker"].values())
    # every worker applied every worker's labels: all counted pages (a page is labelled before it
    # is counted); the last to stop has every page of the list
    events = [json.loads(e) for e in client.lrange("topiccrawl:lrn:learned:events", 0, -1)]
    labelled = {e[2] for e in events if e[0] == "p"}
    assert set(union) <= labelled
    assert min(s["topiccrawl/learned/pages"] for s in stats) >= 300
    assert max(s["topiccrawl/learned/pages"] for s in stats) == len(labelled)
    assert sum(s["topiccrawl/learned/trained_here"] for s in stats) >= 1
    assert any(s["topiccrawl/learned/trainer"] for s in stats)  # the lease's holder, until it stopped
    assert all(s["finish_reason"] == "topiccrawl_max_pages" for s in stats)
    # the anchor association (on by default) counted every worker's pages in one set of statistics
    assert max(s["topiccrawl/learned/association_pages"] for s in stats) >= 300
    assert min(s["topiccrawl/learned/association_terms"] for s in stats) > 100
    assert client.hlen("topiccrawl:lrn:learned:assoc") > 0  # queued links keep their anchor words

    # a worker started now (a larger budget: the crawl goes on) joins with the published model
    late = _start(tmp_path, "late", redis_server.url, slow_lab.proxy_url, 340)
    (after,) = _finish([late])
    assert after["topiccrawl/learned/start_version"] == meta["version"]
    assert after["topiccrawl/global/dp"] == 340 and after["topiccrawl/learned/model_version"] >= meta["version"]
    assert set(_urls(late)).isdisjoint(union)
    print(f"2 workers, learned, 300 pages: version {meta['version']} trained on {meta['pages']} pages "
          f"{meta['by_worker']}; pages per worker {[len(f) for f in feeds]}; "
          f"rescored {stats[0]['topiccrawl/learned/rescored']}, explored {stats[0]['topiccrawl/learned/explored']}; "
          f"Redis bytes: events {client.memory_usage('topiccrawl:lrn:learned:events')} for "
          f"{client.llen('topiccrawl:lrn:learned:events')} events, "
          f"model {client.memory_usage('topiccrawl:lrn:learned:model')}, "
          f"term statistics {sum(client.memory_usage(f'topiccrawl:lrn:learned:terms:{x}') for x in 'ns')} "
          f"for {client.hlen('topiccrawl:lrn:learned:terms:n')} terms")


def _refused(tmp_path, name: str, redis_server, slow_lab, spider_args: tuple = (), **settings) -> str:
    """Start a worker that must be refused: it stops at once with one ERROR line, no traceback,
    nothing fetched or written and exit status 2; returns that line."""
    proc = _start(tmp_path, name, redis_server.url, slow_lab.proxy_url, 40, spider_args, **settings)
    try:
        proc.wait(300)
    finally:
        if proc.poll() is None:  # a worker that did not stop (it waited for ever) is not left behind
            proc.kill()
    log = proc.log.read_text()
    assert proc.returncode == 2 and "Traceback" not in log, log[-3000:]  # a user mistake: exit status 2
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, errors
    assert "Spider closed (redis_refused)" in log and not (proc.out / "pages.jsonl").exists()
    assert not (proc.out / "stats.json").exists() and not (proc.out / "harvest.csv").exists()  # nothing written
    return errors[0]


def test_a_worker_judging_pages_by_another_score_is_refused_with_one_line(tmp_path, redis_server, slow_lab):
    # the first worker claims the crawl's model with the default page scores
    crawl = {"TOPICCRAWL_CRAWL_ID": "lrn-scores"}
    (first,) = [_start(tmp_path, "first", redis_server.url, slow_lab.proxy_url, 20, **crawl)]
    (stats,) = _finish([first])
    assert stats["topiccrawl/global/dp"] == 20
    # a second worker started with another TOPICCRAWL_ASSOCIATION_SCORE would feed the shared
    # association a second scale: refused
    error = _refused(tmp_path, "second", redis_server, slow_lab, TOPICCRAWL_ASSOCIATION_SCORE="relevance", **crawl)
    assert "runs with options other than this worker's: " in error, error
    # only what differs, by the settings' names, both values: not two dumps of every option
    assert 'association_score "holder" (this worker: "relevance")' in error and len(error) < 400, error
    # so is one with example pages, which it would fetch before its seeds: it fetches none and stops
    # (it waited for ever for the examples its scheduler had dropped)
    error = _refused(tmp_path, "second-examples", redis_server, slow_lab, ("-a", "examples=truth:3"),
                     TOPICCRAWL_ASSOCIATION_SCORE="relevance", **crawl)
    assert 'association_score "holder" (this worker: "relevance")' in error, error
    # each process resolves the semantic prior itself: a worker where it resolves on joins a crawl
    # whose model learned without it only to be refused the same way
    error = _refused(tmp_path, "third", redis_server, slow_lab, TOPICCRAWL_SEMANTIC_ENABLED="1",
                     TOPICCRAWL_SEMANTIC_ENCODER="static", **crawl)
    assert "semantic.on false (this worker: true)" in error, error
    # a worker whose link labels come from a looser page classifier (TOPICCRAWL_CLASSIFIER_STEER_SHARE)
    # would label the shared model's pages another way: refused too
    error = _refused(tmp_path, "fourth", redis_server, slow_lab, TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.1", **crawl)
    assert "classifier_steer_share " in error and "(this worker: 0.1)" in error, error
    # and so would one whose page classifier is regularised otherwise (TOPICCRAWL_CLASSIFIER_C); one
    # that only reports with another C (TOPICCRAWL_CLASSIFIER_REPORT_C) labels as the first does: it joins
    error = _refused(tmp_path, "fifth", redis_server, slow_lab, TOPICCRAWL_CLASSIFIER_C="0.1", **crawl)
    assert "classifier_c " in error and "(this worker: 0.1)" in error, error
    # the first worker started again with another option, into its own folder: refused, and its
    # earlier run's stats and harvest are left as they were (its feed is appended to, nothing added)
    files = {name: (first.out / name).read_bytes() for name in ("stats.json", "harvest.csv", "pages.jsonl")}
    again = _start(tmp_path, "first", redis_server.url, slow_lab.proxy_url, 40, TOPICCRAWL_CLASSIFIER_C="0.1", **crawl)
    again.wait(300)
    assert again.returncode == 2 and "Spider closed (redis_refused)" in again.log.read_text()
    assert {name: (first.out / name).read_bytes() for name in files} == files
    (reporter,) = _finish([_start(tmp_path, "sixth", redis_server.url, slow_lab.proxy_url, 30,
                                  TOPICCRAWL_CLASSIFIER_REPORT_C="0.1", **crawl)])
    assert reporter["finish_reason"] != "redis_refused" and reporter["topiccrawl/global/dp"] == 30, reporter


ANCHOR = {**OPTIONS, "learned_association": "anchor", "learned_rescore_all": "4096"}


def test_the_anchor_association_is_shared_and_one_worker_orders_as_memory_does(redis_server):
    client = redis_server.client()
    a, b = _frontier(client, "a", options=ANCHOR), _frontier(client, "b", options=ANCHOR)
    _seed(a)
    _, texts = _crawl_with_terms([a, b], 120)
    # both workers read one set of statistics: the memory formula over every worker's pages
    memory = TermAssociation()
    for terms, relevance in texts:
        memory.add_page(terms, relevance)
    probe = [["gold"], ["plain", "item"], ["own3"], ["never"], []]
    assert a.association.pages == b.association.pages == 120 and len(a.association) == len(memory)
    assert a.association.shifts(probe).tolist() == pytest.approx(memory.shifts(probe).tolist(), abs=1e-9)
    assert a.association.shifts([["gold"]])[0] > 0.0 == a.association.shifts([["plain"]])[0]
    assert b.stats()["learned/association_pages"] == 120
    # queued links keep their anchor words and shift (pushed, refreshed every 25 pages and re-scored
    # after retrains): those whose anchor says "gold", a word of relevant pages, are shifted up
    fields = client.hgetall(a.learned_keys["assoc"])
    queued = set(client.zrange(a.keys["requests"], 0, -1))
    assert queued and set(fields) <= queued | set(client.zrange(a.keys["leases"], 0, -1))
    gold = [m for m, f in fields.items() if "gold" in f.split("\x1f")]
    assert gold and all(float(fields[m].split("\x1f")[0]) > 0 for m in gold)

    # one worker alone fetches in the order of the memory strategy with the same options
    orders = []
    for frontier in (_frontier(client, "solo", crawl="solo", options=ANCHOR), make_learned(ANCHOR)):
        assert frontier.association is not None
        _seed(frontier)
        orders.append(_crawl_with_terms([frontier], 150)[0])
    assert orders[0] == orders[1]


def test_example_pages_count_once_in_the_shared_association_whichever_worker_adds_them(redis_server):
    client = redis_server.client()
    a, b = _frontier(client, "a", crawl="ex", options=ANCHOR), _frontier(client, "b", crawl="ex", options=ANCHOR)
    examples, counters = [["albatross", "petrel"], ["petrel", "gull"]], [["football"]]
    for f in (a, b, a):  # every worker fetches the examples for itself (and again after a restart)
        assert f.observe_examples(examples, counters) == 3
    memory = TermAssociation()
    for terms, relevance in [(examples[0], 1.0), (examples[1], 1.0), (counters[0], 0.0)]:
        memory.add_page(terms, relevance)
    assert a.association.pages == 3
    assert b.association.shifts([["petrel"], ["football"]]).tolist() == memory.shifts([["petrel"], ["football"]]).tolist()
    off = {**ANCHOR, "learned_association_examples": "false"}
    assert _frontier(client, "c", crawl="ex0", options=off).observe_examples(examples) == 0


def test_queued_links_follow_their_holders_new_probability_as_in_memory(redis_server):
    """A worker's classifier refit moves the shared queue's links of its pages as the memory
    frontier moves its own: one worker fetches in the memory order, refits included."""
    client = redis_server.client()

    def crawl(frontier, pages: int = 150) -> list[str]:
        _seed(frontier)
        fetched = []
        for _ in range(pages // 30):
            fetched += _crawl_with_terms([frontier], 30)[0]
            # a refit: the fetched pages' new P (relevant ones up, the others down, by position)
            new = {u: (0.6 if int(u.rsplit("p", 1)[1]) % 3 == 0 else 0.0) + (i % 5) / 50 for i, u in enumerate(fetched)}
            frontier.page_probabilities(new, holder_weight=0.3)
        return fetched

    options = {**ANCHOR, "learned_holder_refresh": "true"}
    solo = _frontier(client, "solo", crawl="hr", options=options)
    redis_order = crawl(solo)
    memory = make_learned(options)
    assert crawl(memory) == redis_order
    # and the queues hold the same priorities (moved rows, values and kept association shifts)
    scores = sorted(-s for _, s in client.zrange(solo.keys["requests"], 0, -1, withscores=True))
    assert scores == pytest.approx(sorted(e[2] for e in memory.state()["learned"]["entries"]), abs=1e-9)
    assert memory.stats()["learned/holder_refreshed"] > 0
    redis_stats = _frontier(client, "other", crawl="hr", options=options).stats()
    assert redis_stats["learned/holder_refreshed"] == memory.stats()["learned/holder_refreshed"]
    # without the refresh the order is another: the test sees the refresh
    assert crawl(_frontier(client, "solo", crawl="hr-off", options={**ANCHOR, "learned_holder_refresh": "false"})) \
        != redis_order
    # on by default, in memory and on Redis
    assert _frontier(client, "x", crawl="hr-default", options=ANCHOR).holder_refresh is True


def _fitted_constant(frontier, value_logit: float) -> None:
    """A fitted model that values every link expit(value_logit) (blend 1: the model alone)."""
    m = frontier.model
    m.coef_ = np.zeros(m.n_features + 4)
    m.intercept_, m.blend_ = value_logit, 1.0
    m._set_weights()


def test_rescoring_covers_the_whole_queue_above_one_chunk_and_honours_a_zero_top(redis_server):
    client = redis_server.client()
    f = _frontier(client, "a", options={**OPTIONS, "learned_rescore_all": "0"})
    for i in range(5000):  # more than one 4,096-member chunk, all at R(l) = 0.3
        f.push(Link(f"http://s{i % 7}.test/q{i}", 0.3, domain=f"s{i % 7}.test", payload=None))
    _fitted_constant(f, 2.0)
    f._rescore(everything=True)  # the first fit: every queued link gets the model's value
    want = -f.model.predict(LinkFeatures(score=0.3))
    scores = [s for _, s in client.zrange(f.keys["requests"], 0, -1, withscores=True)]
    assert len(scores) == 5000 and sorted(set(scores)) == [pytest.approx(want)], sorted(set(scores))[:5]
    # a later retrain with no top links (rescore_top = 0) re-scores the random sample only
    g = _frontier(client, "b", crawl="lr0", options={**OPTIONS, "learned_rescore_all": "0", "learned_rescore_top": "0",
                                                      "learned_rescore_sample": "50"})
    for i in range(1000):
        g.push(Link(f"http://s{i % 7}.test/r{i}", 0.3, domain=f"s{i % 7}.test", payload=None))
    _fitted_constant(g, 2.0)
    g._rescore()
    changed = sum(s == pytest.approx(want) for _, s in client.zrange(g.keys["requests"], 0, -1, withscores=True))
    assert 0 < changed <= 50


def test_queued_links_move_by_the_deltas_they_are_given_as_in_memory(redis_server):
    """``shift_scores`` (the anchors' semantic prior taken out of the links queued under it) moves
    the shared queue's links of the URLs given as the memory frontier moves its own, before and
    after the model's first fit; the crawl order then follows it."""
    client = redis_server.client()
    # every queued URL whose number is a multiple of 4 loses 0.25 of R(l), a multiple of 5 gains 0.1
    deltas = {f"http://s{t % 7}.test/p{t}": (-0.25 if t % 4 == 0 else 0.1 if t % 5 == 0 else 0.0)
              for t in range(1, 4000)}

    def crawl(frontier, shift: bool) -> tuple[list[str], int]:
        _seed(frontier)
        fetched, moved = [], 0
        for _ in range(3):
            fetched += _crawl_with_terms([frontier], 15)[0]
            if shift:
                moved += frontier.shift_scores(deltas)
        fetched += _crawl_with_terms([frontier], 30)[0]
        return fetched, moved

    solo = _frontier(client, "solo", crawl="sh", options=ANCHOR)
    redis_order, redis_moved = crawl(solo, shift=True)
    memory = make_learned(ANCHOR)
    memory_order, memory_moved = crawl(memory, shift=True)
    assert memory_order == redis_order and redis_moved == memory_moved > 0
    scores = sorted(-s for _, s in client.zrange(solo.keys["requests"], 0, -1, withscores=True))
    assert scores == pytest.approx(sorted(e[2] for e in memory.state()["learned"]["entries"]), abs=1e-9)
    assert solo.shift_scores({}) == 0 and solo.shift_scores({"http://s0.test/p0": 0.0}) == 0
    # without the shifts the order is another: the test sees them
    assert crawl(_frontier(client, "solo", crawl="sh-off", options=ANCHOR), shift=False)[0] != redis_order


@pytest.mark.parametrize("setting", ["TOPICCRAWL_LEARNED_HOLDER_MEAN=true", "TOPICCRAWL_LEARNED_SIBLINGS=yield",
                                     "TOPICCRAWL_LEARNED_GUARD=thompson", "TOPICCRAWL_LEARNED_ANCHOR_JUDGE=0.5"])
def test_a_learned_option_the_redis_store_lacks_is_one_line_before_the_crawl(tmp_path, setting):
    """Checked before Redis is even reached (the URL points at a closed port): exit 2, one line."""
    name, value = setting.split("=")
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "learned", "max_pages": 5},
                          settings={"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
                                    "TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1", name: value})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (f"error: {name} is not available with TOPICCRAWL_STORE=redis yet "
                                                    "(in memory only, docs/learned.md)")
    assert "Traceback" not in proc.stderr and not (out / "stats.json").exists()


def test_a_new_trainer_retrains_every_n_pages_of_the_crawl_not_at_once(redis_server):
    """The worker that takes the trainer lease over counts the pages since the published version,
    not since it started: no retrain at its next page (retrain every 20 pages here)."""
    client = redis_server.client()
    a, b = _frontier(client, "a"), _frontier(client, "b")
    _seed(a)
    _crawl([a, b], 41)
    meta = a.model_meta()
    assert a.trainer and meta["version"] >= 1 and meta["pages"] >= 40
    a.leave()
    _crawl([b], 5)
    assert b.trainer and b.model_meta()["version"] == meta["version"]  # 5 pages after it: not due
    _crawl([b], 25)
    assert b.model_meta()["version"] > meta["version"] and b.model_meta()["trainer"] == "b"


def test_a_lone_worker_stopped_before_its_seeds_withdraws_its_crawl(redis_server):
    """``withdraw`` (a worker stopped by ``no_topic_words``): the crawl's keys are deleted only when
    it was the crawl's only worker and no page was counted, so its claimed options do not refuse the
    worker started next with others; a second claimant or a counted page keeps the crawl."""
    client = redis_server.client()
    keys = crawl_keys("wd")
    a = _frontier(client, "a", crawl="wd")
    client.hset(keys["meta"], mapping={"strategy": "learned", "joins": 1})  # as the scheduler's join does
    other = {**OPTIONS, "learned_epsilon": 0.2}
    with pytest.raises(ConfigError, match="learned_epsilon"):
        _frontier(client, "b", crawl="wd", options=other)
    assert a.withdraw() and client.keys("topiccrawl:wd:*") == []
    assert _frontier(client, "b", crawl="wd", options=other).withdraw()  # a fresh crawl: claimed
    # two workers claimed it: kept
    a = _frontier(client, "a", crawl="wd2")
    _frontier(client, "b", crawl="wd2")
    assert not a.withdraw() and client.hget("topiccrawl:wd2:learned:state", "options")
    # one claimant, but another worker joined (its strategy has no claimed state), or a page counted
    client.hset(crawl_keys("wd3")["meta"], mapping={"strategy": "learned", "joins": 2})
    assert not _frontier(client, "a", crawl="wd3").withdraw()
    c = _frontier(client, "a", crawl="wd4")
    client.hset(crawl_keys("wd4")["stats"], "dp", 1)
    assert not c.withdraw() and client.hget("topiccrawl:wd4:learned:state", "options")
    # a second claimant refused at open (another topic, say) gives its claim back; a queued link
    # (a crawl of an older release, which counts no joins) keeps the crawl
    a, b = _frontier(client, "a", crawl="wd5"), _frontier(client, "b", crawl="wd5")
    b.unclaim()
    client.zadd(crawl_keys("wd5")["requests"], {"x": 1})
    assert not a.withdraw()
    client.delete(crawl_keys("wd5")["requests"])
    assert a.withdraw() and client.keys("topiccrawl:wd5:*") == []


def test_a_worker_whose_examples_gave_no_words_leaves_its_crawl_to_the_next(tmp_path, redis_server):
    """A lone ``learned`` worker stopped by ``no_topic_words`` (exit 2) withdraws its crawl from
    Redis: a worker started next on the same crawl id with other ``learned`` options crawls (it was
    refused: the first worker had claimed the crawl's options)."""
    web = "generated:zh-disaster?pages=1000&seed=1"
    redis = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url, "TOPICCRAWL_CRAWL_ID": "nowords",
             "TOPICCRAWL_WEB": web, "TOPICCRAWL_PLOT_ENABLED": "false"}
    topic = tmp_path / "nothing.toml"
    topic.write_text('name = "nothing"\nlanguage = "zh"\nexamples = ["http://www.example-missing.cn/nope.html"]\n',
                     encoding="utf-8")
    proc, _ = run_crawl(tmp_path / "a", args={"topic": str(topic), "strategy": "learned"}, settings=redis)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "Spider closed (no_topic_words)" in proc.stderr
    assert "crawl 'nowords' withdrawn from Redis" in proc.stderr
    assert redis_server.client().keys("topiccrawl:nowords:*") == []
    proc, out = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "strategy": "learned", "max_pages": 10},
                          settings={**redis, "TOPICCRAWL_LEARNED_EPSILON": "0.2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Spider closed (topiccrawl_max_pages)" in proc.stderr
    assert len((out / "pages.jsonl").read_text(encoding="utf-8").splitlines()) == 10


def test_a_worker_joining_with_examples_takes_no_shared_page_before_their_verdict(tmp_path, redis_server):
    """A topic of examples only on Redis: a worker that joins a running crawl gathers its examples
    first; meanwhile it takes no link of the shared queue (it took them at once, and counted their
    pages into the crawl with an empty topic: relevance 0)."""
    import threading
    import time

    from conftest import loopback_server
    from test_examples_inputs import LIVE, _LoggedSite, _topic

    with loopback_server(_LoggedSite, asked=threading.Event(), release=threading.Event(), paths=[]) as server:
        server.release.set()
        site = f"http://127.0.0.1:{server.server_port}"
        topic = _topic(tmp_path, site, f'examples = ["{site}/ex1", "{site}/ex2"]')
        settings = {**LIVE, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url,
                    "TOPICCRAWL_CRAWL_ID": "joiners", "TOPICCRAWL_PROGRESS_INTERVAL": "0",
                    "TOPICCRAWL_IDLE_TIMEOUT": "5"}
        args = ["-a", f"topic={topic}", "-a", "strategy=learned", "-a", "max_pages=30"]
        first = start_worker(tmp_path, "a", "focused", args, {**settings, "DOWNLOAD_DELAY": "1.0"})
        try:
            deadline = time.monotonic() + 90
            feed = first.out / "pages.jsonl"
            while not (feed.is_file() and len(feed.read_text(encoding="utf-8").splitlines()) >= 2):
                assert first.poll() is None and time.monotonic() < deadline, first.log.read_text()[-3000:]
                time.sleep(0.05)
            server.release.clear()
            server.asked.clear()
            queued = redis_server.client().zcard(crawl_keys("joiners")["requests"])  # links the joiner could take
            second = start_worker(tmp_path, "b", "focused", [*args, "-a", f"examples={site}/slow,{site}/ex1"],
                                  {**settings, "CONCURRENT_REQUESTS": "4"})
            try:
                assert server.asked.wait(90), second.log.read_text()[-3000:]
                time.sleep(2.0)
                feed = second.out / "pages.jsonl"
                early = feed.read_text(encoding="utf-8") if feed.is_file() else ""
                server.release.set()
                second.wait(120)
            finally:
                server.release.set()
                if second.poll() is None:
                    second.kill()
            first.wait(120)
        finally:
            if first.poll() is None:
                first.kill()
    assert queued > 0, "the shared queue was empty: nothing to take"
    assert early.strip() == "", f"pages counted before the examples' verdict: {early}"
    assert second.returncode == 0, second.log.read_text()[-3000:]
    assert "topic words derived from 2 example pages" in second.log.read_text()


def test_a_lone_worker_stopped_while_its_examples_are_fetched_leaves_its_crawl_to_the_next(tmp_path, redis_server):
    """Ctrl-C on a lone ``learned`` worker while an example page is on its way: nothing was counted,
    yet its claimed options stayed in Redis and refused a worker started next with others (a
    corrected setting) until the crawl id was changed or its keys deleted. It withdraws the crawl,
    as a worker whose examples gave no words does."""
    import signal
    import threading

    from conftest import loopback_server
    from test_examples_inputs import LIVE, _LoggedSite, _topic

    with loopback_server(_LoggedSite, asked=threading.Event(), release=threading.Event(), paths=[]) as server:
        site = f"http://127.0.0.1:{server.server_port}"
        topic = _topic(tmp_path, site, f'examples = ["{site}/slow", "{site}/ex1"]')
        settings = {**LIVE, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url,
                    "TOPICCRAWL_CRAWL_ID": "stopped", "TOPICCRAWL_PROGRESS_INTERVAL": "0"}
        args = ["-a", f"topic={topic}", "-a", "strategy=learned", "-a", "max_pages=5"]
        first = start_worker(tmp_path, "a", "focused", args, settings)
        try:
            assert server.asked.wait(60), first.log.read_text()[-3000:]
            first.send_signal(signal.SIGINT)
            threading.Timer(1.0, server.release.set).start()
            first.wait(60)
        finally:
            server.release.set()
            if first.poll() is None:
                first.kill()
        log = first.log.read_text()
        assert first.returncode == 0 and "Traceback" not in log, log[-3000:]
        assert "crawl 'stopped' withdrawn from Redis: it stopped before its examples' verdict" in log
        assert redis_server.client().keys("topiccrawl:stopped:*") == []
        second = start_worker(tmp_path, "b", "focused", args, {**settings, "TOPICCRAWL_LEARNED_EPSILON": "0.2"})
        second.wait(120)
    log = second.log.read_text()
    assert second.returncode == 0 and "Spider closed (topiccrawl_max_pages)" in log, log[-3000:]
