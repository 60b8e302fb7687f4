"""``TOPICCRAWL_HOLDER_SCORE``: the page term of R(l) (eq. 5) is R(P), or the page classifier's
P(relevant) once it is fitted (docs/learned.md); ``TOPICCRAWL_ASSOCIATION_SCORE``: the anchor
association's page score follows it. Real scoring of real HTML responses through the
crawl runtime; no web lab is needed to score pages."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from topiccrawl.crawl.errors import ConfigError
from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.spiders.focused import FocusedSpider

ON_TOPIC = "台风 灾害 台风登陆 暴雨 洪水 台风预警 防台风 灾情 台风路径"
OFF_TOPIC = "股票 基金 市场 投资 收益 银行 利率 经济 指数 财报"


def _runtime(mode: str, strategy: str = "bestfirst", **settings) -> TopicCrawl:
    crawler = get_crawler(FocusedSpider, {
        "TOPICCRAWL_WEB": "generated:zh-disaster?pages=1000&seed=1", "TOPICCRAWL_WEB_PROXY": "http://127.0.0.1:9",
        "TOPICCRAWL_STRATEGY": strategy, "TOPICCRAWL_CLASSIFIER": "on", "TOPICCRAWL_HOLDER_SCORE": mode,
        "TOPICCRAWL_PLOT_ENABLED": False, **settings})
    crawler.spider = crawler._create_spider(topic="台风灾害")
    return TopicCrawl.for_crawler(crawler)


def _page(i: int, text: str) -> HtmlResponse:
    # one out-link whose anchor holds no topic word: its R(l) is (1 - ∂)·(the page term)
    body = (f"<html><head><title>{text[:6]}</title></head><body><p>{text} {text}</p>"
            f'<a href="/next/{i}.html">点此</a></body></html>')
    return HtmlResponse(f"http://www.site{i % 7}.example.cn/p/{i}.html", body=body.encode(), encoding="utf-8")


def test_the_link_score_uses_the_chosen_page_term():
    """Two crawls see the same pages: their link scores agree until the classifier fits, then
    differ by exactly (1 − ∂)·(P − R(P))."""
    by_r, by_p = _runtime("relevance"), _runtime("probability")
    w = 1.0 - by_r.config.anchor_weight
    fitted_at, largest = None, 0.0
    for i in range(60):
        page = _page(i, ON_TOPIC if i % 5 == 0 else OFF_TOPIC)
        (item_r, (link_r,)), (item_p, (link_p,)) = by_r.process_page(page, 1, None, ""), by_p.process_page(page, 1, None, "")
        assert item_r.probability == item_p.probability and item_r.relevance == item_p.relevance
        if not by_p.focus.fitted:
            assert link_p.score == link_r.score
            continue
        fitted_at = fitted_at if fitted_at is not None else i
        assert link_p.score - link_r.score == pytest.approx(w * (item_p.probability - item_p.relevance), abs=1e-5)
        largest = max(largest, abs(link_p.score - link_r.score))
    assert fitted_at is not None and fitted_at < 59  # the classifier fitted during the run
    assert largest > 0.05  # the two page terms differ on these pages, so the test tells the modes apart


def _scores(tc: TopicCrawl, examples: int) -> list[float]:
    for _ in range(examples):
        tc.focus.add_example(ON_TOPIC.split())
    return [tc.process_page(_page(i, ON_TOPIC if i % 5 == 0 else OFF_TOPIC), 1, None, "")[1][0].score
            for i in range(60)]


def test_auto_is_the_probability_for_learned_with_example_pages_and_the_relevance_otherwise():
    for examples, same_as in ((3, "probability"), (0, "relevance")):
        auto = _scores(_runtime("auto", "learned"), examples)
        assert auto == _scores(_runtime(same_as, "learned"), examples), (examples, same_as)
        other = "relevance" if same_as == "probability" else "probability"
        assert auto != _scores(_runtime(other, "learned"), examples), (examples, other)
    # another strategy keeps R(P) even with examples
    assert _scores(_runtime("auto"), 3) == _scores(_runtime("relevance"), 3)


def test_an_unknown_holder_score_is_a_config_error():
    with pytest.raises(ConfigError, match="TOPICCRAWL_HOLDER_SCORE"):
        _runtime("both")
    with pytest.raises(ConfigError, match="TOPICCRAWL_ASSOCIATION_SCORE"):
        _runtime("auto", "learned", TOPICCRAWL_ASSOCIATION_SCORE="probability")


def _association_scores(examples: int, **settings) -> list[tuple[float, float, float, bool]]:
    """(R(P), P, the score the anchor association was handed, classifier fitted) of 60 pages of a
    ``learned`` crawl (``TOPICCRAWL_HOLDER_SCORE=auto``) with ``examples`` example pages."""
    tc = _runtime("auto", "learned", **settings)
    handed: list[float] = []
    tc._observe = lambda url, probability, best, anchors, depth, terms, relevance, *_, **__: handed.append(relevance)
    for _ in range(examples):
        tc.focus.add_example(ON_TOPIC.split())
    out = []
    for i in range(60):
        item, _ = tc.process_page(_page(i, ON_TOPIC if i % 5 == 0 else OFF_TOPIC), 1, None, "")
        out.append((item.relevance, item.probability, handed[-1], tc.focus.fitted))
    return out


def test_the_association_judges_pages_by_the_holder_term():
    """``TOPICCRAWL_ASSOCIATION_SCORE``: ``holder`` (the default) hands the association P where P is
    R(l)'s holder term (examples, once fitted) and R(P) otherwise; ``relevance`` always R(P)."""
    with_examples = _association_scores(3)
    assert _runtime("auto", "learned").config.association_score == "holder"
    fitted = [row for row in with_examples if row[3]]
    assert fitted and len(fitted) < len(with_examples)  # it fitted during the run, not at once
    for relevance, probability, handed, is_fitted in with_examples:
        assert handed == pytest.approx(probability if is_fitted else relevance, abs=1e-5)
    assert max(abs(p - r) for r, p, _, _ in fitted) > 0.05  # P and R(P) differ: the check tells them apart
    for relevance, _, handed, _ in _association_scores(3, TOPICCRAWL_ASSOCIATION_SCORE="relevance"):
        assert handed == pytest.approx(relevance, abs=1e-5)
    for relevance, _, handed, _ in _association_scores(0):  # words only: the holder term is R(P)
        assert handed == pytest.approx(relevance, abs=1e-5)


def test_the_focused_spider_weighs_the_anchor_at_0_7_and_wl_keeps_the_paper_s_0_3():
    from scrapy.settings import Settings

    from topiccrawl.spiders.wl import WLSpider

    assert _runtime("relevance").config.anchor_weight == 0.7  # through a crawler's settings
    for spider, expected in ((FocusedSpider, 0.7), (WLSpider, 0.3)):
        settings = Settings()
        spider.update_settings(settings)
        assert settings.getfloat("TOPICCRAWL_ANCHOR_WEIGHT") == expected
    settings = Settings()
    settings.set("TOPICCRAWL_ANCHOR_WEIGHT", 0.3, priority="cmdline")  # scrapy crawl focused -s ...
    FocusedSpider.update_settings(settings)
    assert settings.getfloat("TOPICCRAWL_ANCHOR_WEIGHT") == 0.3
