"""``TOPICCRAWL_CLASSIFIER_STEER_SHARE``: with words, a second page classifier with a larger
pseudo-positive share steers the crawl (R(l)'s holder term where P is it, the link model's page
labels and holder features, the anchor judge) while the first one reports (items' P, the self-assessed harvest rate);
docs/learned.md, "A looser page classifier for the link labels". Real scoring of real HTML
responses through the crawl runtime, and one crawl with a JOBDIR resume over the web lab."""

from __future__ import annotations

import json
import logging
import pickle
from dataclasses import replace

import pytest
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from conftest import run_crawl
from topiccrawl.crawl.errors import ConfigError
from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.spiders.focused import FocusedSpider

STRONG = "台风 灾害 台风登陆 暴雨 洪水 台风预警 防台风 灾情 台风路径"
WEAK = "台风 天气 气象 降雨 出行 交通 航班 提醒 城市 市民"
OFF = "股票 基金 市场 投资 收益 银行 利率 经济 指数 财报"


def _runtime(**settings) -> TopicCrawl:
    crawler = get_crawler(FocusedSpider, {
        "TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1", "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
        "TOPICCRAWL_STRATEGY": "learned", "TOPICCRAWL_HOLDER_SCORE": "probability",
        "TOPICCRAWL_PLOT_ENABLED": False, **settings})
    crawler.spider = crawler._create_spider(topic="台风灾害")
    return TopicCrawl.for_crawler(crawler)


def _page(i: int) -> HtmlResponse:
    text = (STRONG, WEAK, WEAK, OFF, OFF, OFF, WEAK, OFF)[i % 8]
    body = (f"<html><head><title>{text[:6]}</title></head><body><p>{text} {text} 第{i}页</p>"
            f'<a href="/next/{i}.html">点此</a></body></html>')
    return HtmlResponse(f"http://www.site{i % 7}.example.cn/p/{i}.html", body=body.encode(), encoding="utf-8")


def _run(tc: TopicCrawl, n: int = 120, page=_page) -> tuple[list[float | None], list[float]]:
    """The items' reported P and the one link's score of each of ``n`` pages."""
    reported, scores = [], []
    for i in range(n):
        item, (link,) = tc.process_page(page(i), 1, None, "")
        reported.append(item.probability)
        scores.append(link.score)
    return reported, scores


def test_the_looser_classifier_steers_and_the_first_one_reports():
    """The link scores are those of a crawl whose one classifier has the larger share; the items'
    P and the self-assessment those of a crawl with today's one classifier."""
    one = {"TOPICCRAWL_CLASSIFIER_STEER_SHARE": "0"}
    today, loose = _runtime(**one), _runtime(TOPICCRAWL_CLASSIFIER_SHARE="0.2", **one)
    both = _runtime(TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.2")
    assert today.steer_focus is None and loose.steer_focus is None
    assert both.steer_focus is not None and both.steer_focus.pseudo_share == 0.2
    assert both.focus.pseudo_share == today.focus.pseudo_share == 0.03
    reported_today, scores_today = _run(today)
    reported_loose, scores_loose = _run(loose)
    reported_both, scores_both = _run(both)
    assert reported_both == reported_today
    assert scores_both == scores_loose
    # the two shares give other P and other link scores, so the test tells them apart
    assert reported_loose != reported_today and scores_loose != scores_today
    assert both.focus.expected_harvest == today.focus.expected_harvest
    assert both.steer_focus.expected_harvest == loose.focus.expected_harvest
    assert both.steer_focus.positives_used > both.focus.positives_used
    stats = both.learning_stats()
    assert stats["classifier_steer/share"] == 0.2
    assert stats["classifier_steer/pages"] == stats["classifier/pages"] == 120
    assert stats["classifier_steer/positives"] == both.steer_focus.positives_used
    assert not any(k.startswith("classifier_steer/") for k in today.learning_stats())


def test_a_topic_of_examples_only_keeps_one_classifier():
    """No words, no pseudo-positives: the two classifiers would be one."""
    tc = _runtime(TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.2")
    tc.topic = replace(tc.topic, words={})
    tc.focus = tc.steer_focus = None
    tc.add_example(STRONG.split())
    assert tc.focus is not None and tc.focus.n_examples == 1 and tc.steer_focus is None


def test_both_classifiers_are_saved_and_a_state_of_older_code_resumes_with_one():
    tc = _runtime(TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.2")
    _run(tc, 60)
    state = pickle.loads(pickle.dumps(tc.state()))
    resumed = _runtime(TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.2")
    resumed.load_state(state)
    assert resumed.steer_focus.pages == resumed.focus.pages == 60
    assert resumed.steer_focus.refits == tc.steer_focus.refits >= 1
    del state["steer_focus"]  # saved before the setting existed: the crawl goes on as it started
    older = _runtime(TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.2")
    older.load_state(state)
    assert older.steer_focus is None and older.focus.pages == 60


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_a_share_outside_zero_to_one_is_a_config_error(value):
    with pytest.raises(ConfigError, match=r"TOPICCRAWL_CLASSIFIER_STEER_SHARE must lie in \[0, 1\]"):
        _runtime(TOPICCRAWL_CLASSIFIER_STEER_SHARE=value)


def test_a_crawl_steered_by_the_looser_classifier_resumes_from_jobdir(tmp_path):
    """``scrapy crawl focused`` over the generated web: both classifiers are reported and continue
    after a JOBDIR resume."""
    job = tmp_path / "job"
    settings = {"TOPICCRAWL_WEB": "generated:zh-disaster?pages=5000&seed=11", "CONCURRENT_REQUESTS": "1",
                "TOPICCRAWL_PLOT_ENABLED": "false", "TOPICCRAWL_CLASSIFIER_STEER_SHARE": "0.1", "JOBDIR": str(job)}
    args = {"topic": "台风灾害", "strategy": "learned"}
    first, out1 = run_crawl(tmp_path / "a", args={**args, "max_pages": 200}, settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    before = json.loads((out1 / "stats.json").read_text(encoding="utf-8"))
    assert before["topiccrawl/classifier_steer/share"] == 0.1
    assert before["topiccrawl/classifier_steer/positives"] > before["topiccrawl/classifier/positives"]
    second, out2 = run_crawl(tmp_path / "b", args={**args, "max_pages": 250}, settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    after = json.loads((out2 / "stats.json").read_text(encoding="utf-8"))
    assert "resumed" in second.stderr
    assert after["topiccrawl/classifier_steer/pages"] == after["topiccrawl/classifier/pages"] == 250
    assert after["topiccrawl/classifier_steer/refits"] >= before["topiccrawl/classifier_steer/refits"]


def test_the_classifier_c_setting_reaches_the_page_classifier():
    """``TOPICCRAWL_CLASSIFIER_C``: the page classifiers (the one that reports and the one that
    steers) take it, it changes their P, and a C that is not positive is a one-line error."""
    default, strong = _runtime(), _runtime(TOPICCRAWL_CLASSIFIER_C="0.1", TOPICCRAWL_CLASSIFIER_STEER_SHARE="0.2")
    assert default.focus.classifier.C == 1.0
    assert strong.focus.classifier.C == strong.steer_focus.classifier.C == 0.1
    reported_default, _ = _run(default)
    reported_strong, _ = _run(strong)
    assert default.focus.fitted and strong.focus.fitted
    assert reported_strong != reported_default
    assert strong.learning_stats()["classifier/C"] == 0.1 and default.learning_stats()["classifier/C"] == 1.0
    for bad in ("0", "-1"):
        with pytest.raises(ConfigError, match="TOPICCRAWL_CLASSIFIER_C must be > 0"):
            _runtime(TOPICCRAWL_CLASSIFIER_C=bad)


def test_the_report_c_setting_reports_with_a_second_classifier_and_steers_as_without_it():
    """``TOPICCRAWL_CLASSIFIER_REPORT_C``: the classifier that reports (items' P, the self-assessed
    rate) takes that C; the one that steers keeps TOPICCRAWL_CLASSIFIER_C, so the link scores are
    those of a crawl without the setting, and the reported P those of a crawl with C = report C."""
    today, report = _runtime(), _runtime(TOPICCRAWL_CLASSIFIER_REPORT_C="0.1")
    strong = _runtime(TOPICCRAWL_CLASSIFIER_C="0.1")
    assert today.steer_focus is None and strong.steer_focus is None
    assert report.focus.classifier.C == 0.1 and report.steer_focus.classifier.C == 1.0
    reported_today, scores_today = _run(today)
    reported, scores = _run(report)
    reported_strong, _ = _run(strong)
    assert report.focus.fitted and report.steer_focus.fitted
    assert scores == scores_today  # steered as without the setting
    assert reported == reported_strong and reported != reported_today  # reported as with C = 0.1
    assert report.focus.expected_harvest == strong.focus.expected_harvest
    assert report.steer_focus.expected_harvest == today.focus.expected_harvest
    stats = report.learning_stats()
    assert stats["classifier/C"] == 0.1 and stats["classifier_steer/C"] == 1.0
    # the same C for both, or 0: one classifier, as today
    for same in ("1", "0"):
        assert _runtime(TOPICCRAWL_CLASSIFIER_REPORT_C=same).steer_focus is None
    with pytest.raises(ConfigError, match="TOPICCRAWL_CLASSIFIER_REPORT_C must be a C > 0, or 0"):
        _runtime(TOPICCRAWL_CLASSIFIER_REPORT_C="-1")


def test_the_estimate_setting_changes_what_is_reported_and_nothing_that_steers(caplog):
    """``TOPICCRAWL_CLASSIFIER_ESTIMATE=auc``: the links' scores and the items' P are a default
    crawl's; the self-assessed harvest rate (stats, progress line, warning) follows the rule of
    :attr:`PageFocus.expected_harvest`; a JOBDIR resume reports by the resumed run's setting."""
    def mostly_relevant(i: int) -> HtmlResponse:  # three pages in four on the topic: P's level is too low
        text = OFF if i % 4 == 3 else STRONG
        body = f'<html><body><p>{text} 第{i}页</p><a href="/next/{i}.html">点此</a></body></html>'
        return HtmlResponse(f"http://www.site{i % 7}.example.cn/p/{i}.html", body=body.encode(), encoding="utf-8")

    today, auc = _runtime(), _runtime(TOPICCRAWL_CLASSIFIER_ESTIMATE="auc")
    assert today.focus.estimate == "mean" and auc.focus.estimate == "auc"
    reported_today, scores_today = _run(today, 300, mostly_relevant)
    reported, scores = _run(auc, 300, mostly_relevant)
    assert scores == scores_today and reported == reported_today
    assert auc.focus.mean_probability == today.focus.expected_harvest
    # held-out pseudo-positives rank like the many relevant fetched pages: flagged, raised to the bound
    assert auc.focus.unreliable_reason == "auc" and auc.focus.mean_probability < auc.focus.auc_bound
    want = auc.focus.auc_bound  # measured 0.70 against the mean P's 0.47; 0.75 of the pages are relevant
    assert auc.focus.expected_harvest == want and abs(want - 0.75) < abs(auc.focus.mean_probability - 0.75)
    stats = auc.learning_stats()
    assert stats["classifier/estimate"] == "auc_bound" and stats["classifier/expected_harvest"] == pytest.approx(want, abs=1e-6)
    assert stats["classifier/mean_probability"] == pytest.approx(auc.focus.mean_probability, abs=1e-6)
    assert today.learning_stats()["classifier/estimate"] == "mean"
    # the progress line says which figure it is; the warning names it and gives the mean P beside it
    from topiccrawl.crawl.extensions import TopicStats

    assert TopicStats(auc.crawler)._classifier_estimate() == (
        f", page classifier's estimate {want:.3f} (unreliable; the held-out AUC's bound)")
    assert TopicStats(today.crawler)._classifier_estimate().endswith(f"{today.focus.expected_harvest:.3f} (unreliable)")
    with caplog.at_level(logging.WARNING, logger="topiccrawl.crawl.runtime"):
        assert auc.warn_if_unreliable() and today.warn_if_unreliable()
    bound_line, mean_line = (r.getMessage() for r in caplog.records[-2:])
    assert bound_line.startswith(f"the self-assessed harvest rate {want:.3f} (the held-out AUC's bound 2·(1 − AUC), "
                                 f"TOPICCRAWL_CLASSIFIER_ESTIMATE=auc; the mean P is {auc.focus.mean_probability:.3f}) "
                                 "is unreliable")
    assert mean_line.startswith(f"the self-assessed harvest rate {today.focus.expected_harvest:.3f} is unreliable")
    # harvest.csv names the figure of each row, and harvest.png's legend the figures plotted
    from topiccrawl.crawl.extensions import _estimate_label

    rows = {}
    for name, tc in (("auc", auc), ("today", today)):
        item, _ = tc.process_page(mostly_relevant(300), 1, None, "")
        rows[name] = tc.record(item)
        assert rows[name]["expected_harvest"] == round(tc.focus.expected_harvest, 6)
    assert auc.focus.bound_applied and rows["auc"]["estimate"] == "auc_bound" and rows["today"]["estimate"] == "mean"
    assert _estimate_label([rows["auc"]]).startswith("held-out AUC's bound")
    assert _estimate_label([rows["today"]]).startswith("mean P(relevant) (")
    assert _estimate_label([rows["today"], rows["auc"]]).startswith("mean P(relevant) or the held-out AUC's bound")
    # a crawl started under one rule and resumed under the other reports by the resumed run's, and
    # its rows say so
    resumed = _runtime()
    resumed.load_state(pickle.loads(pickle.dumps(auc.state())))
    assert resumed.focus.estimate == "mean" and resumed.focus.expected_harvest == resumed.focus.mean_probability
    item, _ = resumed.process_page(mostly_relevant(301), 1, None, "")
    assert resumed.record(item)["estimate"] == "mean"
    with pytest.raises(ConfigError, match="TOPICCRAWL_CLASSIFIER_ESTIMATE='max': expected mean or auc"):
        _runtime(TOPICCRAWL_CLASSIFIER_ESTIMATE="max")
