"""DWDBRM's pure parts: rankers, the combined position (eq. 8), rewards (eqs. 9–10), UCB1
(eq. 11), keyword queries and operator planning."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from topiccrawl.discovery.bandit import UCB1Bandit, operator_reward
from topiccrawl.discovery.pages import DiscoveredPage, DWDBRMError, PageVectorizer, build_vocabulary
from topiccrawl.discovery.planner import DiscoveryPlanner, KeywordQueries, description_terms
from topiccrawl.discovery.rankers import DEFAULT_RANKERS, RANKERS, CombinedFunctionRank, combine_positions, positions
from topiccrawl.discovery.search import LocalSearchBackend, SearchResult, SearXNGBackend
from topiccrawl.scoring.metrics import mean_rank, precision_at
from topiccrawl.scoring.text import Anchor, Extracted

HOUSING = ["apartment mortgage housing market buyers property prices rent",
           "housing prices rise as buyers seek apartment mortgage deals",
           "property developers sell apartment units; mortgage rates and housing demand",
           "rent or buy: housing market guide for apartment buyers and property owners"]
NEW_HOUSING = ["mortgage rates fall, apartment buyers return to the housing market",
               "property prices and rent in the housing market this spring",
               "new apartment property listings for buyers; mortgage advice"]
COOKING = ["fresh pasta recipe: knead flour eggs and roll dough",
           "bake sourdough bread with flour water salt",
           "football league results: the striker scored twice",
           "weather forecast: sunny with light wind and rain later"]
TOPIC = ("housing", "apartment")


def pg(url: str, text: str, **kw) -> DiscoveredPage:
    return DiscoveredPage(url, title=text.split(":")[0][:30], text=text, **kw)


def background(n: int = 40) -> list[DiscoveredPage]:
    words = "market prices pasta flour bread football league weather sunny wind music concert film actor " \
            "garden flowers travel hotel beach phone battery camera".split()
    rng = np.random.default_rng(1)
    return [pg(f"http://bg{i}.test/page/{i}.html", " ".join(rng.choice(words, 12)))
            for i in range(n)]


SEEDS = [pg(f"http://home{i}.test/news/{i}.html", t) for i, t in enumerate(HOUSING)]
GOOD = [pg(f"http://estate{i}.test/news/{i}.html", t) for i, t in enumerate(NEW_HOUSING)]
BAD = [pg(f"http://other{i}.test/news/{i}.html", t) for i, t in enumerate(COOKING)]


@pytest.fixture(scope="module")
def cfr():
    return CombinedFunctionRank(topic_words=TOPIC).fit(SEEDS, background())


@pytest.mark.parametrize("name", sorted(RANKERS))
def test_each_ranker_puts_seed_like_pages_above_off_topic(cfr, name):
    fs = cfr.vectorizer_.transform(GOOD + BAD)
    train = cfr.vectorizer_.transform(SEEDS + background())
    y = np.r_[np.ones(len(SEEDS)), np.zeros(40)].astype(int)
    ranker = RANKERS[name]()
    scores = ranker.fit(ranker.features(train), y).decision_function(ranker.features(fs))
    assert scores.shape == (len(GOOD) + len(BAD),)
    assert scores[:len(GOOD)].min() > scores[len(GOOD):].max(), (name, scores)


def test_rankers_follow_sklearn_conventions():
    for cls in RANKERS.values():
        est = cls()
        assert isinstance(est.get_params(), dict)
        assert est.set_params(**est.get_params()) is est
    assert CombinedFunctionRank(alpha=0.3).get_params()["alpha"] == 0.3


def test_jaccard_and_cosine_values_by_hand():
    vec = PageVectorizer(["a1", "b2", "c3"])
    seeds = vec.transform([pg("http://s.test/1", "a1 a1 b2"), pg("http://s.test/2", "c3")])
    x = vec.transform([pg("http://x.test/", "a1 c3")])
    jac = RANKERS["jaccard"]().fit(seeds.binary)
    # |{a1,c3} ∩ {a1,b2}| / |∪| = 1/3 and |{a1,c3} ∩ {c3}| / |∪| = 1/2, mean (eq. 3) 5/12
    assert jac.decision_function(x.binary)[0] == pytest.approx(5 / 12)
    cos = RANKERS["cosine"]()
    cos.fit(cos.features(seeds))
    # cos((1,0,1), (2,1,0)) = 2/(√2·√5), cos((1,0,1), (0,0,1)) = 1/√2
    expected = (2 / (math.sqrt(2) * math.sqrt(5)) + 1 / math.sqrt(2)) / 2
    assert cos.decision_function(cos.features(x))[0] == pytest.approx(expected)


def test_combined_position_formula_by_hand():
    # three pages, two rankers: positions (1, 2, 3) and (3, 1, 2); PageRank positions (2, 3, 1)
    f = [positions([0.9, 0.5, 0.1]), positions([0.0, 0.8, 0.4])]
    assert f[0].tolist() == [1, 2, 3] and f[1].tolist() == [3, 1, 2]
    r = positions([1.0, 0.5, 2.0])
    got = combine_positions(f, r, alpha=0.2)
    # page 0: 0.8·(1+3)/2 + 0.2·2 = 2.0; page 1: 0.8·1.5 + 0.2·3 = 1.8; page 2: 0.8·2.5 + 0.2 = 2.2
    assert got.tolist() == pytest.approx([2.0, 1.8, 2.2])
    assert positions([5, 5, 1]).tolist() == [1.5, 1.5, 3]  # ties share the mean position


def test_rank_orders_pages_and_reports_positions(cfr):
    hub = pg("http://hub.test/", "links", outlinks=[p.url for p in GOOD])
    ranking = cfr.rank(BAD + GOOD + [hub, GOOD[0]])  # a repeated URL is ranked once
    assert len(ranking) == len(BAD) + len(GOOD) + 1
    relevant = [url in {p.url for p in GOOD} for url in ranking.urls]
    assert precision_at(relevant, len(GOOD)) == 1.0
    assert mean_rank(relevant) == 2.0
    first = ranking[0]
    assert set(first.positions) == {*DEFAULT_RANKERS, "pagerank"}
    assert [p.rank for p in ranking] == list(range(1, len(ranking) + 1))
    assert [p.score for p in ranking] == sorted(p.score for p in ranking)
    for p in ranking:
        f = np.mean([p.positions[n] for n in DEFAULT_RANKERS])
        assert p.score == pytest.approx(0.8 * f + 0.2 * p.positions["pagerank"])
    # the pages the hub links to hold the top PageRank positions
    assert {ranking[ranking.position(u) - 1].positions["pagerank"] for u in
            (p.url for p in GOOD)} == {2.0}
    assert ranking.top(2) == ranking.urls[:2]


def test_score_combination_and_vectorizer_cache(cfr):
    tokenised = len(cfr.vectorizer_)
    scored = CombinedFunctionRank(topic_words=TOPIC, combination="score").fit(SEEDS, background())
    ranking = scored.rank(GOOD + BAD)
    assert set(ranking.top(len(GOOD))) == {p.url for p in GOOD}
    assert all(0.0 <= p.score <= 1.0 for p in ranking)
    cfr.rank(GOOD + BAD)
    after_first = len(cfr.vectorizer_)
    assert after_first <= tokenised + len(GOOD + BAD)
    cfr.rank(GOOD + BAD)
    assert len(cfr.vectorizer_) == after_first  # known pages are not tokenised again


def test_vocabulary_holds_topic_words_and_seed_terms():
    vocab = build_vocabulary(SEEDS, ["Housing", "楼盘"], background(), n_terms=5)
    assert vocab[:2] == ["housing", "楼盘"]
    assert len(vocab) <= 7 and {"apartment", "mortgage"} <= set(vocab)
    assert not {"pasta", "football"} & set(vocab)


def test_errors_are_one_liners():
    with pytest.raises(DWDBRMError, match="nb, lr need background pages"):
        CombinedFunctionRank().fit(SEEDS)
    with pytest.raises(DWDBRMError, match="unknown ranker 'svm'"):
        CombinedFunctionRank(rankers=("svm",)).fit(SEEDS)
    with pytest.raises(DWDBRMError, match="not fitted"):
        CombinedFunctionRank().rank(GOOD)
    with pytest.raises(DWDBRMError, match="no seed pages"):
        CombinedFunctionRank(rankers=("cosine",)).fit([])
    # without background the unsupervised rankers still work
    ranking = CombinedFunctionRank(rankers=("ocsvm", "cosine", "jaccard")).fit(SEEDS).rank(GOOD + BAD)
    assert set(ranking.top(3)) == {p.url for p in GOOD}


# -- rewards -----------------------------------------------------------------------------------

RANKED = ["http://a.test/1", "http://b.test/1", "http://a.test/2", "http://c.test/1",
          "http://d.test/1"]


def test_paper_reward_by_hand():
    previous = ["http://a.test/1", "http://d.test/1"]
    found = ["http://b.test/1", "http://a.test/1", "http://c.test/1", "http://x.test/"]
    # new and ranked: b (pos 2) and c (pos 4): (1 − 2/5) + (1 − 4/5) = 0.8; a is old, x unranked
    assert operator_reward(RANKED, previous, found) == pytest.approx(0.8 / 5)
    assert operator_reward(RANKED, previous, found, k=2) == pytest.approx(0.8 / 2)
    assert operator_reward(RANKED, RANKED, found) == 0.0
    assert operator_reward([], [], found) == 0.0


def test_disco_reward_counts_new_hosts_once():
    previous = ["http://a.test/1"]
    found = ["http://a.test/2", "http://b.test/1", "http://c.test/1", "http://c.test/9"]
    # host ranking a, b, c, d (H = 4); a is known; b at 2 and c at 3: (0.5 + 0.25) / 4
    assert operator_reward(RANKED, previous, found, "disco") == pytest.approx(0.75 / 4)
    with pytest.raises(DWDBRMError, match="reward variant"):
        operator_reward(RANKED, previous, found, "best")


# -- UCB1 --------------------------------------------------------------------------------------

def test_ucb1_plays_every_arm_once_then_follows_eq_11():
    bandit = UCB1Bandit()
    rewards = {"KS": 0.5, "RS": 0.1, "FC": 0.3, "BC": 0.2}
    order = []
    for _ in range(4):
        op = bandit.select()
        order.append(op)
        bandit.update(op, rewards[op])
    assert order == ["KS", "RS", "FC", "BC"]  # unplayed arms tie at +inf: listed order
    scores = bandit.scores()
    bonus = math.sqrt(2 * math.log(4) / 1)
    assert scores == {op: pytest.approx(r + bonus) for op, r in rewards.items()}
    assert bandit.select() == "KS"
    record = bandit.update("KS", 0.0, seeds=["http://s/"], new_pages=["http://n/"])
    assert record.iteration == 5 and record.scores["KS"] == pytest.approx(0.5 + bonus)
    assert bandit.mean("KS") == 0.25
    # n = 5, KS played twice: 0.25 + √(2 ln 5 / 2); FC once: 0.3 + √(2 ln 5)
    assert bandit.scores()["KS"] == pytest.approx(0.25 + math.sqrt(math.log(5)))
    assert bandit.select() == "FC"


def test_ucb1_ties_and_drops_and_state():
    bandit = UCB1Bandit()
    for op in ("KS", "RS", "FC", "BC"):
        bandit.update(op, 0.5)
    assert bandit.select() == "KS"  # all equal: first listed
    bandit.drop("KS", "no keywords left")
    assert bandit.select() == "RS" and "KS" not in bandit.scores()
    with pytest.raises(DWDBRMError, match="KS was dropped: no keywords left"):
        bandit.update("KS", 1.0)
    restored = UCB1Bandit.from_state(pickle.loads(pickle.dumps(bandit.state())))
    assert restored.state() == bandit.state() and restored.select() == "RS"
    for op in ("RS", "FC", "BC"):
        bandit.drop(op, "gone")
    with pytest.raises(DWDBRMError, match="no discovery operator left"):
        bandit.select()


def test_bandit_for_keyword_only_backend_drops_rs_and_bc():
    bandit = UCB1Bandit.for_backend(SearXNGBackend("http://searx.test"))
    assert bandit.active == ["KS", "FC"]
    assert "searxng search backend cannot serve RS" in bandit.dropped["RS"]


# -- keyword queries and planning --------------------------------------------------------------

def test_keyword_queries_chinese():
    queries = KeywordQueries({"楼盘": 0.6, "房地产": 0.8}, "房地产产品物业沈阳售卖", per_call=4)
    assert queries.description == ["房地产", "产品", "物业", "沈阳", "售卖"]
    assert queries.next() == ["房地产", "楼盘"]  # first: topic words by weight
    top = [DiscoveredPage("http://a.cn/", keywords=["二手房", "学区房"], description="二手房 交易"),
           DiscoveredPage("http://b.cn/", keywords=["二手房"], description="房地产 开发")]
    assert queries.next(top) == ["二手房 房地产", "二手房 产品", "二手房 物业", "二手房 沈阳"]
    assert queries.next(top)[:2] == ["二手房 售卖", "学区房 房地产"]
    while queries.next(top):
        pass
    assert len(queries.used) == len(set(queries.used)) > 10  # never repeated


def test_keyword_queries_english_fall_back_to_topic_words():
    queries = KeywordQueries(["housing", "mortgage", "rent"], description_terms("Property sales"),
                             per_call=2)
    assert queries.next() == ["housing", "mortgage"]
    assert queries.next([]) == ["rent", "housing property"]
    top = [DiscoveredPage("http://a/", keywords=["Condo"], description="condo listings")]
    assert queries.next(top) == ["condo property", "condo sales"]
    again = KeywordQueries(["housing", "mortgage", "rent"], "property sales", per_call=2)
    again.restore(queries.state())
    assert again.next(top) == queries.next(top) == ["listings property", "listings sales"]


def test_planner_builds_search_and_page_requests():
    backend = LocalSearchBackend()
    planner = DiscoveryPlanner(backend, KeywordQueries(["房产"], "物业"), links_per_page=2,
                               links_per_host=2)
    top = [DiscoveredPage("http://a.cn/1", outlinks=["http://a.cn/1", "http://b.cn/1",
                                                     "http://b.cn/2", "http://b.cn/3"]),
           DiscoveredPage("http://c.cn/1", outlinks=["http://b.cn/4", "http://d.cn/1",
                                                     "mailto:x@y.cn", "http://e.cn/1"])]
    ks = planner.plan("KS", top)
    assert [(r.role, r.source) for r in ks] == [("search", "房产")]
    assert ks[0].url == backend.search_url("房产")
    rs = planner.plan("RS", top)
    assert [r.source for r in rs] == ["related:http://a.cn/1", "related:http://c.cn/1"]
    assert planner.plan("RS", top) == []  # issued already
    fc = planner.plan("FC", top, known={"http://d.cn/1"})
    # per page 2 links; the self-link, the known URL and a third b.cn link are skipped
    assert [r.url for r in fc] == ["http://b.cn/1", "http://b.cn/2", "http://e.cn/1"]
    assert {r.role for r in fc} == {"page"}
    bc = planner.plan("BC", top[:1])
    hubs = planner.follow(bc[0], [SearchResult("http://hub.cn/"), SearchResult("http://a.cn/1")],
                          known={"http://a.cn/1"})
    assert [(h.url, h.role, h.operator) for h in hubs] == [("http://hub.cn/", "hub", "BC")]
    hub = DiscoveredPage("http://hub.cn/", outlinks=["http://f.cn/1"])
    assert [(r.url, r.role, r.source) for r in planner.expand_hub(hub)] == \
        [("http://f.cn/1", "page", "http://hub.cn/")]
    pages = planner.follow(ks[0], [SearchResult("http://g.cn/")])
    assert [(p.url, p.role, p.operator) for p in pages] == [("http://g.cn/", "page", "KS")]
    keyword_only = DiscoveryPlanner(SearXNGBackend("http://searx.test"), KeywordQueries(["x"]))
    with pytest.raises(DWDBRMError, match="searxng search backend cannot serve BC"):
        keyword_only.plan("BC", top)


def test_from_extracted():
    ext = Extracted("T", "body", ["k1"], "desc", "en",
                    [Anchor("http://a/", "", ""), Anchor("http://a/", "", ""), Anchor("http://b/", "", "")])
    page = DiscoveredPage.from_extracted("http://p/", ext, "KS", 3)
    assert page.outlinks == ("http://a/", "http://b/") and page.iteration == 3
    assert page.document() == "T k1 desc body"
