"""The offline web's lab starts with the engine and stops with it: a spider built and never
crawled leaves no lab running, and a lab that fails to start closes the crawl with one line."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from scrapy import signals
from scrapy.utils.test import get_crawler

from conftest import REPO
from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.spiders.focused import FocusedSpider

WEB = "generated:zh-disaster?pages=1000&seed=1"


def test_the_lab_starts_with_the_engine_and_stops_with_it(tmp_path):
    crawler = get_crawler(FocusedSpider, {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": False,
                                          "TOPICCRAWL_OUTPUT_DIR": str(tmp_path / "out")})
    crawler.spider = crawler._create_spider(topic="台风灾害")
    tc = TopicCrawl.for_crawler(crawler)
    assert tc.lab is None and tc.proxy_url is None  # built, not crawled: nothing started
    crawler.signals.send_catch_log(signals.engine_started)
    lab = tc.lab
    try:
        assert lab is not None and lab.proc.poll() is None
        seed = tc.seeds()[0]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": tc.proxy_url}))
        with opener.open(seed, timeout=30) as response:
            assert response.status == 200
    finally:
        crawler.signals.send_catch_log(signals.engine_stopped)
    assert tc.lab is None and lab.proc.poll() is not None


FAILING_LAB = """
import sys
from topiccrawl.weblab import api
# the lab's subprocess exits at once with an error, as a lab that cannot read its corpus does
api.WebLab.command = lambda self: [sys.executable, "-c", "import sys; sys.exit('error: cannot read the corpus')"]
from scrapy.cmdline import execute
sys.argv = ["scrapy", *sys.argv[1:]]
execute()
"""


def test_a_lab_that_fails_to_start_closes_the_crawl_in_one_line(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", FAILING_LAB, "crawl", "focused", "-a", "topic=台风灾害", "-s", f"TOPICCRAWL_WEB={WEB}",
         "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-s", "TOPICCRAWL_PLOT_ENABLED=False", "-O", str(out / "pages.jsonl")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if " ERROR: " in ln]
    assert len(errors) == 1 and "failed to start: error: cannot read the corpus" in errors[0], errors
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finish_reason"] == "web_lab_failed"
    assert (out / "pages.jsonl").read_text() == ""


def test_the_ready_line_is_written_whole(monkeypatch):
    """The lab's stderr goes to the same file as its stdout: the ready line and its newline go in one
    write, so a log line cannot land inside it (a parent read such a line as a broken ready line)."""
    import io

    from topiccrawl.weblab.__main__ import _say

    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    monkeypatch.setattr(sys, "stdout", Recorder())
    _say("topiccrawl-weblab ready proxy=http://127.0.0.1:1 search=http://127.0.0.1:1/search pages=3")
    assert writes == ["topiccrawl-weblab ready proxy=http://127.0.0.1:1 search=http://127.0.0.1:1/search pages=3\n"]
