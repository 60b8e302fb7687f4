"""TOPICCRAWL_PARSE_WORKERS: pages extracted in a worker process give what the crawl's own process
gives, a dead worker loses no page, and a crawl with a worker counts every page once."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from twisted.python.failure import Failure

from conftest import run_crawl
from topiccrawl.crawl.parsing import ParsePool, page_terms, resolve_workers
from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig
from topiccrawl.scoring.text import add_words

PAGES = [
    (b"<html><head><title>Steam locomotive</title><meta name='description' content='A railway engine'></head>"
     b"<body><nav><a href='/menu'>Menu</a></nav><p>A <a href='/wiki/Locomotive'>locomotive</a> hauls "
     b"the trains of the Great Western Railway; its boiler raises steam.</p>"
     b"<p>See also <a href='http://other.test/x#frag'>gauge</a> and <a href='mailto:a@b'>mail</a>.</p></body></html>",
     "http://en.example.test/wiki/Steam", "text/html; charset=utf-8"),
    ("<html><head><title>颱風災害</title></head><body><p>強烈颱風帶來暴雨，沿海地區出現風暴潮。"
     "<a href='/a/1'>防災指南</a>說明了撤離路線。</p></body></html>".encode("big5", "replace"),
     "http://zh.example.test/", "text/html; charset=big5"),
    (b"<html><body><p>\xe6\x9c\x89\xe5\x90\x8d\xe7\x9a\x84\xe5\x8f\xb0\xe9\xa3\x8e\xe7\x9c\xbc\xe5\xa2\x99\xe5\x8d\x8a"
     b"\xe5\xbe\x84 <a href='b.html'>next</a></p></body></html>", "http://zh.example.test/a/", None),
    (b"\x00\x01 not html at all", "http://x.test/bin", "application/octet-stream"),
    (b"<html><body><p>broken <a href='http://[::1'>bad url</a> <b>unclosed", "http://x.test/broken", "text/html"),
]


def _ready(pool: ParsePool, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not pool.ready:
        assert time.monotonic() < deadline, "the worker never started"
        assert not pool.broken
        pool.pump(0.05)


def _result(pool: ParsePool, d, seconds: float = 60.0):
    """The Deferred's result once the pool has handed it on (no reactor: the test pumps)."""
    got = []
    d.addBoth(got.append)
    deadline = time.monotonic() + seconds
    while not got:
        assert time.monotonic() < deadline, "no answer"
        pool.pump(0.05)
    if isinstance(got[0], Failure):
        got[0].raiseException()
    return got[0]


def test_a_worker_extracts_exactly_what_the_crawl_process_does_with_the_words_taught_later():
    pool = ParsePool(1)
    try:
        assert _result(pool, pool.submit(*PAGES[0])) == page_terms(*PAGES[0])  # before it is ready: here
        _ready(pool)
        # a word taught to jieba after the worker started (a topic's words derived from examples)
        add_words(["台风眼墙半径"])
        for body, url, ctype in PAGES:
            d = pool.submit(body, url, ctype)
            assert pool._workers[0].sent and not d.called  # in the worker
            assert _result(pool, d) == page_terms(body, url, ctype), url
        d = pool.submit(*PAGES[2])
        assert pool._workers[0].sent
        assert "台风眼墙半径" in _result(pool, d)[1]  # taught in the worker too, so it is one term there as well
        # a page that finds the worker full is extracted here at once: pages never queue for it
        held = [pool.submit(body, url, ctype) for body, url, ctype in PAGES]
        assert [d.called for d in held] == [False, False, True, True, True] and not pool.can_take()
        assert [_result(pool, d) for d in held] == [page_terms(*p) for p in PAGES]
        assert pool.can_take()
        assert not pool.broken
    finally:
        pool.close()
    assert all(not w.process.is_alive() for w in pool._workers)


def test_a_dead_worker_loses_no_page_and_the_pool_extracts_in_process_from_then_on(caplog):
    pool = ParsePool(1)
    try:
        _ready(pool)
        held = [pool.submit(body, url, ctype) for body, url, ctype in PAGES]
        for pid in pool.pids():
            os.kill(pid, signal.SIGKILL)
        results = [_result(pool, d) for d in held]
        results += [_result(pool, pool.submit(body, url, ctype)) for body, url, ctype in PAGES]
        assert results == [page_terms(*p) for p in PAGES] * 2
        assert pool.broken and not pool.ready
        assert sum("extraction worker failed" in r.getMessage() for r in caplog.records) == 1
    finally:
        pool.close()


def test_no_workers_extracts_in_process():
    pool = ParsePool(0)
    assert not pool.ready and not pool.pids()
    assert _result(pool, pool.submit(*PAGES[1]), 1) == page_terms(*PAGES[1])
    pool.close()


def test_auto_uses_a_worker_only_with_a_second_core(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert resolve_workers("auto") == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert resolve_workers("auto") == 1
    assert resolve_workers("3") == 3 and resolve_workers("0") == 0


@pytest.mark.parametrize("value", ["-1", "two", "65", "1.5"])
def test_a_bad_worker_count_is_a_config_error(value):
    with pytest.raises(ConfigError, match="TOPICCRAWL_PARSE_WORKERS"):
        TopicCrawlConfig(parse_workers=value).validate()


@pytest.mark.parametrize("workers", ["1", "0"])
def test_a_crawl_with_and_without_a_worker_counts_every_page_once(tmp_path, workers):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "learned", "max_pages": 200},
                          settings={"TOPICCRAWL_WEB": "generated:zh-disaster?pages=5000&seed=11",
                                    "TOPICCRAWL_PLOT_ENABLED": "false", "TOPICCRAWL_PARSE_WORKERS": workers})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    pages = [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pages) == stats["topiccrawl/dp"] == 200 and len({p["url"] for p in pages}) == 200
    assert stats["finish_reason"] == "topiccrawl_max_pages"
    worker_pages = stats.get("topiccrawl/parse/worker_pages", 0)
    if workers == "1":
        # the first pages come before the worker has started and are extracted in the crawl's process
        assert 0 < worker_pages <= stats["response_received_count"]
        assert "page extraction: 1 worker process" in proc.stderr
    else:
        assert worker_pages == 0
    assert stats["topiccrawl/truth/harvest_rate"] > 0.1
    assert "Traceback" not in proc.stderr
