"""The ``learned`` strategy and topics from example pages, end to end: ``scrapy crawl focused`` in a
subprocess over the web lab on real loopback HTTP."""

from __future__ import annotations

import json

from conftest import run_crawl

WEB = "generated:zh-disaster?pages=5000&seed=11"
SERIAL = {"TOPICCRAWL_WEB": WEB, "CONCURRENT_REQUESTS": "1", "TOPICCRAWL_PLOT_ENABLED": "false"}


def _stats(out):
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def _pages(out):
    return [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]


def test_learned_crawl_reports_probabilities_and_a_self_assessed_harvest(tmp_path):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "learned", "max_pages": 300},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/dp"] == 300
    assert stats["topiccrawl/learned/retrains"] >= 1 and stats["topiccrawl/classifier/refits"] >= 1
    # words only: R(l)'s holder term is R(P), which a refit does not change
    assert stats["topiccrawl/learned/holder_refreshed"] == 0
    pages = _pages(out)
    probabilities = [p["probability"] for p in pages]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in probabilities)
    assert len(set(probabilities)) > 10  # a classifier, not a constant
    # the classifier's estimate is a rate, reported next to the truth (its accuracy is benchmarked)
    assert 0.0 < stats["topiccrawl/classifier/expected_harvest"] < 1.0
    rows = (out / "harvest.csv").read_text(encoding="utf-8").splitlines()
    assert "expected_harvest" in rows[0] and rows[-1].split(",")[-1] != ""


def test_a_topic_with_examples_and_no_words_learns_its_words(tmp_path):
    topic = tmp_path / "typhoon-examples.toml"
    topic.write_text('name = "typhoon-examples"\nlanguage = "zh"\nlabels = ["topic:台风灾害"]\n', encoding="utf-8")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "examples": "truth:5",
                                          "max_pages": 200},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/examples/fetched"] == 5
    # the seeds were fetched with the examples as the words' background, and crawled as seeds after
    background = stats["topiccrawl/examples/background"]
    assert background >= 1
    assert stats["topiccrawl/dp"] == 200  # the examples and the background are fetches, not found pages
    assert sum(p["depth"] == 0 for p in _pages(out)) == background
    words = stats["topiccrawl/examples/words"]
    assert "[words]" in words and "copy them into a topic file" in proc.stderr
    # the derived words are what the user would copy: a topic file made of them loads and scores
    assert "台风" in words, words
    assert stats["topiccrawl/classifier/examples"] == 5 and stats["topiccrawl/classifier/mode"] == "pu"
    # the examples joined the anchor association as pages of known relevance, then the crawled pages
    assert stats["topiccrawl/learned/association_examples"] == 5
    assert stats["topiccrawl/learned/association_pages"] == 5 + stats["topiccrawl/learned/pages"]
    # with examples the holder term is P: the queued links followed their holders' new P at refits
    assert stats["topiccrawl/learned/holder_refreshed"] > 0
    assert stats["topiccrawl/truth/relevant"] > 0


def test_a_topic_without_words_or_examples_is_a_one_line_error(tmp_path):
    topic = tmp_path / "empty.toml"
    topic.write_text('name = "empty"\nlanguage = "en"\n', encoding="utf-8")
    proc, _ = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned"}, settings={"TOPICCRAWL_WEB": WEB})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "no [words] table" in proc.stderr and "examples" in proc.stderr


def test_learned_crawl_resumes_from_jobdir_with_its_models(tmp_path):
    job = tmp_path / "job"
    args = {"topic": "台风灾害", "strategy": "learned"}
    first, out1 = run_crawl(tmp_path / "a", args={**args, "max_pages": 250}, settings={**SERIAL, "JOBDIR": str(job)})
    assert first.returncode == 0, first.stderr[-3000:]
    before = _stats(out1)
    assert before["topiccrawl/learned/model_version"] >= 1
    second, out2 = run_crawl(tmp_path / "b", args={**args, "max_pages": 300}, settings={**SERIAL, "JOBDIR": str(job)})
    assert second.returncode == 0, second.stderr[-3000:]
    after = _stats(out2)
    assert "resumed" in second.stderr
    # the link model and the page classifier continue: versions and refits go on from the first run's
    assert after["topiccrawl/learned/model_version"] >= before["topiccrawl/learned/model_version"]
    assert after["topiccrawl/learned/pages"] == 300 and after["topiccrawl/classifier/pages"] == 300
    assert after["topiccrawl/classifier/refits"] >= before["topiccrawl/classifier/refits"]
    urls = [p["url"] for p in _pages(out1) + _pages(out2)]
    assert len(urls) == 300 and len(set(urls)) == 300


def test_anchor_association_counts_every_page_and_resumes_from_jobdir(tmp_path):
    job = tmp_path / "job"
    args = {"topic": "台风灾害", "strategy": "learned"}
    settings = {**SERIAL, "JOBDIR": str(job)}  # the association is on by default
    first, out1 = run_crawl(tmp_path / "a", args={**args, "max_pages": 150}, settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    before = _stats(out1)
    assert before["topiccrawl/learned/association_pages"] == 150 and before["topiccrawl/learned/association_terms"] > 100
    second, out2 = run_crawl(tmp_path / "b", args={**args, "max_pages": 200}, settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    after = _stats(out2)
    assert "resumed" in second.stderr
    assert after["topiccrawl/learned/association_pages"] == 200  # the statistics continue, not restart
    assert after["topiccrawl/learned/association_terms"] >= before["topiccrawl/learned/association_terms"]
    off, out3 = run_crawl(tmp_path / "c", args={**args, "max_pages": 30},
                          settings={**SERIAL, "TOPICCRAWL_LEARNED_ASSOCIATION": "off"})
    assert off.returncode == 0 and "topiccrawl/learned/association_pages" not in _stats(out3)
