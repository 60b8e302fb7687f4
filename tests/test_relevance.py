"""Relevance: TF-IDF (eq. 3), VSM cosine (eq. 4), link relevance (eq. 5), hand-computed."""

from __future__ import annotations

import math
import pickle

import pytest

from topiccrawl.scoring.relevance import IDF_FLOOR, DocumentFrequencies, RelevanceScorer, cosine, tfidf_vector
from topiccrawl.scoring.text import tokenize
from topiccrawl.scoring.topic import load_topic

RAIN = {"暴雨": 0.8, "气象": 0.1, "天气": 0.1, "灾害": 0.5, "预防": 0.3}  # |RAIN| = 1


def ten_docs() -> DocumentFrequencies:
    """D = 10; 暴雨 in 4 documents, 灾害 in 1, 城市 in none."""
    df = DocumentFrequencies()
    for doc in [["暴雨", "交通"], ["暴雨"], ["暴雨", "灾害"], ["暴雨", "暴雨"]] + [["交通"]] * 6:
        df.add(doc)
    return df


PAGE = ["暴雨", "暴雨", "灾害", "城市"]  # n = 2, 1, 1 of Σ 4


def test_document_frequencies_count_each_document_once():
    df = ten_docs()
    assert (df.n_docs, df.df("暴雨"), df.df("灾害"), df.df("城市"), df.df("交通")) == (10, 4, 1, 0, 7)


def test_tfidf_eq3_by_hand():
    w = tfidf_vector(PAGE, ten_docs())
    assert w["暴雨"] == pytest.approx(2 / 4 * math.log10(10 / 5))    # 0.150515
    assert w["灾害"] == pytest.approx(1 / 4 * math.log10(10 / 2))    # 0.174743
    assert w["城市"] == pytest.approx(1 / 4 * math.log10(10 / 1))    # 0.25
    assert tfidf_vector(PAGE, ten_docs(), vocabulary=RAIN).keys() == {"暴雨", "灾害"}
    assert tfidf_vector([], ten_docs()) == {}


def test_idf_guard_when_lg_is_not_positive():
    df = DocumentFrequencies()
    assert df.idf("暴雨") == IDF_FLOOR  # D = 0: no logarithm
    df.add(["暴雨"])
    assert math.log10(1 / 2) < 0 and df.idf("暴雨") == IDF_FLOOR
    for _ in range(9):
        df.add(["暴雨"])
    df.add(["交通"])  # D = 11, D_i = 10: lg(11/11) = 0
    assert df.idf("暴雨") == IDF_FLOOR
    assert df.idf("交通") == pytest.approx(math.log10(11 / 2))


def test_cosine_eq4():
    assert cosine({"x": 1, "y": 2}, {"y": 3, "z": 4}) == pytest.approx(6 / (math.sqrt(5) * 5))
    assert cosine({"x": 1}, {"x": 7}) == pytest.approx(1.0)
    assert cosine({}, {"x": 1}) == 0.0 and cosine({"x": 1}, {"y": 1}) == 0.0


def test_page_relevance_restricted_to_topic_words_by_hand():
    topic = load_topic("暴雨灾害")
    scorer = RelevanceScorer(topic, ten_docs())
    b, z = 2 / 4 * math.log10(10 / 5), 1 / 4 * math.log10(10 / 2)
    expected = (0.8 * b + 0.5 * z) / (math.hypot(b, z) * 1.0)         # 0.9009
    assert scorer.page_relevance(PAGE, update_df=False) == pytest.approx(expected)
    assert expected >= topic.beta


def test_page_relevance_full_vector_option_by_hand():
    scorer = RelevanceScorer(load_topic("暴雨灾害"), ten_docs(), restrict_to_topic=False)
    b, z, c = 2 / 4 * math.log10(10 / 5), 1 / 4 * math.log10(10 / 2), 1 / 4
    expected = (0.8 * b + 0.5 * z) / math.sqrt(b * b + z * z + c * c)  # 0.6109
    assert scorer.page_relevance(PAGE, update_df=False) == pytest.approx(expected)


def test_incremental_df_while_crawling():
    scorer = RelevanceScorer(load_topic("暴雨灾害"))
    # page 1: D = 1, all IDFs floored -> plain term frequencies
    assert scorer.page_relevance(["暴雨", "灾害", "城市"]) == pytest.approx(1.3 / math.sqrt(2))
    # page 2: only 暴雨 among the topic words
    assert scorer.page_relevance(["暴雨", "交通", "交通"]) == pytest.approx(0.8)
    # page 3: D = 3; 灾害 in 2 pages (lg 1 = 0 -> floor), 预防 in 1 (lg 1.5)
    z, p = 0.5 * IDF_FLOOR, 0.5 * math.log10(3 / 2)
    assert scorer.page_relevance(["灾害", "预防"]) == pytest.approx(
        (0.5 * z + 0.3 * p) / math.hypot(z, p))
    assert (scorer.df.n_docs, scorer.df.df("暴雨"), scorer.df.df("灾害")) == (3, 2, 2)
    with pytest.raises(KeyError):  # the default DF only tracks the topic words
        scorer.df.df("城市")


def test_beta_separates_on_topic_from_passing_mentions():
    topic = load_topic("暴雨灾害")
    scorer = RelevanceScorer(topic, ten_docs())
    assert scorer.page_relevance(["暴雨", "暴雨", "灾害", "预防"], update_df=False) >= topic.beta
    assert scorer.page_relevance(["天气", "晴朗", "气温", "灾害"], update_df=False) < topic.beta
    assert scorer.page_relevance(["股票", "基金"], update_df=False) == 0.0
    assert scorer.page_relevance([], update_df=False) == 0.0


def test_anchor_relevance_uses_term_frequencies():
    topic = load_topic("暴雨灾害")
    assert RelevanceScorer(topic).anchor_relevance("暴雨 暴雨 预防 城市 交通") == pytest.approx(
        (2 * 0.8 + 0.3) / math.sqrt(5))
    full = RelevanceScorer(topic, restrict_to_topic=False)
    assert full.anchor_relevance("暴雨 暴雨 预防 城市 交通") == pytest.approx(
        (2 * 0.8 + 0.3) / math.sqrt(4 + 1 + 1 + 1))
    assert RelevanceScorer(topic).anchor_relevance("") == 0.0


def test_link_relevance_eq5():
    scorer = RelevanceScorer(load_topic("台风灾害"))
    assert scorer.link_relevance(0.8, 0.5) == pytest.approx(0.3 * 0.8 + 0.7 * 0.5)
    half = RelevanceScorer(load_topic("台风灾害"), anchor_weight=0.5)
    assert half.link_relevance(1.0, 0.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="anchor_weight"):
        RelevanceScorer(load_topic("台风灾害"), anchor_weight=1.3)


def test_english_topic_scores_english_pages():
    topic = load_topic("weather-en")
    scorer = RelevanceScorer(topic)
    storm = tokenize("Hurricane Katrina was a storm. The hurricane made landfall; flooding followed.")
    assert scorer.page_relevance(storm) > scorer.page_relevance(tokenize("The weather in Paris"))


def test_state_round_trip_through_pickle():
    topic = load_topic("暴雨灾害")
    scorer = RelevanceScorer(topic, anchor_weight=0.4)
    for page in (["暴雨", "灾害"], ["天气"], ["暴雨", "预防", "预防"]):
        scorer.page_relevance(page)
    restored = RelevanceScorer.from_state(pickle.loads(pickle.dumps(scorer.state())), topic)
    assert restored.state() == scorer.state()
    nxt = ["暴雨", "天气", "灾害", "灾害"]
    assert restored.page_relevance(nxt) == scorer.page_relevance(nxt)
    assert restored.anchor_weight == 0.4 and restored.df.n_docs == 4
