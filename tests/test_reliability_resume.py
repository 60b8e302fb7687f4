"""Resume with ``-O`` (the README's style) keeps the pages of the first run in the feed.

Two ``scrapy crawl`` runs over the web lab share one JOBDIR: the first stops at its 60-page
budget, the second resumes it to 120 with the same ``-O pages.jsonl``. The JSON-lines feed is
appended to, so it ends with all 120 pages, each once, and the closing progress line's pages/min
counts the second run's pages only. ``-O`` onto a feed in a format that cannot
be appended to (a JSON array) is refused in one line, exit 2, and the feed of the first run stays.
"""

from __future__ import annotations

import json
import re

from conftest import run_crawl

WEB = "generated:zh-disaster?pages=3000&seed=5"


def _crawl(tmp_path, jobdir, budget, feed=None):
    settings = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false", "JOBDIR": str(jobdir)}
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "max_pages": budget}, settings=settings,
                          feed=feed is None)
    return proc, out


def _urls(path):
    return [json.loads(line)["url"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_resume_with_overwrite_flag_appends_to_the_feed(tmp_path):
    jobdir = tmp_path / "job"
    proc, out = _crawl(tmp_path, jobdir, 60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = _urls(out / "pages.jsonl")
    assert len(first) == 60
    proc, out = _crawl(tmp_path, jobdir, 120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "appending to feed" in proc.stderr
    urls = _urls(out / "pages.jsonl")
    assert urls[:60] == first  # the first run's pages are kept, in their order
    assert len(urls) == 120 and len(set(urls)) == 120
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dp"] == 120
    # the closing progress line's rate counts this run's 60 pages over this run's time, not 120
    rate = float(re.findall(r"INFO: Crawled 120 pages \((\d+) pages/min\)", proc.stderr)[-1])
    elapsed = float(re.findall(r"'elapsed_time_seconds': ([\d.]+)", proc.stderr)[-1])
    assert 0.7 < rate / (60 * 60 / elapsed) < 1.4, (rate, elapsed)


def test_overwrite_of_a_json_array_feed_on_resume_is_refused(tmp_path):
    import subprocess

    from conftest import REPO, bin_path

    jobdir = tmp_path / "job"
    proc, out = _crawl(tmp_path, jobdir, 30)
    assert proc.returncode == 0, proc.stderr[-3000:]
    feed = out / "pages.json"
    feed.write_text("[]", encoding="utf-8")
    cmd = [bin_path("scrapy"), "crawl", "focused", "-a", "max_pages=60", "-s", f"TOPICCRAWL_WEB={WEB}",
           "-s", f"JOBDIR={jobdir}", "-s", f"TOPICCRAWL_OUTPUT_DIR={out}", "-O", str(feed)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: -O ") and "use a .jsonl feed, or -O another file" in last, last
    assert "second json document" in last and "Traceback" not in proc.stderr  # -o would break it
    assert feed.read_text(encoding="utf-8") == "[]"
    # and -o, which Scrapy would append to the array's end (the file no longer JSON): refused too
    proc = subprocess.run([*cmd[:-2], "-o", str(feed)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: -o {feed}: JOBDIR {jobdir} holds a crawl to resume, and appending") and \
        "use a .jsonl feed, or another file" in last, last
    assert feed.read_text(encoding="utf-8") == "[]"
    # the same file named with Scrapy's placeholders (the spider's name and arguments): refused too
    (out / "focused-60.json").write_text("[]", encoding="utf-8")
    named = str(out / "%(name)s-%(max_pages)s.json")
    proc = subprocess.run([*cmd[:-2], "-o", named], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: -o {named}: JOBDIR {jobdir} holds a crawl")
    assert (out / "focused-60.json").read_text(encoding="utf-8") == "[]"
