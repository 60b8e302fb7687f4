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


def test_a_searxng_instance_whose_robots_txt_disallows_queries_still_answers(tmp_path):
    """SearXNG serves ``Disallow: /*?*q=*`` to crawlers; the search calls obeyed it, so every call of
    an instance the user runs was refused (search errors only, keyword search found nothing). A call
    to the search backend is an API call, not a page crawled: its robots.txt is not asked."""
    from urllib.parse import parse_qs, urlsplit

    from conftest import QuietHandler, loopback_server, reply

    page = "<html><head><title>房产 {n}</title></head><body><p>二手房 房价 楼盘 房产 {n}</p>{links}</body></html>"

    class _Searx(QuietHandler):
        def do_GET(self):
            self.server.hits.append(self.path)
            base = f"http://127.0.0.1:{self.server.server_port}"
            parts = urlsplit(self.path)
            if parts.path == "/robots.txt":  # SearXNG's own
                reply(self, 200, b"User-agent: *\nAllow: /\nDisallow: /stats\nDisallow: /*?*q=*\n", "text/plain")
            elif parts.path == "/search":
                q = parse_qs(parts.query).get("q", [""])[0]
                results = [{"url": f"{base}/p{n}", "title": f"房产 {n}", "content": q} for n in range(1, 6)]
                reply(self, 200, json.dumps({"query": q, "results": results}).encode(), "application/json")
            elif parts.path.startswith("/p") and parts.path[2:].isdigit():
                n = int(parts.path[2:])
                links = "".join(f'<a href="/p{(n + k) % 12}">房产 {k}</a>' for k in (1, 2))
                reply(self, 200, page.format(n=n, links=links).encode())
            else:
                reply(self, 404, b"")

    with loopback_server(_Searx, hits=[]) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        proc, out = run_crawl(tmp_path, "dwdbrm", args={"seeds": f"{base}/p0,{base}/p6", "pages": 10, "backend": "searxng",
                                                      "search_url": f"{base}/search"},
                              settings={"TOPICCRAWL_WEB": "live", "TOPICCRAWL_LIVE_ALLOW_HOSTS": "127.0.0.1",
                                        "TOPICCRAWL_PLOT_ENABLED": "false", "RETRY_TIMES": "0"})
        hits = list(server.hits)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert any(h.startswith("/search?q=") for h in hits), hits
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert "topiccrawl/dwdbrm/search_errors" not in stats and "robotstxt/forbidden" not in stats
    assert stats["topiccrawl/dwdbrm/op/KS/new_pages"] > 0
