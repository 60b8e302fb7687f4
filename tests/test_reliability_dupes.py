"""Each URL, after redirects, is fetched and counted at most once, whatever the retries.

A focused crawl through the web lab with faults that heal on the retry (``heal=1``: 5xx, resets,
truncated bodies), on a generated web with redirects (``/go/…`` and moved pages). Scrapy marks a
retried request ``dont_filter=True`` and its redirect target inherited the flag, so the target
skipped the duplicate filter and pages already crawled were fetched and counted again (6 of 600
on this web before the fix). Now the feed and the statistics count every URL once and the budget
is exact.
"""

from __future__ import annotations

import collections
import csv
import json

from conftest import run_crawl

WEB = "generated:zh-disaster?pages=3000&seed=2"
FAULTS = "5xx@0.15,reset@0.1,truncate@0.05,heal=1,seed=3"
BUDGET = 600


def test_faulty_healing_web_counts_every_url_once(tmp_path):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "max_pages": BUDGET},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_FAULTS": FAULTS,
                                    "TOPICCRAWL_PLOT_ENABLED": "false"}, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    urls = [json.loads(line)["url"] for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    twice = {u: n for u, n in collections.Counter(urls).items() if n > 1}
    assert twice == {}
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert len(urls) == stats["topiccrawl/dp"] == stats["item_scraped_count"] == BUDGET
    with (out / "harvest.csv").open(encoding="utf-8") as fh:
        harvest = [row["url"] for row in csv.DictReader(fh)]
    assert len(harvest) == len(set(harvest)) == BUDGET
    # the case of the bug did occur: retried requests redirected, their targets were filtered again
    assert stats["retry/count"] > 50
    assert stats.get("topiccrawl/redirect_refiltered", 0) > 0
