"""``dwdbrm -a pages=N`` ends with at most N results.

A backward crawl plans hundreds of pages at once, so the limit used to overshoot (``pages=600``
ended with 604–772 results; 55 for ``pages=50`` on this web). Now no plan holds more page
requests than the limit has room for, and pages fetched once the limit is reached (requests
already in flight) are dropped: not results, not in the feed, counted in
``topiccrawl/dwdbrm/over_limit``. Real crawl over the web lab and its search engine.
"""

from __future__ import annotations

import json

from conftest import run_crawl

LIMIT = 50


def test_page_limit_is_exact(tmp_path):
    proc, out = run_crawl(tmp_path, "dwdbrm", args={"seeds": "truth:5", "pages": LIMIT},
                          settings={"TOPICCRAWL_WEB": "generated:zh-realestate?pages=3000&seed=2"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    feed = [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    ranked = (out / "ranked.jsonl").read_text(encoding="utf-8").splitlines()
    report = json.loads((out / "discovery.json").read_text(encoding="utf-8"))
    assert report["finished"] == f"page limit reached ({LIMIT} >= {LIMIT})"
    assert len(feed) == len(ranked) == LIMIT
    assert len({item["url"] for item in feed}) == LIMIT
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["topiccrawl/dwdbrm/over_limit"] == report["over_limit"] >= 0
