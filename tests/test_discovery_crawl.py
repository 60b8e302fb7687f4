"""End-to-end DWDBRM: each operator spider alone and `scrapy crawl dwdbrm`, over loopback."""

from __future__ import annotations

import json

import pytest

from conftest import run_crawl

WEB = "generated:zh-realestate?pages=8000&seed=4"
BASE = {"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false"}


def _read(out, name):
    return [json.loads(l) for l in (out / name).read_text(encoding="utf-8").splitlines()]


def test_dwdbrm_pulls_all_four_arms_and_writes_feed_and_ranking(tmp_path):
    proc, out = run_crawl(tmp_path, "dwdbrm", args={"seeds": "truth:5", "pages": 150}, settings=BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "discovery_finished"
    for op in ("KS", "RS", "FC", "BC"):
        assert stats[f"topiccrawl/dwdbrm/op/{op}/pulls"] >= 1, op
    pages = _read(out, "pages.jsonl")
    ranked = _read(out, "ranked.jsonl")
    iterations = _read(out, "iterations.jsonl")
    assert len(pages) >= 150 and len({p["url"] for p in pages}) == len(pages)
    assert {p["operator"] for p in pages} <= {"KS", "RS", "FC", "BC"}
    assert sorted(r["rank"] for r in ranked) == list(range(1, len(ranked) + 1))
    assert {"nb", "lr", "ocsvm", "cosine", "jaccard", "pagerank"} <= set(ranked[0]["positions"])
    assert [r["operator"] for r in iterations[:4]] == ["KS", "RS", "FC", "BC"]  # each arm once first
    assert all(set(r["scores"]) == {"KS", "RS", "FC", "BC"} for r in iterations)
    # ground truth: the combined ranker puts relevant pages on top of a web where most are not
    assert stats["topiccrawl/ranking/combined/p_at_17"] > stats["topiccrawl/truth/harvest_rate"]
    report = json.loads((out / "discovery.json").read_text(encoding="utf-8"))
    assert len(report["segments"]) == 5


@pytest.mark.parametrize("spider,op", [("keyword_search", "KS"), ("related_search", "RS"),
                                       ("forward", "FC"), ("backward", "BC")])
def test_each_operator_spider_alone(tmp_path, spider, op):
    proc, out = run_crawl(tmp_path, spider, args={"seeds": "truth:4", "pages": 40}, settings=BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pages = _read(out, "pages.jsonl")
    assert pages and {p["operator"] for p in pages} == {op}
    iterations = _read(out, "iterations.jsonl")
    assert {r["operator"] for r in iterations} == {op}


def test_unreachable_search_backend_is_a_clear_error_and_keeps_pages(tmp_path):
    proc, out = run_crawl(tmp_path, "dwdbrm",
                          args={"seeds": "truth:4", "pages": 60, "backend": "searxng",
                                "backend_url": "http://search.unreachable.test/search"},
                          settings=BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "search backend unreachable" in proc.stderr
    assert "dropped: the searxng search backend cannot serve RS" in proc.stderr
    pages = _read(out, "pages.jsonl")
    assert pages and {p["operator"] for p in pages} == {"FC"}  # forward crawl still works


def test_dwdbrm_bandit_state_survives_jobdir_pause_and_resume(tmp_path):
    job = tmp_path / "job"
    first, out1 = run_crawl(tmp_path / "a", "dwdbrm", args={"seeds": "truth:5", "pages": 150},
                            settings={**BASE, "JOBDIR": str(job), "CLOSESPIDER_PAGECOUNT": "90"})
    assert first.returncode == 0, first.stderr[-3000:]
    assert "closespider_pagecount" in first.stderr
    before = _read(out1, "iterations.jsonl")
    second, out2 = run_crawl(tmp_path / "b", "dwdbrm", args={"seeds": "truth:5", "pages": 150},
                             settings={**BASE, "JOBDIR": str(job)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed discovery at iteration" in second.stderr
    after = _read(out2, "iterations.jsonl")
    # the bandit log continues where it stopped: same first iterations, then more
    assert after[: len(before)] == before and len(after) > len(before)
    stats = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "discovery_finished"
    pulls = sum(stats[f"topiccrawl/dwdbrm/op/{op}/pulls"] for op in ("KS", "RS", "FC", "BC"))
    assert pulls == len(after)


def test_dwdbrm_with_extra_rankers_and_score_combination(tmp_path):
    proc, out = run_crawl(tmp_path, "dwdbrm",
                          args={"seeds": "truth:4", "pages": 40, "rankers": "cosine,jaccard,bsets",
                                "combination": "score", "alpha": "0"},
                          settings=BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranked = _read(out, "ranked.jsonl")
    assert set(ranked[0]["positions"]) == {"cosine", "jaccard", "bsets", "pagerank"}


def test_a_crawl_whose_last_iteration_emits_nothing_still_closes_as_discovery_finished(tmp_path):
    """The close reason does not depend on whether the last iteration found pages: here no seed
    can be fetched, so the first iteration already ends the crawl with nothing to emit (on Redis,
    another worker may likewise take every page of a worker's last iteration)."""
    proc, out = run_crawl(tmp_path, "dwdbrm", args={"seeds": "http://nowhere.test/missing.html", "pages": 20},
                          settings=BASE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["finish_reason"] == "discovery_finished"
    assert stats["topiccrawl/dwdbrm/finished"] == "no seed page could be fetched"
    assert not (out / "pages.jsonl").exists() or not _read(out, "pages.jsonl")
