"""End to end: several ``scrapy crawl sitefinder`` workers on one crawl through a real redis-server
and one shared web lab (zh-bookstores), against one memory-backend process on the same lab."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from conftest import run_crawl
from redis_fixture import RedisCut, lose_redis_when, redis_server, start_gate, start_worker  # noqa: F401
from topiccrawl.redis import crawl_keys
from topiccrawl.redis.sites import RedisSiteTasks, site_keys
from topiccrawl.weblab.api import WebLab

WEB = "generated:zh-bookstores?pages=20000"
ARGS = ["-a", "rules=bookstore-zh", "-a", "queries=data/rules/bookstore-queries-zh.toml"]
SETTINGS = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_SITES_NUM_EXP_PAGES": "20", "TOPICCRAWL_PROGRESS_INTERVAL": "0"}


@pytest.fixture(scope="module")
def lab():
    with WebLab(WEB) as running:
        yield running


@pytest.fixture(scope="module")
def single(tmp_path_factory, lab):
    """What one memory-backend process finds on the same lab (sites and verdicts)."""
    tmp = tmp_path_factory.mktemp("single")
    proc, out = run_crawl(tmp, "sitefinder", args={"rules": "bookstore-zh",
                                                   "queries": "data/rules/bookstore-queries-zh.toml"},
                          settings={**SETTINGS, "TOPICCRAWL_WEB_PROXY": lab.proxy_url})
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = {i["site"]: i for i in _items(out)}
    report = {r["site"]: r for r in _report(out)}
    assert set(items) == set(report)
    return items, report


def _start(tmp_path, name, redis_url, proxy, **settings):
    merged = {**SETTINGS, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_url,
              "TOPICCRAWL_CRAWL_ID": "sites", "TOPICCRAWL_WEB_PROXY": proxy, "TOPICCRAWL_IDLE_TIMEOUT": "30",
              **settings}
    return start_worker(tmp_path, name, "sitefinder", ARGS, merged)


def _wait(procs, timeout=300):
    for p in procs:
        p.wait(timeout)
        assert p.returncode == 0, p.log.read_text()[-3000:]
        assert "Traceback" not in p.log.read_text(), p.log.read_text()[-3000:]


def _items(out) -> list[dict]:
    path = out / "pages.jsonl"
    return [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _report(out) -> list[dict]:
    return [json.loads(x) for x in (out / "sites.jsonl").read_text(encoding="utf-8").splitlines()]


def _stats(out) -> dict:
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def _redis_state(client) -> dict:
    k = site_keys(crawl_keys("sites")["meta"][: -len("meta")])
    return {"waiting": client.llen(k["sites:tasks"]), "leased": client.zcard(k["sites:leases"]),
            "results": {s: json.loads(v) for s, v in client.hgetall(k["sites:results"]).items()},
            "candidates": set(client.hkeys(k["sites:entries"])), "entries": client.hgetall(k["sites:entries"]),
            "owner": client.hgetall(k["sites:owner"]),
            "stats": {a: int(b) for a, b in client.hgetall(k["sites:stats"]).items()}}


def _check_shared_crawl(workers, client, single):
    single, single_report = single
    feeds = [_items(w.out) for w in workers]
    sites = [i["site"] for feed in feeds for i in feed]
    assert len(sites) == len(set(sites)), "a site was verified by two workers"
    state = _redis_state(client)
    assert state["waiting"] == 0 and state["leased"] == 0
    assert set(sites) == set(state["results"]) == state["candidates"], "a candidate site has no verdict"
    # a candidate is named by its root (scheme://host/); its verification starts from its search hits
    # (noted in Redis before the offer), then that root and its sitemap
    assert all(e == f"http://{s}/" for s, e in state["entries"].items()), state["entries"]
    # the same candidate sites and verdicts as one process; the walk inside a site may differ by a
    # few pages (a page's links reach the frontier while the next page is being chosen, in one
    # process too), so pages per site are only bounded
    assert set(sites) == set(single)
    for feed in feeds:
        for item in feed:
            assert item["verdict"] == single[item["site"]]["verdict"], item["site"]
            assert item["entry"] == single[item["site"]]["entry"]  # verified from the same entry page
            assert 1 <= item["pages_fetched"] <= 20
    for w in workers:  # every worker reports the whole crawl
        stats = _stats(w.out)
        assert stats["topiccrawl/sites/checked"] == len(single)
        assert stats["topiccrawl/sites/precision"] >= 0.9 and stats["topiccrawl/sites/recall"] >= 0.8
        report = {r["site"]: r for r in _report(w.out)}
        assert set(report) == set(single)
        for site, row in report.items():  # every query that found a site, whichever worker searched
            assert sorted(row["queries"]) == sorted(single_report[site]["queries"]), site
    return feeds, state


@pytest.mark.parametrize("handshake", [False, True], ids=["at-connect", "at-join"])
def test_redis_gone_as_a_site_worker_starts_is_one_line(tmp_path, redis_server, lab, handshake):
    """Redis answers ``scrapy crawl``'s check, then is gone when the site finder's scheduler
    connects or joins the crawl (a site given with ``-a sites``, which the spider's start adds to
    the shared tasks): one error line, ``redis_lost``, exit 1, nothing in Redis, no output file (it
    was a traceback)."""
    cut = RedisCut(redis_server.port, whole=1, handshake=handshake)
    settings = {**SETTINGS, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_CRAWL_ID": "sites",
                "TOPICCRAWL_WEB_PROXY": lab.proxy_url}
    args = [*ARGS, "-a", "sites=http://books.example.cn/"]
    worker, _ = cut.worker_lost(
        lambda url: start_worker(tmp_path, "w", "sitefinder", args, {**settings, "TOPICCRAWL_REDIS_URL": url}))
    assert not _items(worker.out) and redis_server.client().keys("*") == []
    assert not (worker.out / "stats.json").exists() and not (worker.out / "harvest.csv").exists()


def test_three_workers_verify_each_site_once(tmp_path, redis_server, lab, single, start_gate):
    gate = start_gate(lab.proxy_url)  # all three begin together (tests/redis_fixture.py)
    workers = [_start(tmp_path, f"w{i}", redis_server.url, gate.url, CONCURRENT_REQUESTS="4")
               for i in range(3)]
    gate.open_when(workers, "Spider opened")
    _wait(workers)
    feeds, state = _check_shared_crawl(workers, redis_server.client(), single)
    assert sum(len(f) > 0 for f in feeds) >= 2, [len(f) for f in feeds]  # the work was shared
    assert state["stats"].get("duplicate_verdicts", 0) == 0 and state["stats"].get("reclaimed", 0) == 0
    searched = sum(_stats(w.out).get("topiccrawl/sites/searches_claimed", 0) for w in workers)
    assert searched == state["stats"]["offered"]  # every search page fetched once, by one worker


def test_kill_9_of_a_worker_gives_its_sites_to_the_others(tmp_path, redis_server, lab, single, start_gate):
    client = redis_server.client()
    settings = {"TOPICCRAWL_LEASE_SECONDS": "2", "CONCURRENT_REQUESTS": "2", "DOWNLOAD_DELAY": "0.05"}
    gate = start_gate(lab.proxy_url)  # all three begin together: a late victim might never hold a site
    workers = [_start(tmp_path, f"w{i}", redis_server.url, gate.url, **settings) for i in range(3)]
    gate.open_when(workers, "Spider opened")
    victim = workers[0]
    victim_id = f"{socket.gethostname()}:{victim.pid}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it while it holds a site
        owner = _redis_state(client)["owner"]
        if any(w == victim_id and json.loads(t)["kind"] == "site" for t, w in owner.items()):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the victim never held a site")
    held = [json.loads(t)["site"] for t, w in _redis_state(client)["owner"].items()
            if w == victim_id and json.loads(t)["kind"] == "site"]
    victim.send_signal(signal.SIGKILL)
    victim.wait(30)
    _wait(workers[1:])
    state = _redis_state(client)
    assert state["stats"]["reclaimed"] >= 1
    dead = {i["site"] for i in _items(victim.out)}  # a killed process may not have closed its feed
    others = [_items(w.out) for w in workers[1:]]
    verified_by_others = {i["site"] for feed in others for i in feed}
    assert set(held) - dead <= verified_by_others, "a site the victim held was never verified"
    summary = {k: state[k] for k in ("waiting", "leased", "stats")}  # what a failure needs to be understood
    assert set(state["results"]) == state["candidates"] == set(single[0]), summary
    assert state["waiting"] == 0 and state["leased"] == 0, summary


def test_a_candidate_left_without_a_verdict_is_verified_before_the_crawl_ends(tmp_path, redis_server, lab, single):
    """A site task that ended without a verdict (how CI once saw it after a kill -9 is not known) is found
    when nothing waits or is leased and offered once more (RedisSiteTasks.sweep)."""
    client = redis_server.client()
    ghost = RedisSiteTasks(client, crawl_keys("sites")["meta"][: -len("meta")], worker="ghost", lease_seconds=30)
    site = sorted(single[0])[0]
    assert ghost.offer_site(site, f"http://{site}/")
    member, _ = ghost.claim()
    assert ghost.done(member)  # ended as a search task: no verdict, and the site is seen
    worker = _start(tmp_path, "w", redis_server.url, lab.proxy_url, CONCURRENT_REQUESTS="4")
    _wait([worker])
    state = _redis_state(client)
    assert set(state["results"]) == state["candidates"] == set(single[0])
    assert state["results"][site]["verdict"] in ("relevant", "irrelevant")
    assert state["stats"]["swept"] == 1 and state["waiting"] == 0 and state["leased"] == 0
    assert f"offered again ({site})" in worker.log.read_text()


def test_sigint_and_restart_finish_the_same_crawl(tmp_path, redis_server, lab, single):
    client = redis_server.client()
    first = _start(tmp_path, "first", redis_server.url, lab.proxy_url, CONCURRENT_REQUESTS="2",
                   DOWNLOAD_DELAY="0.05")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_redis_state(client)["results"]) < 3:
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    first.wait(60)
    assert first.returncode == 0, first.log.read_text()[-3000:]
    state = _redis_state(client)
    assert state["leased"] == 0 and state["waiting"] > 0, "a clean stop gives its tasks back"
    done_before = set(state["results"])
    single = single[0]
    assert 3 <= len(done_before) < len(single)
    second = _start(tmp_path, "second", redis_server.url, lab.proxy_url)
    _wait([second])
    state = _redis_state(client)
    assert set(state["results"]) == set(single) and state["waiting"] == 0
    again = {i["site"] for i in _items(second.out)}
    assert not again & done_before, "a site decided before the stop was verified again"
    assert again | {i["site"] for i in _items(first.out)} == set(single)


def test_two_workers_under_5xx_faults_decide_every_site(tmp_path, redis_server):
    """5xx answers on the sites' pages (the lab injects faults into corpus pages, not into its search
    engine; a retried search page: the next test): retries stay with the worker verifying the
    site, every search task ends with its response, every candidate is decided."""
    client = redis_server.client()
    with WebLab(WEB, faults="5xx@0.15,seed=5") as faulty:
        workers = [_start(tmp_path, f"w{i}", redis_server.url, faulty.proxy_url, CONCURRENT_REQUESTS="4")
                   for i in range(2)]
        _wait(workers)
    logs = [w.log.read_text() for w in workers]
    assert not any("search task ended without a response" in log for log in logs)
    stats = [_stats(w.out) for w in workers]
    assert sum(s.get("retry/count", 0) for s in stats) > 0, "no retry happened: the test proves nothing"
    state = _redis_state(client)
    assert state["waiting"] == 0 and state["leased"] == 0
    assert set(state["results"]) == state["candidates"] and state["candidates"]
    assert all(r["verdict"] in ("relevant", "irrelevant") for r in state["results"].values())
    assert sum(s.get("topiccrawl/sites/searches_claimed", 0) for s in stats) == state["stats"]["offered"]


def test_a_retried_search_page_comes_back_to_its_worker(redis_server):
    """RetryMiddleware re-schedules a copy of a claimed search request: the worker hands it out
    again (it is not a new task, and not a page of any site), and keeps the task until its callback.
    The scheduler is driven directly, without an engine."""
    from scrapy.utils.test import get_crawler

    from topiccrawl.redis.sitefinder import TASK_KEY, RedisSiteScheduler
    from topiccrawl.spiders.sitefinder import SF_KEY, SiteFinderSpider

    class Spider(SiteFinderSpider):
        """The sitefinder spider outside an engine: its frontier is its scheduler's, as the
        running engine's (``crawler.engine.scheduler.frontier``) would be."""

        scheduler = None

        @property
        def frontier(self):
            return self.scheduler.frontier

    crawler = get_crawler(Spider, {**SETTINGS, "TOPICCRAWL_STORE": "redis",
                                   "TOPICCRAWL_REDIS_URL": redis_server.url, "TOPICCRAWL_CRAWL_ID": "retry",
                                   "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9"})
    crawler.spider = spider = Spider.from_crawler(crawler)
    spider.scheduler = scheduler = RedisSiteScheduler.from_crawler(crawler)
    scheduler.open(spider)
    scheduler._renewal.stop()  # the lease-renewal loop needs a running reactor
    search = spider._search_request(spider.backends[0], spider.queries[0], 1)
    assert scheduler.enqueue_request(search) and len(scheduler.frontier) == 0  # a task in Redis
    claimed = scheduler.next_request()
    assert claimed.url == search.url and TASK_KEY in claimed.meta[SF_KEY]
    retry = claimed.copy()
    retry.meta["retry_times"], retry.dont_filter = 1, True
    assert scheduler.enqueue_request(retry)
    again = scheduler.next_request()
    assert again is not None and again.url == search.url and again.meta.get("retry_times") == 1
    assert len(scheduler.held) == 1 and scheduler.frontier.ignored == 0
    assert scheduler.next_request() is None  # nothing else: no other task waits


def _scheduler(redis_url: str, crawl_id: str, **settings):
    """A site-finder worker's scheduler driven directly, without an engine (as in the test above)."""
    from scrapy.utils.test import get_crawler

    from topiccrawl.redis.sitefinder import RedisSiteScheduler
    from topiccrawl.spiders.sitefinder import SiteFinderSpider

    class Spider(SiteFinderSpider):
        scheduler = None

        @property
        def frontier(self):
            return self.scheduler.frontier

    crawler = get_crawler(Spider, {**SETTINGS, "TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_url,
                                   "TOPICCRAWL_CRAWL_ID": crawl_id, "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
                                   **settings})
    crawler.spider = spider = Spider.from_crawler(crawler)
    spider.scheduler = scheduler = RedisSiteScheduler.from_crawler(crawler)
    scheduler.open(spider)
    scheduler._renewal.stop()  # the lease-renewal loop needs a running reactor
    return scheduler


def _walk(scheduler) -> list[str]:
    """Hand out the held site's pages one by one, each reported with F = 0 and no links (no
    engine, nothing fetched), until the worker has nothing more to hand out."""
    urls = []
    while (request := scheduler.next_request()) is not None:
        urls.append(request.url)
        scheduler.frontier.report(request.url, 0.0)
        scheduler._hits_checked = 0.0  # read the late hits at every request, not every HIT_POLL_SECONDS
    return urls


def test_a_hit_found_after_the_claim_reaches_the_worker_holding_the_site(redis_server):
    """Another worker's search names a site after this worker claimed it: the hit goes through
    Redis to this worker, which requests it as an entry page while the site is undecided (as one
    process requests a new hit of an undecided site); a hit already requested, or one arriving
    after the verdict, is not requested."""
    opts = {"TOPICCRAWL_SITES_SITE_QUERIES": "0", "TOPICCRAWL_SITES_SITEMAP": "false"}
    holder = _scheduler(redis_server.url, "late", **opts)
    other = _scheduler(redis_server.url, "late", **opts)
    holder.frontier.add_site("http://late.example/first.html", "q1")  # offered, with its hit
    first = holder.next_request()  # claims the site: its entry pages are first.html and the root
    assert first.url == "http://late.example/first.html" and "late.example" in holder.site_task
    # the other worker's search finds two more hits of the held site (one of them the page just
    # requested) while its first entry page is in flight
    other.frontier.add_site("http://late.example/late.html", "q2")
    other.frontier.add_site("http://late.example/first.html", "q2")
    assert other.next_request() is None  # the site is no task any more: nothing for the other worker
    holder.frontier.report(first.url, 0.0)
    holder._hits_checked = 0.0
    urls = _walk(holder)
    assert sorted(urls) == ["http://late.example/", "http://late.example/late.html"]  # each once
    assert holder.stats.get_value("topiccrawl/sites/late_hits_requested") == 1
    verdict = holder.tasks.results()["late.example"]
    assert verdict["verdict"] == "irrelevant" and verdict["pages_fetched"] == 3
    # after the verdict: a new hit is noted but requested by nobody
    other.frontier.add_site("http://late.example/after.html", "q3")
    assert holder.read_late_hits() == 0 and holder.next_request() is None and other.next_request() is None


def test_late_hits_stay_within_the_site_budget(redis_server):
    """Late hits are entry pages like the others: the site's NumExpPages bounds what is fetched."""
    opts = {"TOPICCRAWL_SITES_SITE_QUERIES": "0", "TOPICCRAWL_SITES_SITEMAP": "false",
            "TOPICCRAWL_SITES_NUM_EXP_PAGES": "4"}
    holder = _scheduler(redis_server.url, "budget", **opts)
    other = _scheduler(redis_server.url, "budget", **opts)
    holder.frontier.add_site("http://budget.example/0.html", "q")
    first = holder.next_request()
    for i in range(1, 10):
        other.frontier.add_site(f"http://budget.example/{i}.html", "q")
    holder.frontier.report(first.url, 0.0)
    holder._hits_checked = 0.0
    urls = [first.url, *_walk(holder)]
    assert len(urls) == len(set(urls)) == 4
    assert holder.tasks.results()["budget.example"]["pages_fetched"] == 4


def test_a_site_worker_that_loses_redis_mid_crawl_stops_in_one_line(tmp_path, redis_server, lab):
    """Redis gone after the first verdicts: the worker stops with one error line, ``redis_lost``,
    exit 1, the sites it decided in its feed, each once."""
    client = redis_server.client()
    k = site_keys(crawl_keys("sites")["meta"][: -len("meta")])
    worker = _start(tmp_path, "w", redis_server.url, lab.proxy_url)
    lose_redis_when(redis_server, worker, lambda: client.hlen(k["sites:results"]) >= 3)
    stats = json.loads((worker.out / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "redis_lost" and stats["topiccrawl/redis/lost"] is True
    sites = [i["site"] for i in _items(worker.out)]
    assert len(sites) == len(set(sites)) >= 3
