"""Crash-safe JOBDIR and the web lab's lifetime, with real crawls killed as a user's machine would.

One focused crawl of the generated web (synthetic) is killed with SIGKILL at ten moments — right
after a resume, during the first fetches, in the middle of a run, across snapshots (a snapshot
every 0.5 s) — and resumed each time; the last run reaches the page budget. Measured outside the
crawler, from a web lab shared by all runs that logs every page request (``--access-log``):

* the budget is reached, every URL counted once, and the stats cover all eleven runs;
* no queued link is lost: every link of every counted page (the corpus's own link lists, not the
  crawler's) was requested or is still queued in JOBDIR;
* pages requested again after the kills <= the requests the resumes found in flight;
* the ``-O`` JSON-lines feed, appended to by every resume, holds every counted page (a page
  written twice at most once per kill).

The web lab a crawl starts itself dies with it after a kill -9, and a Ctrl-C sent to the crawler's
process group (a terminal's Ctrl-C) leaves the lab serving until the crawler has finished and
stopped it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

import pytest

from conftest import REPO, bin_path
from topiccrawl.crawl import jobdir as jd
from topiccrawl.weblab.api import WebLab
from topiccrawl.weblab.corpus import open_corpus

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

WEB = "generated:zh-disaster?pages=5000&seed=5"
BUDGET = 300
CONCURRENT = 16
#: when each run is killed: after this many new page requests (0: as soon as it has resumed)
KILLS = [12, 0, 25, 3, 40, 0, 30, 15, 6, 35]
INFLIGHT = re.compile(r"(\d+) requests in flight fetched again")


class LoggedLab(WebLab):
    """The lab with an access log: one line per page request, the URL."""

    def __init__(self, spec: str, log: Path) -> None:
        super().__init__(spec)
        self.log = log

    def command(self) -> list[str]:
        return [*super().command(), "--access-log", str(self.log)]


#: crawls started by a test, killed at its end whatever happened
_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_crawl_left():
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _crawl(tmp: Path, name: str, settings: dict, *, new_session: bool = False,
           feed: Path | None = None) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"{name}.log"
    cmd = [bin_path("scrapy"), "crawl", "focused", "-a", "topic=台风灾害", "-a", f"max_pages={BUDGET}"]
    if feed is not None:
        cmd += ["-O", str(feed)]
    merged = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_OUTPUT_DIR": str(tmp / "out"), "TOPICCRAWL_PROGRESS_INTERVAL": "0",
              "TOPICCRAWL_PLOT_ENABLED": "false", "CONCURRENT_REQUESTS": str(CONCURRENT), **settings}
    for k, v in merged.items():
        cmd += ["-s", f"{k}={v}"]
    env = {**os.environ, "TOPICCRAWL_CACHE": str(tmp / "cache")}
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=new_session)
    _STARTED.append(proc)
    return proc, log


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def _pages(access: Path) -> list[str]:
    """The page requests of the access log (robots.txt is fetched again by every run)."""
    return [u for u in _lines(access) if not u.endswith("/robots.txt")]


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 90, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the crawl ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def _queued(job: Path) -> set[str]:
    """URLs still queued in JOBDIR: the snapshot's frontier (without the links it skips) and chosen."""
    with (job / jd.STATE_FILE).open("rb") as fh:
        data = jd.load(fh)
    skip = set(map(tuple, data.get("skip", ())))
    links = [jd.tuple_link(l) for l in data["frontier"]["links"]]
    return {l.url for l in links if jd.key(l) not in skip} | {jd.tuple_link(l).url for l in data["chosen"]}


def _outlinks(counted: list[str]) -> set[str]:
    """Every link of the counted pages that the crawl may request: corpus hosts, allowed by robots.txt."""
    corpus = open_corpus(WEB)
    robots: dict[str, RobotFileParser] = {}
    out = set()
    for url in counted:
        for link in corpus.get(url).links:
            host = urlsplit(link).hostname or ""
            if not link.startswith("http://") or not corpus.has_host(host):
                continue
            if host not in robots:
                robots[host] = RobotFileParser()
                robots[host].parse((corpus.robots_txt(host) or "").splitlines())
            if robots[host].can_fetch("*", link):
                out.add(link.split("#")[0])
    return out


def test_ten_kill_9_lose_no_link_and_refetch_at_most_the_requests_in_flight(tmp_path):
    access = tmp_path / "access.log"
    job = tmp_path / "job"
    feed = tmp_path / "pages.jsonl"  # -O: each resume appends to it
    with LoggedLab(WEB, access) as lab:
        settings = {"JOBDIR": str(job), "TOPICCRAWL_WEB_PROXY": lab.proxy_url, "TOPICCRAWL_CHECKPOINT_INTERVAL": "0.5"}
        inflight = []
        for run, after in enumerate(KILLS):
            start = len(_pages(access))
            proc, log = _crawl(tmp_path, f"run{run}", settings, feed=feed)
            if after == 0:
                _wait_for(lambda log=log: "resumed" in log.read_text(encoding="utf-8", errors="replace"), proc,
                          what="the resume")
            else:
                _wait_for(lambda n=start + after: len(_pages(access)) >= n, proc, what=f"{after} page requests")
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            assert not _children(proc.pid)
            if run:
                inflight += [int(n) for n in INFLIGHT.findall(log.read_text(encoding="utf-8", errors="replace"))]
        proc, log = _crawl(tmp_path, "last", settings, feed=feed)
        assert proc.wait(180) == 0, log.read_text(encoding="utf-8", errors="replace")[-3000:]
        text = log.read_text(encoding="utf-8", errors="replace")
        inflight += [int(n) for n in INFLIGHT.findall(text)]
        assert "Traceback" not in text and "frontier ran dry" not in text

    assert len(inflight) == len(KILLS)  # every resume replayed a snapshot and its journal
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "topiccrawl_max_pages"
    assert stats["topiccrawl/dp"] == BUDGET
    # a run killed before its first snapshot left nothing, its resume included
    assert len(KILLS) - KILLS.count(0) <= stats["topiccrawl/resumes"] <= len(KILLS)
    counted = [row.split(",")[6] for row in _lines(tmp_path / "out" / "harvest.csv")[1:]]
    assert len(counted) == BUDGET and len(set(counted)) == BUDGET, "a page was counted twice"

    requested = _pages(access)
    refetched = sum(n - 1 for n in Counter(requested).values())
    assert refetched <= sum(inflight), (refetched, inflight)
    assert max(inflight) <= 3 * CONCURRENT, inflight  # what was in the engine, not the whole queue
    lost = _outlinks(counted) - set(requested) - _queued(job)
    assert not lost, f"{len(lost)} links lost, e.g. {sorted(lost)[:5]}"

    # the feed holds every counted page: a line is on disk before the journal counts its page (a
    # kill between the two writes that page's line twice, at most once per kill)
    lines = [json.loads(line)["url"] for line in _lines(feed)]
    assert set(lines) == set(counted), (f"{len(set(counted) - set(lines))} counted pages missing from the feed, "
                                        f"{len(set(lines) - set(counted))} not counted")
    assert len(lines) - len(set(lines)) <= len(KILLS), Counter(lines).most_common(3)


def test_the_web_lab_dies_with_its_crawler_and_ignores_the_terminals_ctrl_c(tmp_path):
    job = tmp_path / "job"
    settings = {"JOBDIR": str(job), "TOPICCRAWL_PROGRESS_INTERVAL": "0.2"}

    # Ctrl-C in a terminal: SIGINT to the crawler's process group. The crawler stops gracefully,
    # its requests in flight still answered by the lab, which it then stops.
    proc, log = _crawl(tmp_path, "ctrl-c", settings, new_session=True)
    # a progress line with a counted page, so the engine runs: Scrapy's own "Crawled 0 pages" line
    # comes at spider open, before the engine runs, and a SIGINT in between stops the reactor
    # without closing the spider (Crawler.stop_async stops only a running engine): no stats.json
    counted = re.compile(r"\[topiccrawl\.crawl\.extensions\] INFO: Crawled [1-9]")
    _wait_for(lambda: counted.search(log.read_text(encoding="utf-8", errors="replace")), proc,
              what="a progress line with a counted page")
    labs = _children(proc.pid)
    assert len(labs) == 1
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(60) == 0, log.read_text(encoding="utf-8", errors="replace")[-3000:]
    written = tmp_path / "out" / "stats.json"
    assert written.is_file(), log.read_text(encoding="utf-8", errors="replace")[-3000:]
    stats = json.loads(written.read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "shutdown"
    assert "downloader/exception_count" not in stats, "the lab died with the Ctrl-C"
    assert not _alive(labs[0])

    # kill -9: the lab of the resumed crawl goes too
    proc, log = _crawl(tmp_path, "kill", settings)
    _wait_for(lambda: "resumed" in log.read_text(encoding="utf-8", errors="replace") and _children(proc.pid), proc,
              what="the resumed crawl and its lab")
    labs = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 10
    while _alive(labs[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(labs[0]), "the web lab outlived its crawler (orphan)"

    # the last run reaches the budget; DP and Scrapy's counters cover the runs before
    proc, log = _crawl(tmp_path, "last", settings)
    assert proc.wait(180) == 0, log.read_text(encoding="utf-8", errors="replace")[-3000:]
    final = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert final["topiccrawl/dp"] == BUDGET and final["finish_reason"] == "topiccrawl_max_pages"
    assert final["downloader/request_count"] > stats["downloader/request_count"]
    assert final["item_scraped_count"] >= stats["item_scraped_count"]
