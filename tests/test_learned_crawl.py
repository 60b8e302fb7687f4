"""The ``learned`` strategy and topics from example pages, end to end: ``scrapy crawl focused`` in a
subprocess over the web lab on real loopback HTTP."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, run_crawl
from topiccrawl.learning.focus import RELIABLE_AUC, RELIABLE_C, PageFocus

WEB = "generated:zh-disaster?pages=5000&seed=11"
SERIAL = {"TOPICCRAWL_WEB": WEB, "CONCURRENT_REQUESTS": "1", "TOPICCRAWL_PLOT_ENABLED": "false"}


def _stats(out):
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))


def _pages(out):
    return [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]


def test_learned_crawl_reports_probabilities_and_a_self_assessed_harvest(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # the libraries' default here, whatever the cores
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "learned", "max_pages": 300},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BLAS threads: 1 (TOPICCRAWL_BLAS_THREADS; the libraries' default: 2)" in proc.stderr
    assert "Garbage collection: a young generation of 10000 objects (TOPICCRAWL_GC_THRESHOLD" in proc.stderr
    stats = _stats(out)
    assert stats["topiccrawl/dp"] == 300
    assert stats["topiccrawl/learned/retrains"] >= 1 and stats["topiccrawl/classifier/refits"] >= 1
    assert "topiccrawl/dispatch/holds" not in stats  # eager dispatch, the default (no patient record)
    # a Chinese topic: a page's links stream in (the hold is for learned on other languages' words)
    assert stats["topiccrawl/dispatch/page_links"] == "streamed"
    # words only: R(l)'s holder term is R(P), which a refit does not change
    assert stats["topiccrawl/learned/holder_refreshed"] == 0
    pages = _pages(out)
    probabilities = [p["probability"] for p in pages]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in probabilities)
    assert len(set(probabilities)) > 10  # a classifier, not a constant
    # the classifier's estimate is a rate, reported next to the truth (its accuracy is benchmarked)
    assert 0.0 < stats["topiccrawl/classifier/expected_harvest"] < 1.0
    rows = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
    assert rows[-1]["expected_harvest"] != ""
    # each page's judgement for the audit is its P under the classifier's last model: what the
    # self-assessed rate averages (up to the few pages observed but not counted at the close)
    judged = [float(r["judged"]) for r in rows]
    assert len(set(judged)) > 10  # a probability per page, not Accuracy's R(P) ≥ β
    assert sum(judged) / len(judged) == pytest.approx(stats["topiccrawl/classifier/expected_harvest"], abs=0.03)
    assert stats["topiccrawl/audit/pages"] == 50
    # with words the estimate is flagged when the held-out pseudo-positives do not stand out, or
    # when they are a small share c of what the classifier takes for relevant (docs/learned.md)
    auc, c = stats["topiccrawl/classifier/heldout_auc"], stats["topiccrawl/classifier/c"]
    reason = "auc" if auc < RELIABLE_AUC else "c" if c < RELIABLE_C else None
    assert stats["topiccrawl/classifier/unreliable"] is (reason is not None)
    assert stats.get("topiccrawl/classifier/unreliable_reason") == reason
    assert ("is unreliable" in proc.stderr) is (reason is not None)
    assert ("of the pages it takes for relevant" in proc.stderr) is (reason == "c")
    # a topic of words only is told how to give example pages, not to give "more" of them
    assert ("give example pages beside the words (examples = [...]" in proc.stderr) is (reason is not None)
    assert "more, or more varied, example pages" not in proc.stderr


def test_a_topic_with_examples_and_no_words_learns_its_words(tmp_path):
    topic = tmp_path / "typhoon-examples.toml"
    topic.write_text('name = "typhoon-examples"\nlanguage = "zh"\nlabels = ["topic:台风灾害"]\n', encoding="utf-8")
    proc, out = run_crawl(tmp_path, args={"topic": str(topic), "strategy": "learned", "examples": "truth:5",
                                          "max_pages": 200},
                          settings={"TOPICCRAWL_WEB": WEB, "TOPICCRAWL_PLOT_ENABLED": "false",
                                    "TOPICCRAWL_DISPATCH": "auto"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/examples/fetched"] == 5
    assert "topiccrawl/dispatch/holds" not in stats  # TOPICCRAWL_DISPATCH=auto is eager with example pages
    assert stats["topiccrawl/dispatch/page_links"] == "streamed"  # and a page's links stream in
    # the seeds were fetched with the examples as the words' background, and crawled as seeds after
    background = stats["topiccrawl/examples/background"]
    assert background >= 1
    assert stats["topiccrawl/dp"] == 200  # the examples and the background are fetches, not found pages
    assert sum(p["depth"] == 0 for p in _pages(out)) == background
    words = stats["topiccrawl/examples/words"]
    assert "[words]" in words and "copy them into a topic file" in proc.stderr
    # the derived words are what the user would copy: a topic file made of them loads and scores
    assert "台风" in words, words
    from topiccrawl.scoring.topic import EXAMPLES_BETA, load_topic

    copied = tmp_path / "copied.toml"
    copied.write_text(f'name = "copied"\n{words}', encoding="utf-8")
    assert load_topic(str(copied)).beta == EXAMPLES_BETA and "台风" in load_topic(str(copied)).words
    assert stats["topiccrawl/classifier/examples"] == 5 and stats["topiccrawl/classifier/mode"] == "pu"
    # how far to trust the self-assessment: the held-out AUC, the flag, and a warning when flagged
    auc = stats["topiccrawl/classifier/heldout_auc"]
    assert 0.0 <= auc <= 1.0 and stats["topiccrawl/classifier/unreliable"] == (auc < RELIABLE_AUC)
    assert ("is unreliable" in proc.stderr) == stats["topiccrawl/classifier/unreliable"]
    # the examples joined the anchor association as pages of known relevance, then the crawled pages
    assert stats["topiccrawl/learned/association_examples"] == 5
    assert stats["topiccrawl/learned/association_pages"] == 5 + stats["topiccrawl/learned/pages"]
    # with examples the holder term is P: the queued links followed their holders' new P at refits
    assert stats["topiccrawl/learned/holder_refreshed"] > 0
    assert stats["topiccrawl/truth/relevant"] > 0
    _replay_reproduces_the_crawl(tmp_path, out, topic, stats)


def test_pages_the_examples_link_to_are_judged_in_the_anchor_association(tmp_path):
    """``TOPICCRAWL_LEARNED_EXAMPLE_LINKS``: the pages the fetched examples link to, and the links to
    them, carry one more term in the association, which judges it by those pages' R(P)."""
    topic = tmp_path / "typhoon-examples.toml"
    topic.write_text('name = "typhoon-examples"\nlanguage = "zh"\nlabels = ["topic:台风灾害"]\n', encoding="utf-8")
    args = {"topic": str(topic), "strategy": "learned", "examples": "truth:5", "max_pages": 150}
    on, out = run_crawl(tmp_path / "on", args=args, settings={**SERIAL, "TOPICCRAWL_LEARNED_EXAMPLE_LINKS": "true"})
    assert on.returncode == 0, on.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/examples/fetched"] == 5 and stats["topiccrawl/examples/links"] > 5
    fetched = stats["topiccrawl/examples/linked_pages_fetched"]
    assert 0 < fetched <= stats["topiccrawl/dp"]
    # the association judged the marker by the marked pages' R(P) against the crawl's mean (its sign
    # is the web's business; exactly 0 only if no fetched page carried it)
    assert stats["topiccrawl/learned/example_link_shift"] != 0.0
    off, out_off = run_crawl(tmp_path / "off", args=args,
                             settings={**SERIAL, "TOPICCRAWL_LEARNED_EXAMPLE_LINKS": "false"})
    assert off.returncode == 0, off.stderr[-3000:]
    stats_off = _stats(out_off)
    assert "topiccrawl/learned/example_link_shift" not in stats_off
    assert "topiccrawl/examples/linked_pages_fetched" not in stats_off


def test_the_link_priority_options_act_only_where_their_holder_term_is(tmp_path):
    """``TOPICCRAWL_LEARNED_ANCHOR_JUDGE``: with examples (P is the holder term) the page classifier
    judges the out-links' anchors once it is fitted; with words only it judges none.
    ``TOPICCRAWL_LEARNED_HOLDER_MEAN``: with words (R(P) is the holder term) queued links follow the
    pages that link to them; with examples none do. ``TOPICCRAWL_LEARNED_ANCHOR_JUDGE_REFRESH``: with
    examples the judge follows later links to queued targets and each refit; with words it never acts."""
    topic = tmp_path / "typhoon-examples.toml"
    topic.write_text('name = "typhoon-examples"\nlanguage = "zh"\nlabels = ["topic:台风灾害"]\n', encoding="utf-8")
    settings = {**SERIAL, "TOPICCRAWL_LEARNED_ANCHOR_JUDGE": "0.1", "TOPICCRAWL_LEARNED_HOLDER_MEAN": "true",
                "TOPICCRAWL_LEARNED_ANCHOR_JUDGE_REFRESH": "true"}
    proc, out = run_crawl(tmp_path / "examples", args={"topic": str(topic), "strategy": "learned",
                                                       "examples": "truth:5", "max_pages": 150}, settings=settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/classifier/refits"] >= 2 and stats["topiccrawl/learned/anchor_judged"] > 100
    assert stats["topiccrawl/learned/holders_followed"] == 0
    assert stats["topiccrawl/learned/judge_followed"] > 0 and stats["topiccrawl/learned/judge_refreshed"] > 100
    proc, out = run_crawl(tmp_path / "words", args={"topic": "台风灾害", "strategy": "learned", "max_pages": 150},
                          settings=settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert stats["topiccrawl/learned/anchor_judged"] == 0 and stats["topiccrawl/learned/holders_followed"] > 50
    assert stats["topiccrawl/learned/judge_followed"] == stats["topiccrawl/learned/judge_refreshed"] == 0


def test_the_examples_out_links_are_saved_with_the_crawl_state():
    """A JOBDIR resume does not fetch the examples again: the URLs they link to come back with the state."""
    spider = _example_spider()
    spider.tc.add_example(["台风"], links=["http://a.example.cn/1", "http://a.example.cn/2"])
    spider.tc.add_example(["股票"], counter=True, links=["http://b.example.cn/1"])  # a counter-example's do not count
    assert spider.tc.example_links == {"http://a.example.cn/1", "http://a.example.cn/2"}
    restored = _example_spider()
    restored.tc.load_state(spider.tc.state())
    assert restored.tc.example_links == spider.tc.example_links


def _replay_reproduces_the_crawl(tmp_path, out, topic, stats) -> None:
    """harvest.csv's ``observed`` gives the order the classifier saw the pages in (rows are in
    counting order); ``bench.replay_focus`` fed in that order reproduces the crawl's own P̄."""
    rows = list(csv.DictReader((out / "harvest.csv").open(encoding="utf-8")))
    assert sorted(int(r["observed"]) for r in rows) == list(range(1, stats["topiccrawl/dp"] + 1))
    bench = tmp_path / "bench"
    run = bench / "runs" / "typhoon-examples" / "learned-examples-0"
    run.mkdir(parents=True)
    shutil.copy(out / "harvest.csv", run / "harvest.csv")
    (bench / "results.json").write_text(json.dumps({
        "spec": WEB, "topics": {"typhoon-examples": str(topic)},
        "variants": {"learned-examples": {"args": ["examples=truth:5"], "words": False}}}), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "bench.replay_focus", str(bench), "--variant", "learned-examples",
                           "--examples", "--rule", "base"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("typhoon-examples learned-examples-0:"))
    errors = dict(part.strip().rsplit(" ", 1) for part in line.split(":", 1)[1].split(","))
    assert errors["crawl"] == errors["base"], line


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


# -- the examples' order --------------------------------------------------------------------------
EXAMPLE_TEXTS = ["台风 登陆 暴雨 洪水 灾情", "台风 预警 防台风 转移 群众", "台风 路径 气象台 风力 等级",
                 "洪水 决堤 救援 灾区 物资", "暴雨 内涝 停课 航班 取消"]
OTHER_TEXTS = ["股票 基金 市场 投资 收益", "银行 利率 经济 指数 财报", "足球 比赛 球队 进球 联赛",
               "电影 票房 导演 演员 上映", "手机 芯片 发布 屏幕 电池"]


def _html(url: str, text: str, request=None):
    from scrapy.http import HtmlResponse

    body = f"<html><head><title>{text[:4]}</title></head><body><p>{text} {text}</p></body></html>"
    return HtmlResponse(url, body=body.encode(), encoding="utf-8", request=request)


def _example_spider(**settings):
    from scrapy.utils.test import get_crawler

    from topiccrawl.spiders.focused import FocusedSpider

    crawler = get_crawler(FocusedSpider, {
        "TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1", "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
        "TOPICCRAWL_STRATEGY": "learned", "TOPICCRAWL_PLOT_ENABLED": False, **settings})
    urls = [f"http://ex{i}.example.cn/{i}.html" for i in range(len(EXAMPLE_TEXTS))]
    crawler.spider = crawler._create_spider(topic="台风灾害", examples=",".join(urls))
    return crawler.spider


def _probabilities(tc) -> list[float]:
    """P(relevant) of the same 60 pages (the classifier fits at the 30th)."""
    texts = EXAMPLE_TEXTS + OTHER_TEXTS * 3
    return [tc.process_page(_html(f"http://p{i % 7}.example.cn/{i}.html", texts[i % len(texts)]), 1, None, "")[0]
            .probability for i in range(60)]


def test_examples_reach_the_classifier_in_the_order_given_not_the_order_they_arrived():
    """With five examples the classifier's folds depend on the examples' order: an example page
    that answers late must not change what the crawl learns."""
    spiders = {}
    for arrival in ("given", "reversed", "shuffled"):
        spider = _example_spider()
        requests = spider._example_requests()
        examples = [r for r in requests if not r.meta.get("background")]
        assert len(examples) == 5 and len(requests) > 5  # the seeds come as the words' background
        answered = {"given": requests, "reversed": requests[::-1],
                    "shuffled": requests[2:] + requests[:2]}[arrival]
        for r in answered:
            text = EXAMPLE_TEXTS[examples.index(r)] if r in examples else OTHER_TEXTS[0]
            spider.parse_example(_html(r.url, text, request=r))
        spider._learn_from_examples()
        assert spider.tc.focus.n_examples == 5
        spiders[arrival] = spider
    given = _probabilities(spiders["given"].tc)
    assert spiders["given"].tc.focus.fitted
    assert _probabilities(spiders["reversed"].tc) == given
    assert _probabilities(spiders["shuffled"].tc) == given
    # control: the same pages given to the classifier in the reversed order train another model,
    # so the test can tell the orders apart
    control = _example_spider()
    for text in reversed(EXAMPLE_TEXTS):
        control.tc.add_example(control.tc.page_terms(_html("http://x.example.cn/", text))[1])
    assert _probabilities(control.tc) != given


def _flagged_focus(rng, flagged: bool):
    """A fitted page classifier of 8 examples and 200 fetched pages; its held-out examples rank
    like the fetched pages (``flagged``) or stand out."""
    pool = [f"w{i}" for i in range(300)]
    examples = ([rng.sample(pool, 40) for _ in range(8)] if flagged
                else [EXAMPLE_TEXTS[i % 5].split() * 3 + rng.sample(pool, 10) for i in range(8)])
    focus = PageFocus(use_words=False, min_pages=1000)
    for terms in examples:
        focus.add_example(terms)
    for _ in range(200):
        focus.observe(rng.sample(pool, 40), 0.0)
    assert focus.refit() and focus.unreliable is flagged
    return focus


def test_an_unreliable_classifier_does_not_steer_with_the_guard():
    """TOPICCRAWL_CLASSIFIER_GUARD: with examples P is R(l)'s holder term (eq. 5); while the
    classifier is flagged unreliable, R(P) is, and the page counts as guarded."""
    import random

    from scrapy.http import HtmlResponse

    body = "<html><body><p>台风 登陆 暴雨</p><a href='http://n.example.cn/1.html'>台风 预警</a></body></html>"

    def score(spider) -> float:
        page = HtmlResponse("http://p.example.cn/1.html", body=body.encode(), encoding="utf-8")
        _, (link,) = spider.tc.process_page(page, 1, None, "")
        return link.score

    by_r = score(_example_spider())  # a classifier not fitted yet: the holder term is R(P)
    scores = {}
    for guard in (True, False):
        for flagged in (True, False):
            spider = _example_spider(TOPICCRAWL_CLASSIFIER_GUARD=guard)
            spider.tc.focus = _flagged_focus(random.Random(0), flagged)
            scores[guard, flagged] = score(spider)
            steered_by_r = guard and flagged
            assert (scores[guard, flagged] == pytest.approx(by_r)) is steered_by_r  # else P: another score
            assert (spider.crawler.stats.get_value("topiccrawl/classifier/guarded_pages") == 1) is steered_by_r
    assert scores[True, False] == scores[False, False]  # a reliable classifier steers either way


def test_an_unreliable_self_assessment_is_said_in_the_log(caplog):
    """Example pages that look like every other fetched page: the held-out AUC is low, the crawl
    warns at its close (one line naming the cure); distinct examples: no warning."""
    import random

    for flagged in (True, False):
        tc = _example_spider().tc
        tc.focus = _flagged_focus(random.Random(0), flagged)
        caplog.clear()
        assert tc.warn_if_unreliable() is flagged
        assert ("is unreliable" in caplog.text) is flagged, caplog.text
        if flagged:
            assert "example pages" in caplog.text and len(caplog.records) == 1
            assert "audit.csv" in caplog.text  # and how to measure the rate instead (docs/audit.md)
    # with words as well, a small c is the other reason (its own line; docs/learned.md)
    tc = _example_spider().tc
    tc.focus = _flagged_focus(random.Random(0), False)
    tc.focus.use_words = True
    tc.focus.classifier.c_ = RELIABLE_C / 2
    caplog.clear()
    assert tc.warn_if_unreliable() and len(caplog.records) == 1
    assert "labelled positives (the example pages and pages the topic words match best)" in caplog.text
    assert f"c = {RELIABLE_C / 2:.3f} (< {RELIABLE_C:.2f})" in caplog.text and "audit.csv" in caplog.text
    # every refit discarded (held-out examples that cannot rank): no estimate, and the line says so
    rng = random.Random(0)
    pool = [f"t{i}" for i in range(10)] + [f"w{i}" for i in range(30)]
    tc.focus = PageFocus(use_words=False, min_pages=1000)
    for _ in range(5):
        tc.focus.add_example(rng.choices(pool, k=40))
    for _ in range(240):
        tc.focus.observe(rng.choices(pool, k=40), 0.0)
    assert not tc.focus.refit() and tc.focus.discarded == 1 and tc.focus.expected_harvest is None
    caplog.clear()
    assert tc.warn_if_unreliable() and len(caplog.records) == 1
    assert "no self-assessed harvest rate: each of the page classifier's 1 refits was discarded" in caplog.text


def test_asking_for_more_truth_pages_than_the_web_has_says_how_many_there_are(tmp_path):
    proc, out = run_crawl(tmp_path, args={"topic": "台风灾害", "strategy": "bfs", "seeds": "truth:100000",
                                          "max_pages": 5}, settings=SERIAL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stderr.splitlines() if "seeds=truth:100000" in x)
    stats = _stats(out)
    total = stats["topiccrawl/truth/total_relevant"]
    assert "WARNING" in line, line
    if "has only" in line:  # the pick's sample is the whole web
        assert f"has only {total} pages labelled relevant" in line and "all of them are used" in line, line
    else:  # a larger web: the line names the sample's count and the web's, never the one as the other
        n = int(line.split("hold only ")[1].split()[0])
        assert 0 < n < total and f"only {n} of its {total} pages labelled relevant" in line, line
    assert stats["topiccrawl/dp"] == 5
