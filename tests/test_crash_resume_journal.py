"""The JOBDIR journal read back as a resume reads it; a JOBDIR of another crawl, or one whose crawl
state cannot be read, refused and left as it is.

The journal is the real one writing a real file; only the engine's set of live requests is given
by the test (what the downloader and the spider are still working on at each moment).
"""

from __future__ import annotations

import pytest
import scrapy

from conftest import memory_scheduler, run_crawl
from topiccrawl.crawl import jobdir as jd
from topiccrawl.crawl.meta import META_KEY
from topiccrawl.strategies.base import Link


def _link(seq: int, url: str) -> Link:
    return Link(url=url, score=0.5, seq=seq, payload={"url": url})


def _request(link: Link) -> scrapy.Request:
    return scrapy.Request(link.url, meta={META_KEY: {"seq": link.seq}})


class Engine:
    """The requests the engine holds: ``take`` hands one in, ``finish`` takes it out."""

    def __init__(self) -> None:
        self.requests: dict[tuple, scrapy.Request] = {}

    def take(self, link: Link) -> None:
        self.requests[jd.key(link)] = _request(link)

    def finish(self, link: Link) -> None:
        del self.requests[jd.key(link)]

    def live(self) -> set:
        return set(self.requests.values())


def _journal(tmp_path, engine: Engine, outstanding=()) -> jd.Journal:
    return jd.Journal(tmp_path / jd.JOURNAL_FILE, "epoch-1", outstanding, live=engine.live)


def test_a_resume_queues_what_was_pushed_skips_what_was_done_and_refetches_only_what_was_in_flight(tmp_path):
    engine = Engine()
    journal = _journal(tmp_path, engine)
    a, b, c, d = (_link(i, f"http://a.test/{i}") for i in range(4))
    for link in (a, b, c, d):
        journal.push(link)
    for link in (a, b, c):  # handed out one after the other
        journal.pop(link)
        engine.take(link)
    engine.finish(a)  # a 404: through the engine, never counted
    journal.count(b.url, 0.7)  # b counted (still in the scraper)
    journal.through(b.url)  # its item through the pipelines: its feed line is written
    journal.settle()
    # kill -9 here: c is in the engine, d still queued
    replay = jd.Replay(jd.read_journal(tmp_path / jd.JOURNAL_FILE, "epoch-1"), ())
    assert set(replay.pushed) == {jd.key(d)}
    assert set(replay.inflight()) == {jd.key(c)}  # b is counted: fetching it again would count it twice
    assert replay.counted == [(b.url, 0.7)]
    assert not replay.gone


def test_a_page_counted_before_its_feed_line_is_fetched_again(tmp_path):
    """Killed between the count and the item's feed line: the page is not counted in the journal
    and its request is in flight, so the resume fetches and counts it again (its line written)."""
    engine = Engine()
    journal = _journal(tmp_path, engine)
    a, b = _link(0, "http://a.test/a"), _link(1, "http://a.test/b")
    for link in (a, b):
        journal.push(link)
        journal.pop(link)
        engine.take(link)
    journal.count(a.url, 0.4)
    journal.through(a.url)
    journal.count(b.url, 0.7)  # the harvest pipeline counted b; the kill comes before its line
    journal.settle()
    assert list(journal.pending) == [b.url]
    journal.through_all(older_than=60)  # pending for less: kept
    replay = jd.Replay(jd.read_journal(tmp_path / jd.JOURNAL_FILE, "epoch-1"), ())
    assert replay.counted == [(a.url, 0.4)]
    assert set(replay.inflight()) == {jd.key(b)}
    journal.through_all(older_than=0)  # pending too long (its item never named it): written anyway
    replay = jd.Replay(jd.read_journal(tmp_path / jd.JOURNAL_FILE, "epoch-1"), ())
    assert replay.counted == [(a.url, 0.4), (b.url, 0.7)] and not replay.inflight()


def test_links_of_the_snapshot_done_since_are_skipped_and_those_in_flight_fetched_first(tmp_path):
    engine = Engine()
    queued, handed = _link(7, "http://a.test/queued"), _link(9, "http://a.test/handed")
    engine.take(handed)  # in flight when the snapshot was taken
    journal = _journal(tmp_path, engine, outstanding=[jd.key(handed)])
    popped = _link(8, "http://a.test/popped")  # in the snapshot's frontier
    journal.pop(popped)
    engine.take(popped)
    engine.finish(handed)
    journal.settle()
    replay = jd.Replay(jd.read_journal(tmp_path / jd.JOURNAL_FILE, "epoch-1"), [jd.key(handed)])
    assert replay.gone == {jd.key(handed)}  # done: dropped from the snapshot's chosen requests
    assert replay.inflight() == {jd.key(popped): None}  # the snapshot's copy is fetched first
    assert jd.key(queued) not in replay.gone and not replay.pushed


def test_a_retried_request_is_queued_again_not_in_flight(tmp_path):
    engine = Engine()
    journal = _journal(tmp_path, engine)
    link = _link(3, "http://a.test/flaky")
    journal.push(link)
    journal.pop(link)
    engine.take(link)
    journal.push(link)  # Scrapy's retry: the same request back into the scheduler
    engine.finish(link)
    journal.settle()
    replay = jd.Replay(jd.read_journal(tmp_path / jd.JOURNAL_FILE, "epoch-1"), ())
    assert set(replay.pushed) == {jd.key(link)} and not replay.inflight()


def test_a_torn_last_record_keeps_the_ones_before_and_a_stale_journal_is_ignored(tmp_path):
    engine = Engine()
    journal = _journal(tmp_path, engine)
    journal.push(_link(0, "http://a.test/0"))
    journal.push(_link(1, "http://a.test/1"))
    journal.close()
    path = tmp_path / jd.JOURNAL_FILE
    path.write_bytes(path.read_bytes()[:-5])  # the kill fell inside the last write
    records = jd.read_journal(path, "epoch-1")
    assert [r[0] for r in records] == ["push"] and jd.tuple_link(records[0][1]).url == "http://a.test/0"
    assert jd.read_journal(path, "epoch-2") is None  # written before the snapshot of epoch-2


def test_packed_requests_survive_the_journal(tmp_path):
    """A packed request may hold the codec's "no such key" marker: it comes back as that marker."""
    from topiccrawl.crawl.codec import RequestPacker

    packer = RequestPacker()
    request = scrapy.Request("http://a.test/x", meta={META_KEY: {"score": 0.5, "depth": 1}})
    link = Link(url=request.url, score=0.5, depth=1, seq=4, payload=packer.pack(request))
    journal = _journal(tmp_path, Engine())
    journal.push(link)
    journal.close()
    (record,) = jd.read_journal(tmp_path / jd.JOURNAL_FILE, "epoch-1")
    again = jd.to_request(jd.tuple_link(record[1]), packer, None, {})
    assert again.url == request.url and again.meta == request.meta


def test_a_jobdir_of_another_crawl_is_refused_in_one_line(tmp_path):
    job = tmp_path / "job"
    first, _ = run_crawl(tmp_path / "a", args={"topic": "台风灾害", "max_pages": 3},
                         settings={"JOBDIR": str(job), "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert first.returncode == 0, first.stderr[-3000:]
    state = (job / jd.STATE_FILE).read_bytes()
    for args, settings, named in (({"topic": "暴雨灾害"}, {}, "topic"),
                                  ({"topic": "台风灾害"}, {"TOPICCRAWL_WEB": "generated:zh-disaster?pages=4000"}, "web")):
        proc, _ = run_crawl(tmp_path / named, args={**args, "max_pages": 5}, settings={"JOBDIR": str(job), **settings})
        assert proc.returncode == 2, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert errors[0].startswith(f"error: JOBDIR {job} belongs to another crawl: {named}")
    assert (job / jd.STATE_FILE).read_bytes() == state  # nothing of the first crawl lost


def test_a_jobdir_resumed_with_its_topic_file_edited_or_not_writable_is_refused_in_one_line(tmp_path):
    """The same topic name with other word weights or β: the pages after the resume were judged by
    another topic than those before it, without a word (Redis workers are refused for the same edit).
    A JOBDIR that cannot be written: a traceback and exit 1."""
    from conftest import REPO

    topic = tmp_path / "typhoon.toml"
    text = (REPO / "data" / "topics" / "台风灾害.toml").read_text(encoding="utf-8")
    topic.write_text(text, encoding="utf-8")
    job = tmp_path / "job"
    first, _ = run_crawl(tmp_path / "a", args={"topic": str(topic), "max_pages": 3},
                         settings={"JOBDIR": str(job), "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert first.returncode == 0, first.stderr[-3000:]
    same, _ = run_crawl(tmp_path / "same", args={"topic": str(topic), "max_pages": 4}, settings={"JOBDIR": str(job)})
    assert same.returncode == 0 and "resumed" in same.stderr, same.stderr[-3000:]
    state = (job / jd.STATE_FILE).read_bytes()
    topic.write_text(text.replace('"台风" = 0.8', '"台风" = 0.4'), encoding="utf-8")
    assert topic.read_text(encoding="utf-8") != text
    proc, _ = run_crawl(tmp_path / "edited", args={"topic": str(topic), "max_pages": 5}, settings={"JOBDIR": str(job)})
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(errors) == 1, proc.stderr[-3000:]
    assert errors[0] == (f"error: JOBDIR {job} was started with topic '台风灾害' judged otherwise: words 台风 0.8 "
                         "(this crawl: 0.4): its pages so far were judged by that topic; use another JOBDIR for the "
                         "edited one")
    assert (job / jd.STATE_FILE).read_bytes() == state
    (tmp_path / "afile").write_text("", encoding="utf-8")
    proc, _ = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "max_pages": 3},
                        settings={"JOBDIR": str(tmp_path / "afile" / "job")})
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors == [f"error: JOBDIR {tmp_path / 'afile' / 'job'} is not writable: Not a directory"]


def test_a_damaged_crawl_state_is_refused_in_one_line_and_left_as_it_is(tmp_path):
    job = tmp_path / "job"
    first, _ = run_crawl(tmp_path / "a", args={"topic": "台风灾害", "max_pages": 20},
                         settings={"JOBDIR": str(job), "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert first.returncode == 0, first.stderr[-3000:]
    path = job / jd.STATE_FILE
    damaged = path.read_bytes()[:100]  # a partly copied JOBDIR
    path.write_bytes(damaged)
    for _ in range(2):  # refused again: the first refusal did not save an empty crawl over it
        proc, _ = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "max_pages": 40},
                            settings={"JOBDIR": str(job), "TOPICCRAWL_PLOT_ENABLED": "false"})
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert proc.stderr.strip().startswith(f"error: JOBDIR {job}: its crawl state {jd.STATE_FILE} cannot be read")
        assert len(proc.stderr.strip().splitlines()) == 1
        assert path.read_bytes() == damaged


def test_the_scheduler_never_saves_over_a_crawl_state_it_cannot_read(tmp_path):
    """The command refuses such a JOBDIR before the crawl; the scheduler, reached another way (a
    state damaged after the check), must still leave it as it is."""
    from topiccrawl.crawl.errors import ConfigError

    job = tmp_path / "job"
    scheduler = memory_scheduler(JOBDIR=str(job))  # a new crawl: its first snapshot is written at open
    scheduler.close("shutdown")
    (job / jd.STATE_FILE).write_bytes(b"\x80\x05not a pickle")
    scheduler = type(scheduler).from_crawler(scheduler.crawler)
    with pytest.raises(ConfigError, match="cannot be read"):
        scheduler.open(scheduler.crawler.spider)
    scheduler.close("shutdown")
    assert (job / jd.STATE_FILE).read_bytes() == b"\x80\x05not a pickle"


def test_a_journal_that_cannot_be_written_says_so_once_and_writes_nothing_after(tmp_path):
    """/dev/full answers every write with ENOSPC, as a full disk does."""
    failures = []
    journal = jd.Journal(__import__("pathlib").Path("/dev/full"), "epoch-1", on_fail=failures.append)
    journal.push(Link(url="http://a.test/x", score=0.5, depth=1, seq=1))
    journal.pop(Link(url="http://a.test/x", score=0.5, depth=1, seq=1))
    journal.close()
    assert len(failures) == 1 and failures[0].errno == 28 and journal.failed is failures[0]


def test_a_crawl_whose_jobdir_cannot_be_written_stops_in_one_line_and_resumes_from_what_it_wrote(tmp_path):
    """A full disk under JOBDIR (its journal on /dev/full, which answers every write with ENOSPC): the
    crawl logged a checkpoint error every half second, dropped the links it popped meanwhile, and
    never stopped; now one line, finish reason jobdir_failed, exit 1, and the same command resumes
    from what it wrote before once there is room."""
    import json
    import os

    job = tmp_path / "job"
    job.mkdir()
    os.symlink("/dev/full", job / jd.JOURNAL_FILE)  # the journal's first write fails
    settings = {"JOBDIR": str(job), "TOPICCRAWL_PLOT_ENABLED": "false"}
    full, out = run_crawl(tmp_path / "a", args={"topic": "台风灾害", "max_pages": 40}, settings=settings, timeout=120)
    errors = [line for line in full.stderr.splitlines() if " ERROR: " in line]
    assert full.returncode == 1 and "Traceback" not in full.stderr, full.stderr[-3000:]
    assert len(errors) == 1 and f"JOBDIR {job} cannot be written (No space left on device): the crawl stops" in errors[0]
    assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["finish_reason"] == "jobdir_failed"
    assert (job / jd.STATE_FILE).is_file()  # its state, saved at the close: what a resume starts from
    assert not (job / jd.JOURNAL_FILE).exists()  # the close's snapshot needs no journal (the link to /dev/full went)
    again, out = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "max_pages": 40}, settings=settings)
    assert again.returncode == 0 and "resumed" in again.stderr, again.stderr[-3000:]
    assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["topiccrawl/dp"] == 40
