"""End to end: several `scrapy crawl focused` workers on one crawl through a real redis-server,
all on one shared web lab (``TOPICCRAWL_WEB_PROXY``), as in docs/deploy.md."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time

import pytest

from conftest import REPO, bin_path, run_crawl
from redis_fixture import (  # noqa: F401
    PASSWORD,
    RedisCut,
    StartGate,
    assert_lost_in_one_line,
    lose_redis_when,
    redis_server,
    redis_server_auth,
    start_gate,
    start_worker,
)
from topiccrawl.redis import crawl_keys
from topiccrawl.weblab.api import WebLab

WEB = "generated:zh-disaster?pages=5000&seed=11"


@pytest.fixture(scope="module")
def lab():
    with WebLab(WEB) as running:
        yield running


@pytest.fixture(scope="module")
def slow_lab():
    """Every answer 0.1 s late: with 4 requests in flight a worker fetches at most 40 pages/s, so
    one worker alone would need 7.5 s for 300 pages; workers that begin together through a
    ``StartGate`` each take a share."""
    with WebLab(WEB, faults="latency=0.1@1") as running:
        yield running


def _start(tmp_path, name: str, redis_url: str, proxy: str, strategy="bfs", budget=300, **settings):
    merged = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_url, "TOPICCRAWL_CRAWL_ID": "e2e",
              "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": proxy,
              "TOPICCRAWL_PROGRESS_INTERVAL": "0", "TOPICCRAWL_PLOT_ENABLED": "false",
              "TOPICCRAWL_IDLE_TIMEOUT": "30", **settings}
    return start_worker(tmp_path, name, "focused",
                        ["-a", "topic=台风灾害", "-a", f"strategy={strategy}", "-a", f"max_pages={budget}"], merged)


def _wait(procs, timeout=240):
    for p in procs:
        p.wait(timeout)
        assert p.returncode == 0, p.log.read_text()[-3000:]


def _urls(out) -> list[str]:
    path = out / "pages.jsonl"
    return [json.loads(l)["url"] for l in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _stats(out) -> dict:
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def _ledger(client) -> dict:
    """Where every accepted link is: queued, leased, or done (with its outcome and worker)."""
    k = crawl_keys("e2e")
    return {"accepted": int(client.get(k["requests:seq"]) or 0), "queued": set(client.zrange(k["requests"], 0, -1)),
            "leased": set(client.zrange(k["leases"], 0, -1)), "done": client.hgetall(k["done"]),
            "stats": {a: int(b) for a, b in client.hgetall(k["stats"]).items()}}


def _assert_nothing_lost(ledger) -> None:
    parts = [ledger["queued"], ledger["leased"], set(ledger["done"])]
    assert sum(map(len, parts)) == len(set().union(*parts)) == ledger["accepted"], "a frontier link was lost"
    assert not any(v.startswith("lost|") for v in ledger["done"].values())


def _worker_id(proc) -> str:
    return f"{socket.gethostname()}:{proc.pid}"


def test_three_workers_share_one_crawl(tmp_path, redis_server, slow_lab):
    with StartGate(slow_lab.proxy_url) as gate:  # all three begin together (tests/redis_fixture.py)
        workers = [_start(tmp_path, f"w{i}", redis_server.url, gate.url, CONCURRENT_REQUESTS=4) for i in range(3)]
        gate.open_when(workers, "Spider opened")
        _wait(workers)
    feeds = [_urls(w.out) for w in workers]
    union = [u for feed in feeds for u in feed]
    assert len(union) == len(set(union)) == 300, "a page was fetched twice or the budget missed"
    assert all(len(feed) > 0 for feed in feeds), [len(f) for f in feeds]  # every worker took part
    for w in workers:
        stats = _stats(w.out)
        assert stats["finish_reason"] == "topiccrawl_max_pages"
        assert stats["topiccrawl/global/dp"] == 300
    ledger = _ledger(redis_server.client())
    _assert_nothing_lost(ledger)
    assert not ledger["leased"] and ledger["stats"]["dp"] == 300
    assert sum(v.startswith("counted|") for v in ledger["done"].values()) == 300

    single, out = run_crawl(tmp_path / "single", args={"topic": "台风灾害", "strategy": "bfs", "max_pages": 300},
                            settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": slow_lab.proxy_url,
                                      "TOPICCRAWL_PLOT_ENABLED": "false", "CONCURRENT_REQUESTS": 12})
    assert single.returncode == 0, single.stderr[-3000:]
    depth = {}
    for path in [out / "pages.jsonl", *(w.out / "pages.jsonl" for w in workers)]:
        rows = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()]
        depth[path] = {r["url"]: r["depth"] for r in rows}
    alone = depth.pop(out / "pages.jsonl")
    shared = {u: d for feed in depth.values() for u, d in feed.items()}
    # BFS: the workers fetch every page of the single process's inner layers and nothing deeper
    # than its last layer; which pages of that last, partly fetched layer come first depends on
    # response timing (measured in docs/deploy.md: also differs between two single runs)
    last = max(alone.values())
    assert {u for u, d in alone.items() if d < last} <= set(shared), "an inner BFS layer differs"
    assert max(shared.values()) == last
    print(f"3 workers vs 1 process, bfs, 300 pages: {len(set(alone) & set(shared))} common pages; "
          f"last layer depth {last}: {sum(d == last for d in alone.values())} vs "
          f"{sum(d == last for d in shared.values())} pages")


def test_kill_9_of_a_worker_loses_nothing(tmp_path, redis_server, lab, start_gate):
    client = redis_server.client()
    k = crawl_keys("e2e")
    settings = {"TOPICCRAWL_LEASE_SECONDS": "2", "CONCURRENT_REQUESTS": "4", "DOWNLOAD_DELAY": "0.02"}
    gate = start_gate(lab.proxy_url)  # all three begin together: a late victim might never hold a lease
    workers = [_start(tmp_path, f"w{i}", redis_server.url, gate.url, budget=600, **settings) for i in range(3)]
    gate.open_when(workers, "Spider opened")
    victim = workers[0]
    deadline = time.monotonic() + 120
    held: set[str] = set()
    while not held:  # kill it while it holds leases, a third of the way in
        assert time.monotonic() < deadline, victim.log.read_text()[-3000:]
        dp = int(client.hget(k["stats"], "dp") or 0)
        owners = client.hgetall(k["leases:owner"])
        if dp >= 150:
            held = {m for m, w in owners.items() if w == _worker_id(victim)}
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # its leases at the moment of death (they expire >= 1.3 s later: renewed every 2/3 s)
    held = {m for m, w in client.hgetall(k["leases:owner"]).items() if w == _worker_id(victim)}
    assert held
    survivors = workers[1:]
    _wait(survivors)
    ledger = _ledger(client)
    _assert_nothing_lost(ledger)
    assert ledger["stats"]["dp"] == 600 and not ledger["leased"]
    # the victim's leases came back after expiry and were fetched by the others (or are queued)
    others = {_worker_id(w) for w in survivors}
    for member in held:
        assert member in ledger["queued"] or ledger["done"][member].split("|", 1)[1] in others, member
    assert sum(member in ledger["done"] for member in held) > 0
    expired = sum(_stats(w.out).get("topiccrawl/redis/lease_expired", 0) for w in survivors)
    assert expired >= len(held) and ledger["stats"]["lease_expired"] == expired
    # no page counted twice: the survivors' feeds and the victim's counted pages make the budget
    feeds = [u for w in survivors for u in _urls(w.out)]
    by_victim = sum(v == f"counted|{_worker_id(victim)}" for v in ledger["done"].values())
    assert len(feeds) == len(set(feeds)) and len(feeds) + by_victim == 600
    # the victim's feed holds its counted pages: each line is flushed as it is written, so only a
    # page killed between its count and its line can be missing (one at most: items go one at a time)
    mine = _urls(victim.out)
    assert len(mine) == len(set(mine)) and by_victim - 1 <= len(mine) <= by_victim, (len(mine), by_victim)
    print(f"kill -9: {len(held)} leases held by the victim, {expired} re-delivered, "
          f"{sum(_stats(w.out).get('topiccrawl/redis/duplicate_fetch', 0) for w in survivors)} fetched twice")


def test_sigint_and_restart_resume_the_same_crawl(tmp_path, redis_server, lab, start_gate):
    client = redis_server.client()
    k = crawl_keys("e2e")
    settings = {"CONCURRENT_REQUESTS": "4", "DOWNLOAD_DELAY": "0.02"}
    gate = start_gate(lab.proxy_url)  # both begin together: a SIGINT must not reach a worker still starting
    first = [_start(tmp_path, f"a{i}", redis_server.url, gate.url, **settings) for i in range(2)]
    gate.open_when(first, "Spider opened")
    deadline = time.monotonic() + 120
    while int(client.hget(k["stats"], "dp") or 0) < 100:
        assert time.monotonic() < deadline, first[0].log.read_text()[-3000:]
        time.sleep(0.05)
    for w in first:
        w.send_signal(signal.SIGINT)
    _wait(first)
    paused = _ledger(client)
    _assert_nothing_lost(paused)
    assert not paused["leased"], "a graceful stop gives every lease back"
    assert 100 <= paused["stats"]["dp"] < 300 and paused["queued"]
    assert all(_stats(w.out)["finish_reason"] == "shutdown" for w in first)

    gate = start_gate(lab.proxy_url)  # both resume their share of the queue
    second = [_start(tmp_path, f"b{i}", redis_server.url, gate.url, **settings) for i in range(2)]
    gate.open_when(second, "Spider opened")
    _wait(second)
    urls = [u for w in first + second for u in _urls(w.out)]
    assert len(urls) == len(set(urls)) == 300, "a page was fetched twice or lost across the restart"
    resumed = _ledger(client)
    _assert_nothing_lost(resumed)
    assert resumed["stats"]["dp"] == 300 and resumed["accepted"] > paused["accepted"]
    assert all(_stats(w.out)["topiccrawl/resumed_queue"] > 0 for w in second)
    assert {u for w in first for u in _urls(w.out)}.isdisjoint(u for w in second for u in _urls(w.out))


def test_a_worker_that_loses_redis_stops_in_one_line_and_keeps_its_pages(tmp_path, redis_server, slow_lab):
    client = redis_server.client()
    k = crawl_keys("e2e")
    worker = _start(tmp_path, "w", redis_server.url, slow_lab.proxy_url, strategy="learned", CONCURRENT_REQUESTS="4")
    # Redis goes away mid-crawl, after 40 pages; the worker stops by itself, in one line
    lose_redis_when(redis_server, worker, lambda: int(client.hget(k["stats"], "dp") or 0) >= 40)
    stats = _stats(worker.out)
    assert stats["finish_reason"] == "redis_lost" and stats["topiccrawl/redis/lost"] is True
    urls = _urls(worker.out)  # what it counted is in its feed, each page once
    assert len(urls) == len(set(urls)) == stats["topiccrawl/dp"] >= 40


def test_a_worker_that_loses_redis_as_it_stops_on_ctrl_c_exits_1(tmp_path, redis_server, slow_lab):
    """Ctrl-C, then Redis gone while the worker closes (its leases cannot go back): one line, exit
    status 1 as for any loss (it was 0: the close reason stays ``shutdown``), and a page in flight
    is dropped as not counted because Redis was lost (it said "page budget spent")."""
    client = redis_server.client()
    k = crawl_keys("e2e")
    worker = _start(tmp_path, "w", redis_server.url, slow_lab.proxy_url, strategy="learned", CONCURRENT_REQUESTS="16")
    log = lose_redis_when(redis_server, worker, lambda: int(client.hget(k["stats"], "dp") or 0) >= 20,
                          before=lambda: worker.send_signal(signal.SIGINT), reasons=("shutdown", "redis_lost"))
    stats = _stats(worker.out)
    assert stats["topiccrawl/redis/lost"] is True and stats["finish_reason"] in ("shutdown", "redis_lost")
    assert "page budget spent" not in log
    urls = _urls(worker.out)
    assert len(urls) == len(set(urls)) == stats["topiccrawl/dp"] >= 20


def test_a_worker_with_another_topic_is_refused_in_one_line(tmp_path, redis_server, lab):
    """A crawl's workers judge pages by one topic: a worker started with another topic, or with
    the same topic's words weighted otherwise, is refused in one line, exit 2, writing nothing (it
    joined and counted its pages into the crawl without a word)."""
    redis = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url, "TOPICCRAWL_CRAWL_ID": "topic",
             "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": lab.proxy_url, "TOPICCRAWL_PLOT_ENABLED": "false"}
    proc, _ = run_crawl(tmp_path / "first", args={"topic": "台风灾害", "strategy": "learned", "max_pages": 10},
                        settings=redis)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (REPO / "data" / "topics" / "台风灾害.toml").read_text(encoding="utf-8")
    edited = tmp_path / "typhoon.toml"
    edited.write_text(text.replace('"台风" = 0.8', '"台风" = 0.5'), encoding="utf-8")
    for topic, why in [("暴雨灾害", "was started with topic '台风灾害', not '暴雨灾害'"),
                       (str(edited), "was started with topic '台风灾害' judged otherwise: words 台风 0.8 (this worker: 0.5)")]:
        proc, out = run_crawl(tmp_path / "other", args={"topic": topic, "strategy": "learned", "max_pages": 20},
                              settings=redis)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
        assert len(errors) == 1 and f"crawl id 'topic' in Redis {why} (set TOPICCRAWL_CRAWL_ID" in errors[0], errors
        assert "Spider closed (redis_refused)" in proc.stderr and not out.exists()
    assert int(redis_server.client().hget(crawl_keys("topic")["stats"], "dp")) == 10  # nothing counted into it


def test_a_worker_that_loses_redis_while_its_examples_wait_stops(tmp_path, redis_server, lab, start_gate):
    """Redis lost while the example pages wait in the worker's own queue (one request in flight, held
    at a gate): they are dropped, the wait for them ends and the worker stops with ``redis_lost``
    (it waited for them for ever)."""
    gate = start_gate(lab.proxy_url)
    settings = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url, "TOPICCRAWL_CRAWL_ID": "ex-lost",
                "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": gate.url, "TOPICCRAWL_PROGRESS_INTERVAL": "0",
                "TOPICCRAWL_PLOT_ENABLED": "false", "TOPICCRAWL_LEASE_SECONDS": "1.5", "CONCURRENT_REQUESTS": "1"}
    worker = start_worker(tmp_path, "w", "focused", ["-a", "topic=台风灾害", "-a", "strategy=learned",
                                                     "-a", "examples=truth:3", "-a", "max_pages=30"], settings)
    try:
        deadline = time.monotonic() + 120
        while "joined crawl" not in worker.log.read_text():  # its scheduler is open (Redis asked, the crawl claimed)
            assert time.monotonic() < deadline and worker.poll() is None, worker.log.read_text()[-3000:]
            time.sleep(0.1)
        redis_server.proc.kill()  # Redis goes away while the examples wait
        redis_server.proc.wait(10)
        while "lost Redis at" not in worker.log.read_text():
            assert time.monotonic() < deadline and worker.poll() is None, worker.log.read_text()[-3000:]
            time.sleep(0.1)
        gate.opened.set()  # the request in flight answers
        worker.wait(60)  # the worker stops by itself
    finally:
        if worker.poll() is None:
            worker.kill()
    log = assert_lost_in_one_line(worker, redis_server.url)
    assert "no topic words" not in log


@pytest.mark.parametrize("strategy, handshake", [("learned", False), ("learned", True), ("bfs", True)],
                         ids=["at-connect", "at-learned-claim", "at-join"])
def test_redis_gone_as_a_worker_starts_is_one_line(tmp_path, redis_server, lab, strategy, handshake):
    """Redis answers ``scrapy crawl``'s check, then is gone: when the scheduler connects
    (``at-connect``), when ``learned`` claims its options (the scheduler's construction) or when the
    worker joins the crawl (``bfs``: its first command is in ``open``). The worker stops with
    ``redis_lost`` in one line, exit 1 (it ended in a traceback), writes no output file, and nothing
    reached Redis."""
    cut = RedisCut(redis_server.port, whole=1, handshake=handshake)
    worker, _ = cut.worker_lost(lambda url: _start(tmp_path, "w", url, lab.proxy_url, strategy=strategy, budget=30))
    assert not _urls(worker.out) and redis_server.client().keys("topiccrawl:*") == []
    # it did nothing: no stats or harvest CSV to replace an earlier run's in the same folder
    assert not (worker.out / "stats.json").exists() and not (worker.out / "harvest.csv").exists()


def test_redis_gone_when_the_examples_join_the_shared_association_is_one_line(tmp_path, redis_server, lab):
    """Every example answered, Redis not yet seen gone: the first Redis command after them (the
    example pages into the shared anchor association, `learned`'s default) meets the loss. The
    worker stops with ``redis_lost`` in one line (it was a traceback) and fetches no seed."""
    cut = RedisCut(redis_server.port, whole=1, marker=b"once:")  # the association's once-only pages
    settings = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_CRAWL_ID": "ex-assoc", "TOPICCRAWL_WEB": WEB,
                "TOPICCRAWL_WEB_PROXY": lab.proxy_url, "TOPICCRAWL_PROGRESS_INTERVAL": "0",
                "TOPICCRAWL_PLOT_ENABLED": "false"}
    args = ["-a", "topic=台风灾害", "-a", "strategy=learned", "-a", "examples=truth:3", "-a", "max_pages=30"]
    worker, log = cut.worker_lost(
        lambda url: start_worker(tmp_path, "w", "focused", args, {**settings, "TOPICCRAWL_REDIS_URL": url}))
    assert "joined crawl" in log and not _urls(worker.out), "a seed was fetched"


def test_password_url_works_and_bad_redis_is_one_line(tmp_path, redis_server_auth, lab):
    ok = _start(tmp_path, "auth", redis_server_auth.url, lab.proxy_url, budget=30)
    _wait([ok])
    assert len(_urls(ok.out)) == 30
    bad_urls = {"wrong": redis_server_auth.url.replace(PASSWORD, "not-the-pw"),
                "down": f"redis://127.0.0.1:{redis_server_auth.port}1/0" if redis_server_auth.port < 6554
                else "redis://127.0.0.1:1/0"}
    for name, url in bad_urls.items():
        proc, _ = run_crawl(tmp_path / name, args={"topic": "台风灾害", "strategy": "bfs"},
                            settings={"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": url, "TOPICCRAWL_WEB": WEB})
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
        assert len(errors) == 1 and "Redis" in errors[0] and "not-the-pw" not in proc.stderr, proc.stderr[-2000:]


def test_a_restarted_worker_appends_to_its_feed_instead_of_overwriting_it(tmp_path, redis_server, lab):
    """The same command run again on a crawl id with pages counted (a worker restarted after a
    pause): its -O JSON-lines feed keeps the earlier run's pages; a JSON array feed is one line."""
    settings = {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_server.url, "TOPICCRAWL_CRAWL_ID": "again",
                "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": lab.proxy_url, "TOPICCRAWL_PLOT_ENABLED": "false",
                "TOPICCRAWL_IDLE_TIMEOUT": "30"}
    args = {"topic": "台风灾害", "strategy": "bfs"}
    first, out = run_crawl(tmp_path, args={**args, "max_pages": 10}, settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(_urls(out)) == 10
    second, out = run_crawl(tmp_path, args={**args, "max_pages": 25}, settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "joining crawl id 'again' in Redis (10 pages counted): appending to feed" in second.stderr
    urls = _urls(out)
    assert len(urls) == 25 and len(set(urls)) == 25  # the first run's 10 pages are still there
    # a feed that cannot be appended to: one line, nothing crawled, the file as it was
    array = out / "pages.json"
    array.write_text("[]", encoding="utf-8")
    cmd = [bin_path("scrapy"), "crawl", "focused", "-a", "topic=台风灾害", "-a", "strategy=bfs", "-a", "max_pages=30",
           "-O", str(array)] + [x for k, v in {**settings, "TOPICCRAWL_OUTPUT_DIR": str(out)}.items() for x in ("-s", f"{k}={v}")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "crawl id 'again' in Redis has 25 pages counted, and overwriting its feed would lose" in proc.stderr
    assert array.read_text(encoding="utf-8") == "[]"
    # nor -o, which Scrapy would append after the array's end (the file no longer JSON)
    proc = subprocess.run([x if x != "-O" else "-o" for x in cmd], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"error: -o {array}: crawl id 'again' in Redis has 25 pages counted, and appending to this json "
                    "feed would start a second document after the one already in it (no longer valid json); use a "
                    ".jsonl feed, or another file for this run"), last
    assert array.read_text(encoding="utf-8") == "[]"
