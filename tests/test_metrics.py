"""Crawl metrics (WL paper eqs. 7–11, ground truth) on a hand-computed 5-page crawl."""

from __future__ import annotations

import math
import pickle
import random
import statistics

import pytest

from topiccrawl.scoring.metrics import CrawlMetrics, mean_rank, median_rank, precision_at

X = frozenset({"topic:x"})
CRAWL = [  # url, R, labels, site
    ("http://a.com/1", 0.9, frozenset({"topic:x"}), None),
    ("http://a.com/2", 0.2, frozenset(), None),
    ("http://b.com/1", 0.7, None, None),
    ("http://www.c.com/1", 0.4, frozenset({"topic:x", "other"}), "c.com"),
    ("http://b.com/2", 0.6, frozenset({"other"}), None),
]


def run(metrics: CrawlMetrics, pages=CRAWL) -> list[dict]:
    return [metrics.record(*page) for page in pages]


def test_five_page_crawl_by_hand():
    m = CrawlMetrics(beta=0.6, relevant_labels=X)
    rows = run(m)
    assert (m.dp, m.lp, m.accuracy) == (5, 3, pytest.approx(3 / 5))  # R >= β: 0.9, 0.7, 0.6
    assert m.ardp == pytest.approx(2.8 / 5)
    # population sd: squared deviations from 0.56 sum to 0.292
    assert m.sddp == pytest.approx(math.sqrt(0.292 / 5))
    assert m.arlp == pytest.approx(2.2 / 3)
    assert m.sdlp == pytest.approx(math.sqrt(((0.9 - 2.2 / 3) ** 2 + (0.7 - 2.2 / 3) ** 2
                                             + (0.6 - 2.2 / 3) ** 2) / 3))
    assert (m.truth_relevant, m.truth_harvest_rate) == (2, pytest.approx(0.4))
    assert m.site_harvest_rate == pytest.approx(2 / 3)  # a.com and c.com of a, b, c
    assert m.target_recall(4) == pytest.approx(0.5)
    assert rows[1] == {"url": "http://a.com/2", "relevance": 0.2, "dp": 2, "lp": 1,
                       "accuracy": 0.5, "truth_relevant": 1, "truth_distinct": 1,
                       "truth_harvest_rate": 0.5}
    assert [r["truth_relevant"] for r in rows] == [1, 1, 1, 2, 2]


def test_snapshot_keys_and_checkpoints():
    m = CrawlMetrics(0.6, X, checkpoints=(2, 4, 100))
    run(m)
    snap = m.snapshot(total_relevant=4)
    assert list(snap) == ["dp", "lp", "accuracy", "ardp", "sddp", "arlp", "sdlp",
                          "truth/relevant", "truth/distinct_relevant", "truth/harvest_rate",
                          "truth/target_recall",
                          "truth/site_harvest_rate"]
    assert snap["truth/target_recall"] == pytest.approx(0.5)
    cps = m.checkpoints(total_relevant=4)
    assert [c["dp"] for c in cps] == [2, 4]
    assert cps[0]["lp"] == 1 and cps[0]["ardp"] == pytest.approx(0.55)
    assert cps[1]["truth/relevant"] == 2 and cps[1]["truth/target_recall"] == pytest.approx(0.5)
    assert [c["dp"] for c in m.checkpoints(at=[4, 5])] == [4]
    assert m.checkpoints()[1]["truth/target_recall"] is None


def test_without_ground_truth_truth_measures_are_none():
    m = CrawlMetrics(0.6)
    row = run(m)[-1]
    assert row["truth_relevant"] is None and row["truth_harvest_rate"] is None
    assert m.snapshot()["truth/site_harvest_rate"] is None and m.target_recall(10) is None
    assert m.lp == 3


def test_empty_crawl_is_all_zero():
    m = CrawlMetrics(0.5, X)
    assert (m.dp, m.accuracy, m.ardp, m.sddp, m.arlp, m.sdlp) == (0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert (m.truth_harvest_rate, m.site_harvest_rate) == (0.0, 0.0)


def test_welford_matches_population_statistics():
    rng = random.Random(5)
    values = [rng.random() for _ in range(1000)]
    m = CrawlMetrics(0.7)
    for i, r in enumerate(values):
        m.record(f"http://s.test/{i}", r)
    high = [r for r in values if r >= 0.7]
    assert m.ardp == pytest.approx(statistics.fmean(values))
    assert m.sddp == pytest.approx(statistics.pstdev(values))
    assert (m.lp, m.arlp, m.sdlp) == (len(high), pytest.approx(statistics.fmean(high)),
                                      pytest.approx(statistics.pstdev(high)))


def test_state_round_trip_mid_crawl():
    whole = CrawlMetrics(0.6, X, checkpoints=(2, 4))
    run(whole)
    first = CrawlMetrics(0.6, X, checkpoints=(2, 4))
    run(first, CRAWL[:3])
    resumed = CrawlMetrics.from_state(pickle.loads(pickle.dumps(first.state())))
    run(resumed, CRAWL[3:])
    assert resumed.snapshot(4) == whole.snapshot(4)
    assert resumed.checkpoints() == whole.checkpoints()


def test_ranking_measures():
    ranked = [True, False, True, False, False, True]
    assert precision_at(ranked, 3) == pytest.approx(2 / 3)
    assert precision_at(ranked, 10) == pytest.approx(3 / 10)  # missing items are not relevant
    assert mean_rank(ranked) == pytest.approx(10 / 3)
    assert median_rank(ranked) == 3.0
    assert median_rank([False, True, True, False]) == 2.5
    assert mean_rank([False, False]) is None and median_rank([]) is None
    with pytest.raises(ValueError):
        precision_at(ranked, 0)


def test_recall_counts_a_page_fetched_under_two_urls_once():
    m = CrawlMetrics(0.5, frozenset({"t"}))
    m.record("http://a.com/p", 0.9, frozenset({"t"}), identity="a#1")
    m.record("http://a.com/p?from=home", 0.9, frozenset({"t"}), identity="a#1")
    m.record("http://a.com/q", 0.9, frozenset({"t"}), identity="a#2")
    assert m.truth_relevant == 3 and m.truth_harvest_rate == 1.0  # every fetch was relevant
    assert m.target_recall(4) == pytest.approx(2 / 4)  # but only two distinct pages
    assert CrawlMetrics.from_state(m.state()).target_recall(4) == pytest.approx(0.5)
