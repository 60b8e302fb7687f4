"""Options of ``learned``'s link priorities: the page classifier's judgement of anchors and their
context (docs/learned.md, "The page classifier judges the words around the anchor"; on by default
in memory since "The anchor judge kept current", which keeps it current), and the mean of every
holder's R(P) ("Every holder's R(P) in R(l), with words"; off by default)."""

import pickle
import random

import numpy as np
import pytest

from topiccrawl.learning.anchorjudge import AnchorJudge, context_words
from topiccrawl.learning.classifier import PageClassifier, hash_short, hash_terms
from topiccrawl.learning.linkvalue import LinkFeatures, url_tokens
from topiccrawl.strategies.base import FrontierError, Link
from topiccrawl.strategies.learned import make_learned

ON = ["ocean", "whale", "reef", "coral", "tide", "dolphin", "kelp", "shark"]
OFF = ["senate", "court", "law", "vote", "tax", "party", "budget", "judge"]


def pages(words, n, rng, k=30):
    return [[rng.choice(words) for _ in range(k)] + [rng.choice(ON + OFF) for _ in range(5)] for _ in range(n)]


@pytest.fixture(scope="module")
def classifier():
    rng = random.Random(3)
    positives = pages(ON, 8, rng)
    unlabeled = pages(ON, 15, rng) + pages(OFF, 60, rng)
    return PageClassifier(random_state=0).refit(hash_terms(positives), hash_terms(unlabeled))


def test_short_lists_hash_to_the_same_matrix_as_pages():
    rng = random.Random(5)
    docs = [[rng.choice(ON + OFF + ["x", "y"]) for _ in range(rng.randrange(0, 9))] for _ in range(200)]
    a, b = hash_short(docs), hash_terms(docs)
    assert a.shape == b.shape and (a != b).nnz == 0
    assert hash_short([]).shape == (0, 2**18)


def test_decision_function_orders_pages_as_the_probability_does(classifier):
    rng = random.Random(7)
    X = hash_terms(pages(ON, 20, rng) + pages(OFF, 20, rng))
    z, p = classifier.decision_function(X), classifier.predict_proba(X)[:, 1]
    assert z.shape == (40,) and z[:20].min() > z[20:].max()
    order = np.argsort(z)
    assert np.all(np.diff(p[order]) >= -1e-12)  # P rises with z


def test_context_words_are_the_classifiers_latin_terms():
    assert context_words("The Whale and the reef, 2020 a 台风 灾害") == ["whale", "reef", "2020"]


def test_shifts_are_standardised_per_fit_and_empty_lists_get_none(classifier):
    judge = AnchorJudge(0.1, reference=500)
    rng = random.Random(9)
    docs = [rng.sample(ON + OFF, 3) for _ in range(300)]
    shifts = judge.shifts(classifier, 1, [*docs, []])
    assert shifts[-1] == 0.0 and judge.judged == 300
    assert np.mean(shifts[:-1]) == pytest.approx(0.0, abs=1e-9)  # the first call is its own reference
    assert np.std(shifts[:-1]) == pytest.approx(0.1, rel=1e-6)
    on, off = judge.shifts(classifier, 1, [["whale", "reef"], ["senate", "tax"]])
    assert on > 0.1 > 0 > -0.1 > off  # more than a standard deviation either side
    # the same fit keeps its mean and spread; a new fit recomputes them over the last links
    mean = judge._mean
    judge.shifts(classifier, 1, [["whale"]] * 50)
    assert judge._mean == mean
    judge.shifts(classifier, 2, [["whale"]] * 50)
    assert judge._mean > mean
    assert len(judge._recent) == 402  # 300 + 2 + 50 + 50, the empty list not kept
    assert AnchorJudge(0.1).shifts(classifier, 1, [[], []]).tolist() == [0.0, 0.0]
    restored = pickle.loads(pickle.dumps(judge))
    assert restored.shifts(classifier, 2, [["kelp"]]) == pytest.approx(judge.shifts(classifier, 2, [["kelp"]]))


def features(anchor, url, score, shift):
    return LinkFeatures(anchor=list(anchor), url=url_tokens(url), depth=1, score=score, terms=tuple(anchor), shift=shift)


def judged_frontier(weight=0.1):
    f = make_learned({"learned_anchor_judge": weight, "learned_association": "off", "learned_epsilon": 0.0})
    f.observe_page("http://x.test/a", "x.test", 0.5, [
        ("http://x.test/low", features(["p"], "http://x.test/low", 0.50, -0.2)),
        ("http://x.test/high", features(["q"], "http://x.test/high", 0.40, 0.3)),
        ("http://x.test/none", features(["r"], "http://x.test/none", 0.45, 0.0)),
    ])
    for url, score in (("http://x.test/low", 0.5), ("http://x.test/high", 0.4), ("http://x.test/none", 0.45)):
        f.push(Link(url, score))
    return f


def test_the_shift_stays_in_the_priority_through_refresh_and_resume():
    assert make_learned({"learned_anchor_judge": 0}).anchor_judge is None  # λ = 0: off
    assert make_learned().anchor_judge.weight == 0.1 and make_learned().judge_refresh  # the default
    f = judged_frontier()
    assert isinstance(f.anchor_judge, AnchorJudge) and "learned/anchor_judged" in f.stats()
    priority, link = f.peek()
    assert link.url == "http://x.test/high" and priority == pytest.approx(0.4 + 0.3)
    # the holder's new P moves R(l) and keeps the shift
    f.page_probabilities({"http://x.test/a": 0.0}, holder_weight=0.3)
    assert f.peek()[0] == pytest.approx(0.7 - 0.15)
    restored = make_learned({"learned_anchor_judge": 0.1, "learned_association": "off", "learned_epsilon": 0.0})
    restored.load_state(pickle.loads(pickle.dumps(f.state())))
    assert isinstance(restored.anchor_judge, AnchorJudge)
    for g in (f, restored):
        g._rescore(everything=True)  # an unfitted model re-scores to R(l): the shift stays
        assert [round(-t[0], 6) for t in sorted(g._heap)] == [0.55, 0.3, 0.15]
        assert [link.url for link in iter(g.pop, None)] == ["http://x.test/high", "http://x.test/none", "http://x.test/low"]


def test_the_judge_kept_current_follows_every_link_and_each_refit(classifier):
    """TOPICCRAWL_LEARNED_ANCHOR_JUDGE_REFRESH (docs/learned.md, "The anchor judge kept current"):
    a queued link's shift is the mean over every judged link to its target, and a refit judges
    the whole queue's words again under the new fit; it survives a resume."""
    opts = {"learned_anchor_judge": 0.1, "learned_association": "off", "learned_epsilon": 0.0,
            "learned_anchor_judge_refresh": True}
    assert not make_learned({**opts, "learned_anchor_judge": 0.0}).judge_refresh  # nothing to refresh without λ
    f = make_learned(opts)
    whale, senate = ("whale", "reef"), ("senate", "tax")
    out = [("http://x.test/w", features(["w"], "http://x.test/w", 0.4, -0.2)),
           ("http://x.test/s", features(["s"], "http://x.test/s", 0.5, 0.3))]
    out[0][1].judge_doc, out[1][1].judge_doc = senate, whale  # words judged wrongly by an early fit
    f.observe_page("http://x.test/a", "x.test", 0.5, out)
    for url, score in (("http://x.test/w", 0.4), ("http://x.test/s", 0.5)):
        f.push(Link(url, score))
    assert f.peek()[1].url == "http://x.test/s" and f.peek()[0] == pytest.approx(0.8)
    # a second page links to /w: its shift becomes the mean of the two links' shifts
    f.observe_page("http://x.test/b", "x.test", 0.5, judged_links=[("http://x.test/w", whale, 0.6),
                                                                   ("http://x.test/gone", whale, 1.0)])
    w = f._by_url["http://x.test/w"]
    assert w.judged == pytest.approx(0.2) and w.docs == [senate, whale] and f.stats()["learned/judge_followed"] == 1
    assert f.peek()[0] == pytest.approx(0.8)  # /s still first: 0.5 + 0.3 against 0.4 + 0.2
    # a refit: every queued link's words judged again, standardised over the queue's words
    assert f.refresh_judge(classifier, 2) == 2
    s_entry = f._by_url["http://x.test/s"]
    assert s_entry.judged > 0 > w.judged  # now judged by the fit that knows whales from senates
    shifts = f.anchor_judge.rescore(classifier, 2, [senate, whale, whale])
    chunked = AnchorJudge(0.1)
    chunked.chunk = 2  # judged two at a time: the same shifts, standardised over all three
    assert chunked.rescore(classifier, 2, [senate, whale, whale]) == pytest.approx(shifts)
    assert s_entry.judged == pytest.approx(shifts[2]) and w.judged == pytest.approx((shifts[0] + shifts[1]) / 2)
    assert f.peek()[0] == pytest.approx(max(0.4 + w.judged, 0.5 + s_entry.judged))
    restored = make_learned(opts)
    restored.load_state(pickle.loads(pickle.dumps(f.state())))
    assert restored._by_url["http://x.test/w"].docs == [senate, whale]
    assert [l.url for l in iter(restored.pop, None)] == [l.url for l in iter(f.pop, None)]


def test_the_judge_is_refused_on_redis_with_one_line():
    from topiccrawl.redis.learned import RedisLearnedFrontier

    with pytest.raises(FrontierError, match="^TOPICCRAWL_LEARNED_ANCHOR_JUDGE is not available with TOPICCRAWL_STORE=redis"):
        RedisLearnedFrontier.from_options(None, {}, {"learned_anchor_judge": 0.2})


# -- the holder mean (docs/learned.md, "Every holder's R(P) in R(l), with words") -------------------


def test_a_queued_link_follows_the_mean_of_every_page_linking_to_it():
    from topiccrawl.learning.linkvalue import shifted_score_row

    def frontier(on: bool):
        f = make_learned({"learned_holder_mean": on, "learned_association": "off", "learned_epsilon": 0.0})
        # R(l) = 0.7·R(anchor) + 0.3·R(P): t1 0.7·0.5 + 0.3·0.2 = 0.41, t2 0.7·0.4 + 0.3·0.6 = 0.46
        f.observe_page("http://x.test/a", "x.test", 0.2, [("http://x.test/t1", features(["p"], "http://x.test/t1", 0.41, 0.0))],
                       relevance=0.2, holder_weight=0.3)
        f.observe_page("http://x.test/b", "x.test", 0.6, [("http://x.test/t2", features(["q"], "http://x.test/t2", 0.46, 0.0))],
                       relevance=0.6, holder_weight=0.3)
        for url, score in (("http://x.test/t1", 0.41), ("http://x.test/t2", 0.46), ("http://x.test/seed", 0.45)):
            f.push(Link(url, score))
        return f

    f = frontier(True)
    assert f.peek()[1].url == "http://x.test/t2"
    # a third page, R(P) 1.0, links to t1 and to the seed: t1's holders' mean 0.2 -> 0.6, R(l) +0.3·0.4
    f.observe_page("http://x.test/c", "x.test", 1.0, [], relevance=1.0, holder_weight=0.3,
                   linked=["http://x.test/t1", "http://x.test/seed", "http://x.test/unknown"])
    priority, link = f.peek()
    assert link.url == "http://x.test/t1" and priority == pytest.approx(0.41 + 0.12, abs=1e-6)
    assert f.stats()["learned/holders_followed"] == 1  # the seed has no holder in its R(l)
    restored = make_learned({"learned_holder_mean": True, "learned_association": "off", "learned_epsilon": 0.0})
    restored.load_state(pickle.loads(pickle.dumps(f.state())))
    for g in (f, restored):  # a fourth holder of R(P) 0: the mean of 0.2, 1.0, 0.0 is 0.4
        g.observe_page("http://x.test/d", "x.test", 0.0, [], relevance=0.0, holder_weight=0.3, linked=["http://x.test/t1"])
        priority, link = g.peek()  # 0.41 + 0.3·(0.4 − 0.2), just above t2's 0.46
        assert link.url == "http://x.test/t1" and priority == pytest.approx(0.47, abs=1e-6)
        assert [link.url for link in iter(g.pop, None)] == ["http://x.test/t1", "http://x.test/t2", "http://x.test/seed"]
    g = frontier(True)
    assert g.pop().url == "http://x.test/t2"  # in flight: no longer followed
    g.observe_page("http://x.test/c", "x.test", 1.0, [], relevance=1.0, holder_weight=0.3, linked=["http://x.test/t2"])
    assert g.stats()["learned/holders_followed"] == 0
    off = frontier(False)  # off: the first holder's score stays
    assert "learned/holders_followed" not in off.stats()
    row = off._live[0].row
    assert shifted_score_row(row, 0.0) is row


def test_the_holder_mean_is_refused_on_redis_with_one_line():
    from topiccrawl.redis.learned import RedisLearnedFrontier

    with pytest.raises(FrontierError, match="^TOPICCRAWL_LEARNED_HOLDER_MEAN is not available with TOPICCRAWL_STORE=redis"):
        RedisLearnedFrontier.from_options(None, {}, {"learned_holder_mean": True})
