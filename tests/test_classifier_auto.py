"""``TOPICCRAWL_CLASSIFIER=auto``: which crawls get the page classifier, and that a strategy it only
reports for crawls the same pages in the same order (docs/learned.md, "The page classifier's
estimate for every strategy")."""

from __future__ import annotations

import csv
import json

from scrapy.utils.test import get_crawler

from tests.conftest import run_crawl
from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.spiders.discovery import DiscoverySpider
from topiccrawl.spiders.focused import FocusedSpider
from topiccrawl.spiders.wl import WLSpider

WEB = "generated:zh-disaster?pages=1000&seed=1"


def _has_classifier(spidercls, strategy: str, **settings) -> bool:
    crawler = get_crawler(spidercls, {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
                                      "TOPICCRAWL_PLOT_ENABLED": False, **settings})
    crawler.spider = crawler._create_spider(topic="台风灾害", strategy=strategy)
    return TopicCrawl.for_crawler(crawler).focus is not None


def test_auto_gives_the_classifier_to_learned_and_to_bfs_crawls_of_words_only():
    assert _has_classifier(FocusedSpider, "learned")
    assert _has_classifier(FocusedSpider, "bfs") and _has_classifier(WLSpider, "bfs")
    # best-first and wl: Accuracy was nearer the truth than the classifier's mean P on the Chinese corpora
    for strategy in ("bestfirst", "wl", "sa", "fcsa-host"):
        assert not _has_classifier(FocusedSpider, strategy), strategy
    assert not _has_classifier(WLSpider, "wl")
    # the discovery spiders (strategy bfs by default) read pages without it
    assert not _has_classifier(DiscoverySpider, "bfs")
    # the setting decides when it is not auto
    assert not _has_classifier(FocusedSpider, "bfs", TOPICCRAWL_CLASSIFIER="off")
    assert _has_classifier(FocusedSpider, "bestfirst", TOPICCRAWL_CLASSIFIER="on")


def test_a_progress_line_says_why_the_classifier_has_no_figure_yet():
    from topiccrawl.crawl.extensions import TopicStats

    crawler = get_crawler(FocusedSpider, {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
                                          "TOPICCRAWL_PLOT_ENABLED": False})
    crawler.spider = crawler._create_spider(topic="台风灾害", strategy="bfs")
    ext = TopicStats(crawler)
    assert ext._classifier_estimate() == ", page classifier's estimate – (not fitted yet)"
    ext.tc.focus.discarded = 2  # refits thrown away (TOPICCRAWL_CLASSIFIER_UNRANKED=discard)
    assert ext._classifier_estimate() == ", page classifier's estimate – (2 refits discarded)"
    ext.tc.focus = None
    assert ext._classifier_estimate() == ""


def test_a_bfs_crawl_reports_the_classifier_s_estimate_and_fetches_what_it_fetched_without_it(tmp_path):
    """One request at a time, a bfs crawl's order is fixed: with the classifier (auto) and without
    it (off) the same pages are counted in the same order; only the first reports P and its mean."""
    settings = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false", "CONCURRENT_REQUESTS": "1"}
    args = {"topic": "台风灾害", "strategy": "bfs", "max_pages": 150}
    runs = {}
    for mode in ("auto", "off"):
        proc, out = run_crawl(tmp_path / mode, args=args, settings={**settings, "TOPICCRAWL_CLASSIFIER": mode})
        assert proc.returncode == 0, proc.stderr[-3000:]
        stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
        feed = [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
        rows = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
        runs[mode] = proc.stderr, stats, feed, rows
    log, stats, feed, rows = runs["auto"]
    log_off, stats_off, feed_off, rows_off = runs["off"]
    assert [r["url"] for r in rows] == [r["url"] for r in rows_off] and len(rows) == 150
    assert [r["truth_relevant"] for r in rows] == [r["truth_relevant"] for r in rows_off]
    # the classifier fitted (after 30 and 130 pages) and reports its figure beside Accuracy
    assert stats["topiccrawl/classifier/refits"] >= 2 and stats["topiccrawl/accuracy"] == stats_off["topiccrawl/accuracy"]
    expected = stats["topiccrawl/classifier/expected_harvest"]
    assert 0.0 < expected < 1.0 and float(rows[-1]["expected_harvest"]) == expected
    assert all(item["probability"] is not None for item in feed)
    assert all(item["probability"] is None for item in feed_off)
    assert not any(key.startswith("topiccrawl/classifier/") for key in stats_off)
    # the crawl's last progress line gives the classifier's figure beside Accuracy; without it, Accuracy alone
    accuracy = f"Accuracy {stats['topiccrawl/accuracy']:.3f} (LP {stats['topiccrawl/lp']})"
    assert f"{accuracy}, page classifier's estimate {expected:.3f}" in log
    assert "page classifier" not in log_off and f"Accuracy {stats_off['topiccrawl/accuracy']:.3f}" in log_off
    # harvest.csv's judgements (what scrapy audit corrects) are the classifier's P, not Accuracy's 0/1
    assert any(0.0 < float(r["judged"]) < 1.0 for r in rows)
    assert {float(r["judged"]) for r in rows_off} <= {0.0, 1.0}
