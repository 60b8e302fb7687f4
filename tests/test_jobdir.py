"""JOBDIR: a crawl stopped at its page budget resumes with the identical frontier and scorer state."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from conftest import REPO, bin_path, run_crawl

WEB = "generated:zh-disaster?pages=5000&seed=5"
#: ∂ = 0.3 (the WL paper's): a crawl hands out its next request before the last page's links are
#: queued (eager dispatch), a resumed crawl starts with them queued, so the two orders agree after the
#: seam only when the next pick is not one of the last page's links; with the focused spider's 0.7
#: it is on this web (page 41 is a link of page 40), with 0.3 it is not
SERIAL = {"TOPICCRAWL_WEB": WEB, "CONCURRENT_REQUESTS": "1", "TOPICCRAWL_PLOT_ENABLED": "false",
          "TOPICCRAWL_ANCHOR_WEIGHT": "0.3"}


def _urls(out):
    return [json.loads(l)["url"] for l in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("strategy", ["bestfirst", "wl"])
def test_stop_and_resume_continues_with_the_same_frontier(tmp_path, strategy):
    job = tmp_path / "job"
    first, out1 = run_crawl(tmp_path / "a", args={"topic": "台风灾害", "max_pages": 40, "strategy": strategy},
                            settings={**SERIAL, "JOBDIR": str(job)})
    assert first.returncode == 0, first.stderr[-3000:]
    assert (job / "topiccrawl.state").exists()
    second, out2 = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "max_pages": 80, "strategy": strategy},
                             settings={**SERIAL, "JOBDIR": str(job)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed" in second.stderr
    whole, out3 = run_crawl(tmp_path / "c", args={"topic": "台风灾害", "max_pages": 80, "strategy": strategy},
                            settings=SERIAL)
    assert whole.returncode == 0, whole.stderr[-3000:]

    resumed = _urls(out1) + _urls(out2)
    assert len(resumed) == 80 and len(set(resumed)) == 80, "a page was lost or fetched twice"
    assert resumed == _urls(out3)
    stats = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 80  # metrics continued, not restarted
    if strategy == "bestfirst":  # resumed with a budget already spent: it says so and fetches nothing
        again, out4 = run_crawl(tmp_path / "d", args={"topic": "台风灾害", "max_pages": 60, "strategy": strategy},
                                settings={**SERIAL, "JOBDIR": str(job)})
        assert again.returncode == 0, again.stderr[-3000:]
        assert ("JOBDIR: 80 pages are counted already, so the page budget (max_pages=60) is spent and the crawl "
                "stops at once; resume with a larger max_pages to go on") in again.stderr
        assert not _urls(out4)


def test_a_crawl_resumed_as_learned_gets_a_page_classifier(tmp_path):
    """A JOBDIR of a best-first crawl resumed with ``strategy=learned``: the learned crawl has its
    page classifier (it used to take the saved "none"), learning from the resumed pages. One request
    at a time, so that the 30 pages its one refit learns from are always the same (with more in
    flight, another 30 pages once left the classifier without a kept fit, so without an estimate)."""
    job = tmp_path / "job"
    settings = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false", "JOBDIR": str(job),
                "CONCURRENT_REQUESTS": "1"}
    first, out1 = run_crawl(tmp_path / "a", args={"topic": "台风灾害", "max_pages": 30, "strategy": "bestfirst"},
                            settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    second, out2 = run_crawl(tmp_path / "b", args={"topic": "台风灾害", "max_pages": 60, "strategy": "learned"},
                             settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "started without the page classifier; a new one learns from the pages fetched from now on" in second.stderr
    stats = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 60 and stats["topiccrawl/classifier/pages"] == 30
    assert stats["topiccrawl/classifier/refits"] == 1 and "topiccrawl/classifier/discarded" not in stats
    assert stats["topiccrawl/classifier/expected_harvest"] is not None
    pages = [json.loads(line) for line in (out2 / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pages) == 30 and all(p["probability"] is not None for p in pages)
    # best-first's 0/1 judgements of the first 30 pages are no P: the audit leaves them out (it mixed
    # them in, and judged a figure neither the crawl's nor Accuracy)
    with (out2 / "harvest.csv").open(encoding="utf-8", newline="") as fh:
        judged = [row["judged"] for row in csv.DictReader(fh)]
    assert len(judged) == 60 and not any(judged[:30]) and all(judged[30:])
    audit = subprocess.run([bin_path("scrapy"), "audit", str(out2), "--truth"], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    assert audit.returncode == 0, audit.stderr
    assert "pages counted: 30," in audit.stdout and "30 of the 60 counted pages have no judgement" in audit.stderr
    mean = sum(float(x) for x in judged[30:]) / 30
    assert f"self-assessed harvest rate: {mean:.3f}" in audit.stdout.splitlines()
    # its 50-page audit holds all 30 judged pages: their rate is known, not the 60 counted pages'
    assert "known: each of the 30 pages with a judgement is labelled" in audit.stdout, audit.stdout


def test_a_bfs_crawl_started_without_the_classifier_resumes_without_it_under_auto(tmp_path):
    """``auto`` gives a bfs crawl the page classifier to report with; a JOBDIR that started without
    it (``off``, or code before that) keeps going without it, so that no figure of the resumed pages
    alone passes for the crawl's; ``on`` asks for a new one, with the warning that says so."""
    job = tmp_path / "job"
    settings = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false", "JOBDIR": str(job)}
    args = {"topic": "台风灾害", "strategy": "bfs"}
    first, _ = run_crawl(tmp_path / "a", args={**args, "max_pages": 30},
                         settings={**settings, "TOPICCRAWL_CLASSIFIER": "off"})
    assert first.returncode == 0, first.stderr[-3000:]
    second, out2 = run_crawl(tmp_path / "b", args={**args, "max_pages": 60}, settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed" in second.stderr and "started without the page classifier" not in second.stderr
    stats = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 60 and not any(k.startswith("topiccrawl/classifier/") for k in stats)
    pages = [json.loads(line) for line in (out2 / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pages) == 30 and all(p["probability"] is None for p in pages)
    # asked for by name, a new classifier learns from the pages of the next run
    third, out3 = run_crawl(tmp_path / "c", args={**args, "max_pages": 90},
                            settings={**settings, "TOPICCRAWL_CLASSIFIER": "on"})
    assert third.returncode == 0, third.stderr[-3000:]
    assert "started without the page classifier; a new one learns from the pages fetched from now on" in third.stderr
    assert json.loads((out3 / "stats.json").read_text(encoding="utf-8"))["topiccrawl/classifier/pages"] == 30


def test_a_resume_carries_the_crawls_own_counters_not_those_its_state_gives():
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    from topiccrawl.crawl.jobdir import counters

    stats = MemoryStatsCollector(get_crawler())
    for key, value in {"topiccrawl/non_html": 3, "topiccrawl/classifier/guarded_pages": 4,
                       "topiccrawl/refused_private": 1, "downloader/request_count": 9,
                       "topiccrawl/dp": 10, "topiccrawl/truth/total_relevant": 50,
                       "topiccrawl/examples/words": "volcano lava"}.items():
        stats.set_value(key, value)
    assert counters(stats) == {"topiccrawl/non_html": 3, "topiccrawl/classifier/guarded_pages": 4,
                               "topiccrawl/refused_private": 1, "downloader/request_count": 9,
                               "topiccrawl/examples/words": "volcano lava"}


def _spider_state_cut_short(tmp_path):
    """A 10-page crawl with JOBDIR whose Scrapy spider.state is then left empty (as after a full
    disk); returns the JOBDIR and a resume to ``max_pages`` of its (process, output folder)."""
    job = tmp_path / "job"
    first, _ = run_crawl(tmp_path / "a", args={"topic": "台风灾害", "max_pages": 10},
                         settings={**SERIAL, "JOBDIR": str(job)})
    assert first.returncode == 0, first.stderr[-3000:]
    (job / "spider.state").write_bytes(b"")

    def resume(name: str, max_pages: int):
        return run_crawl(tmp_path / name, args={"topic": "台风灾害", "max_pages": max_pages},
                         settings={**SERIAL, "JOBDIR": str(job)})

    return job, resume


def test_a_spider_state_cut_short_is_started_anew_with_a_warning(tmp_path):
    # Scrapy's SpiderState extension pickles spider.state into the JOBDIR; after a full disk it can be
    # left empty, and every later resume logged an EOFError traceback from that extension
    job, resume = _spider_state_cut_short(tmp_path)
    second, out2 = resume("b", 20)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Traceback" not in second.stderr and "EOFError" in second.stderr
    assert f"JOBDIR {job}: spider.state could not be read (EOFError: a write cut short?); started anew" in second.stderr
    assert len(_urls(out2)) == 10  # the resume went on from the crawl's own state
    third, _ = resume("c", 25)
    assert third.returncode == 0 and "spider.state" not in third.stderr  # mended for good


def test_a_refused_resume_leaves_a_spider_state_cut_short_as_it_is(tmp_path):
    # the mend ran before the crawl state was read: a resume refused for its unreadable state (which
    # says the JOBDIR is left as it is) had rewritten spider.state
    job, resume = _spider_state_cut_short(tmp_path)
    (job / "topiccrawl.state").write_bytes(b"\x80")
    second, _ = resume("b", 20)
    assert second.returncode == 2 and "the JOBDIR is left as it is" in second.stderr, second.stderr[-3000:]
    assert (job / "spider.state").read_bytes() == b""
