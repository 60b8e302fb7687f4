"""End-to-end `scrapy crawl wl` and its baselines over the web lab's loopback proxy."""

from __future__ import annotations

import json

import pytest

from conftest import run_crawl

WEB = "generated:zh-disaster?pages=6000&seed=3"


@pytest.mark.parametrize("strategy", ["wl", "sa", "fcsa-host"])
def test_wl_spider_runs_each_strategy(tmp_path, strategy):
    proc, out = run_crawl(tmp_path, "wl", args={"topic": "暴雨灾害", "strategy": strategy, "max_pages": 200},
                          settings={"TOPICCRAWL_WEB": WEB})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    pages = [json.loads(l) for l in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert stats["topiccrawl/dp"] == len(pages) == 200
    assert {p["strategy"] for p in pages} == {strategy}
    assert stats["topiccrawl/truth/relevant"] > 0
    if strategy == "wl":
        assert stats["topiccrawl/wl/accepted"] + stats["topiccrawl/wl/forced"] >= 150
        assert stats["topiccrawl/wl/lnf"] <= 1.0
        assert (out / "wl-histogram.png").stat().st_size > 5000
    else:
        assert stats["topiccrawl/sa/decisions"] >= 150
