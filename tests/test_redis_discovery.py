"""End to end: two `scrapy crawl dwdbrm` workers on one discovery crawl through a real
redis-server and one shared web lab (docs/dwdbrm.md, "Discovery (dwdbrm) on Redis")."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from conftest import run_crawl
from redis_fixture import StartGate, lose_redis_when, redis_server, start_worker  # noqa: F401
from topiccrawl.redis import crawl_keys
from topiccrawl.weblab.api import WebLab

WEB = "generated:zh-realestate?pages=8000&seed=4"
LIMIT = 80
OPS = ("KS", "RS", "FC", "BC")


@pytest.fixture(scope="module")
def lab():
    """Every answer 0.05 s late, so the workers' iterations overlap."""
    with WebLab(WEB, faults="latency=0.05@1") as running:
        yield running


def _settings(redis_url: str, proxy: str, out) -> dict:
    return {"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": redis_url, "TOPICCRAWL_CRAWL_ID": "disc",
            "TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": proxy, "TOPICCRAWL_OUTPUT_DIR": str(out),
            "TOPICCRAWL_PROGRESS_INTERVAL": "0", "TOPICCRAWL_PLOT_ENABLED": "false"}


def _start(tmp_path, name: str, redis_url: str, proxy: str, spider="dwdbrm"):
    return start_worker(tmp_path, name, spider, ["-a", "seeds=truth:5", "-a", f"pages={LIMIT}"],
                        _settings(redis_url, proxy, tmp_path / name))


def test_a_discovery_worker_that_loses_redis_stops_in_one_line_and_keeps_its_pages(tmp_path, redis_server, lab):
    """Redis gone in the middle of a dwdbrm crawl: the worker stops with one error line, finish
    reason ``redis_lost`` and exit status 1, fetches nothing more, its results in its feed and
    reports and its queue and iteration in its JOBDIR (it logged a traceback per page and at each
    idle, closed as ``finished`` with exit status 0, and its JOBDIR save failed); restarted with
    Redis back (here a new, empty one), it resumes the iteration it was in."""
    from redis_fixture import _start as start_redis
    from redis_fixture import _stop as stop_redis

    client = redis_server.client()
    job = tmp_path / "job"
    # two requests at a time: a backlog of planned requests waits in the worker's queue
    settings = {**_settings(redis_server.url, lab.proxy_url, tmp_path / "w"), "JOBDIR": str(job),
                "CONCURRENT_REQUESTS": "2"}
    worker = start_worker(tmp_path, "w", "dwdbrm", ["-a", "seeds=truth:5", "-a", "pages=5000"], settings)
    # Redis goes away after 3 results; the worker stops by itself, in one line
    log = lose_redis_when(redis_server, worker,
                          lambda: int(client.hget(crawl_keys("disc")["stats"], "discovery_results") or 0) >= 3)
    stats = json.loads((worker.out / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "redis_lost" and stats["topiccrawl/redis/lost"] is True
    urls = [p["url"] for p in _read(worker.out / "pages.jsonl")]
    assert len(urls) == len(set(urls)) >= 3
    # every result it found is in its feed, those of the iteration Redis went in too, and in its ranking
    assert set(urls) == {r["url"] for r in _read(worker.out / "ranked.jsonl")}
    # what it had planned and not fetched stays queued, saved with its iteration (no page fetched after the loss)
    saved = re.search(r"saved (\d+) queued requests and the crawl state", log)
    assert saved and int(saved.group(1)) > 0, log[-3000:]
    assert stats["scheduler/dequeued"] + int(saved.group(1)) == stats["scheduler/enqueued"]
    records = _read(worker.out / "iterations.jsonl")

    (tmp_path / "redis2").mkdir()
    again = start_redis(tmp_path / "redis2")
    try:
        resumed = start_worker(tmp_path, "w", "dwdbrm", ["-a", "seeds=truth:5", "-a", "pages=40"],
                               {**settings, "TOPICCRAWL_REDIS_URL": again.url})
        resumed.wait(300)
    finally:
        stop_redis(again)
    log = resumed.log.read_text()
    assert resumed.returncode == 0 and "Traceback" not in log, log[-3000:]
    assert re.search(r"resumed discovery at iteration \d+ with \d+ results", log)
    after = _read(worker.out / "iterations.jsonl")
    assert after[:len(records)] == records and len(after) > len(records)


def _read(path) -> list[dict]:
    return [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()]


def test_two_dwdbrm_workers_share_duplicates_bandit_and_page_limit(tmp_path, redis_server, lab):
    # the web is reached through a gate opened once both workers have joined: a worker whose
    # process starts seconds late would otherwise find the page limit already reached
    with StartGate(lab.proxy_url) as gate:
        workers = [_start(tmp_path, f"w{i}", redis_server.url, gate.url) for i in range(2)]
        gate.open_when(workers, "discovery worker joined crawl")
        for w in workers:
            w.wait(300)
    for w in workers:
        assert w.returncode == 0, w.log.read_text()[-3000:]
    feeds = [[p["url"] for p in _read(w.out / "pages.jsonl")] for w in workers]
    iterations = [_read(w.out / "iterations.jsonl") for w in workers]
    stats = [json.loads((w.out / "stats.json").read_text(encoding="utf-8")) for w in workers]
    union = [u for feed in feeds for u in feed]
    assert len(union) == len(set(union)), "a page was fetched by both workers"
    assert all(s["finish_reason"] == "discovery_finished" for s in stats)
    assert all(feed for feed in feeds), [len(f) for f in feeds]  # both workers found pages

    client = redis_server.client()
    keys = crawl_keys("disc")
    shared = client.hgetall("topiccrawl:disc:bandit")
    records = [r for it in iterations for r in it]
    # one shared bandit: every iteration of every worker is one play of it, and nothing else is
    assert int(shared["n"]) == len(records) == client.llen("topiccrawl:disc:bandit:log")
    per_op = Counter(r["operator"] for r in records)
    assert {op: int(shared.get(f"plays:{op}", 0)) for op in OPS} == {op: per_op[op] for op in OPS}
    for op in OPS:
        rewards = sum(r["reward"] for r in records if r["operator"] == op)
        assert float(shared.get(f"totals:{op}", 0)) == pytest.approx(rewards, abs=1e-12)
        assert sum(s.get(f"topiccrawl/dwdbrm/op/{op}/pulls", 0) for s in stats) == per_op[op]
    assert sorted(r["iteration"] for r in records) == list(range(1, len(records) + 1))  # shared play numbers
    # pending plays spread the workers over the arms (the same statistics would give the same
    # choice): the first four choices of the crawl are four different arms, and no play is left
    # pending (every choice was rewarded: the choices are the records)
    assert len(per_op) == min(len(OPS), len(records)), per_op
    assert iterations[0][0]["operator"] != iterations[1][0]["operator"]
    assert all(int(shared.get(f"pending:{op}", 0)) == 0 for op in OPS), shared
    # each worker's feed is exactly the pages its iterations found
    for feed, it in zip(feeds, iterations):
        assert sorted(feed) == sorted(u for r in it for u in r["new_pages"])

    # the shared page limit: results of all workers reach it, and only the workers' last iterations
    # (already running when it was reached) go beyond it
    total = int(client.hget(keys["stats"], "discovery_results"))
    assert total == len(union)
    assert max(s["topiccrawl/dwdbrm/shared/results"] for s in stats) == total  # as the last one closed
    last = sum(len(it[-1]["new_pages"]) for it in iterations)
    assert LIMIT <= total <= LIMIT - 1 + last, (total, last)
    print(f"2 dwdbrm workers, pages={LIMIT}: {[len(f) for f in feeds]} results, {len(records)} plays "
          f"{dict(per_op)}, last iterations {[len(it[-1]['new_pages']) for it in iterations]} pages")


def test_a_stopped_worker_resumes_its_iteration_from_its_jobdir(tmp_path, redis_server, lab):
    """The shared state stays in Redis; the worker's own queue, controller and plays come back
    from its JOBDIR, and the iteration it was in is pending again until rewarded."""
    client = redis_server.client()
    job = tmp_path / "job"

    def run(name: str, **extra):
        """One dwdbrm worker with the shared JOBDIR, to its end; its process and log."""
        # ~200 background pages first; an iteration can plan ~170 requests
        args = ["-a", "seeds=truth:5", "-a", "pages=600"]
        settings = {**_settings(redis_server.url, lab.proxy_url, tmp_path / name), "JOBDIR": str(job), **extra}
        proc = start_worker(tmp_path, name, "dwdbrm", args, settings)
        proc.wait(300)
        log = proc.log.read_text()
        assert proc.returncode == 0 and "Traceback" not in log, log[-3000:]
        return proc, log

    first, log = run("first", CLOSESPIDER_PAGECOUNT="420")
    assert "closespider_pagecount" in log
    shared = client.hgetall("topiccrawl:disc:bandit")
    assert all(int(shared.get(f"pending:{op}", 0)) == 0 for op in OPS), shared  # released on the stop
    before = _read(first.out / "iterations.jsonl")
    assert before and int(shared["n"]) == len(before)
    assert (job / "topiccrawl.state").exists()

    second, log = run("second")
    assert f"resumed discovery at iteration {before[-1]['iteration'] + 1}" in log, log[-3000:]
    after = _read(second.out / "iterations.jsonl")
    # its own plays continue where they stopped (the interrupted iteration is the next record)
    assert after[: len(before)] == before and len(after) > len(before)
    shared = client.hgetall("topiccrawl:disc:bandit")
    assert int(shared["n"]) == len(after) == client.llen("topiccrawl:disc:bandit:log")
    assert all(int(shared.get(f"pending:{op}", 0)) == 0 for op in OPS), shared
    stats = json.loads((second.out / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "discovery_finished"
    pages = [p["url"] for w in (first, second) for p in _read(w.out / "pages.jsonl")]
    assert len(pages) == len(set(pages))  # nothing fetched twice across the restart

    # a finished worker started again with its JOBDIR: nothing to resume, no play rewarded twice
    third, _ = run("third")
    assert client.hgetall("topiccrawl:disc:bandit") == shared
    assert not _read(third.out / "pages.jsonl")


def test_discovery_worker_refuses_a_focused_crawl_id(tmp_path, redis_server, lab):
    client = redis_server.client()
    client.hset(crawl_keys("disc")["meta"], "strategy", "bfs")  # as a focused crawl leaves it
    job = tmp_path / "job"
    proc, out = run_crawl(tmp_path, "dwdbrm", args={"seeds": "truth:3", "pages": 20},
                          settings={**_settings(redis_server.url, lab.proxy_url, tmp_path / "out"), "JOBDIR": str(job)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]  # a user mistake
    errors = [l for l in proc.stderr.splitlines() if " ERROR: " in l]
    assert len(errors) == 1 and "started with strategy 'bfs'" in errors[0], errors
    assert "Spider closed (redis_refused)" in proc.stderr and not (out / "pages.jsonl").exists()
    # refused: nothing written, the discovery reports included
    assert not any((out / name).exists() for name in ("stats.json", "ranked.jsonl", "iterations.jsonl", "discovery.json"))
    # and no crawl state in its JOBDIR: one saved would resume, with another crawl id, a crawl with no seeds
    assert not (job / "topiccrawl.state").exists()


def test_operator_spider_cannot_join_a_dwdbrm_crawl(tmp_path, redis_server, lab):
    client = redis_server.client()
    client.hset(crawl_keys("disc")["meta"], "strategy", "discovery")
    client.hset("topiccrawl:disc:bandit", "operators", json.dumps(list(OPS)))  # a dwdbrm crawl's bandit
    proc, out = run_crawl(tmp_path, "forward", args={"seeds": "truth:3", "pages": 20},
                          settings=_settings(redis_server.url, lab.proxy_url, tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]  # a user mistake
    errors = [l for l in proc.stderr.splitlines() if " ERROR: " in l]
    assert len(errors) == 1 and "has operators" in errors[0] and "'forward'" in errors[0], errors
    assert "Spider closed (redis_refused)" in proc.stderr and not (out / "stats.json").exists()


@pytest.mark.parametrize("kind", ["down", "not-redis"])
def test_bad_redis_url_is_one_line_for_dwdbrm(tmp_path, kind):
    url = "redis://127.0.0.1:1/0" if kind == "down" else "http://127.0.0.1:6379/0"
    proc, _ = run_crawl(tmp_path, "dwdbrm", args={"seeds": "truth:3", "pages": 20},
                        settings={"TOPICCRAWL_STORE": "redis", "TOPICCRAWL_REDIS_URL": url, "TOPICCRAWL_WEB": WEB})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "redis" in errors[0].lower(), proc.stderr[-2000:]
