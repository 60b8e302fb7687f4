"""TD-CS: Disc (eqs. 1-2), the sibling Bayes model (eqs. 3-6), path weights (eq. 7), the scorers."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import sparse

from topiccrawl.scoring import text
from topiccrawl.scoring.dmoz import TopicTree, TreeError
from topiccrawl.scoring.relevance import RelevanceScorer
from topiccrawl.scoring.tdcs import (
    TDCSModel,
    TDCSScorer,
    TDCTKWScorer,
    TDKWScorer,
    context_keywords,
    disc_scores,
    group_space,
    laplace_log_probs,
    length_normalise,
    log_posterior,
    make_scorer,
    path_weights,
    scorer_from_state,
    top_k,
)
from topiccrawl.scoring.topic import Topic

# three sibling classes, two features; rows are documents
X = sparse.csr_matrix(np.array([[2, 0], [4, 1],     # class 0
                                [1, 1], [1, 1],     # class 1
                                [0, 2], [0, 0]]))   # class 2
Y = [0, 0, 1, 1, 2, 2]


def test_disc_by_hand():
    d = disc_scores(X, Y, eps=0.01)
    # feature 0: u = (3, 1, 0); class 0: variance ((2-3)² + (4-3)²)/2 = 1,
    # between ((1-3)² + (0-3)²)/2 = 6.5 -> 6.5 / (1 + 0.01) · 3
    assert d[0, 0] == pytest.approx(6.5 / 1.01 * 3)
    # class 1: zero variance (both documents count 1), between ((3-1)² + (0-1)²)/2 = 2.5 -> ε guards
    assert d[1, 0] == pytest.approx(2.5 / 0.01 * 1)
    assert d[2, 0] == 0.0  # u = 0: never a feature of class 2
    # feature 1: u = (0.5, 1, 1); class 0: variance 0.25, between ((1-.5)² + (1-.5)²)/2 = 0.25
    assert d[0, 1] == pytest.approx(0.25 / 0.26 * 0.5)
    # class 2: variance 1, between ((0.5-1)² + 0)/2 = 0.125
    assert d[2, 1] == pytest.approx(0.125 / 1.01 * 1)
    assert [list(f) for f in top_k(d, 1)] == [[0], [0], [1]]
    assert [list(f) for f in top_k(d, 5)] == [[0, 1], [0, 1], [1]]  # only positive scores


def test_disc_length_normalisation():
    doubled = sparse.vstack([X[:1] * 10, X[1:]]).tocsr()  # one document ten times as long
    assert not np.allclose(disc_scores(doubled, Y), disc_scores(X, Y))
    norm = length_normalise(doubled).toarray()
    lengths = np.asarray(doubled.sum(axis=1)).ravel()
    assert norm.sum(axis=1)[lengths > 0] == pytest.approx([lengths.mean()] * 5)
    with pytest.raises(ValueError, match="two sibling classes"):
        disc_scores(X[:2], [0, 0])


def test_laplace_smoothing_over_the_node_features_only():
    # class 0 keeps feature 0 (6 occurrences), class 1 feature 1 (2), class 2 feature 1 (2)
    logp, prior = laplace_log_probs(X, Y, [np.array([0]), np.array([1]), np.array([1])])
    p = np.exp(logp)
    assert p[0, 0] == pytest.approx((1 + 6) / (1 + 6))
    assert p[0, 1] == pytest.approx(1 / (1 + 6))        # count 1 in class 0 ignored: not in F_0
    assert p[1, 0] == pytest.approx(1 / (1 + 2))        # count 2 ignored
    assert p[1, 1] == pytest.approx((1 + 2) / (1 + 2))
    assert np.exp(prior) == pytest.approx([1 / 3] * 3)
    # a column outside every F leaves the posterior unchanged
    logp2, _ = laplace_log_probs(X, Y, [np.array([0]), np.array([0]), np.array([0])])
    assert (logp2[:, 1] == 0).all()
    post = np.exp(log_posterior(X, logp, prior))
    assert post.sum(axis=1) == pytest.approx([1.0] * 6)
    # the group reading: every class smooths over the union
    assert [list(f) for f in group_space([np.array([0]), np.array([1]), np.array([1])])] == [[0, 1]] * 3


def test_path_weights():
    assert path_weights(3) == pytest.approx([1 / 3, 1 / 2, 1])
    assert path_weights(1) == pytest.approx([1])


def tiny_tree() -> TopicTree:
    tree = TopicTree("Top", "/", name="tiny")
    docs = {
        "Top/Science/Weather/Storms": ["hurricane storm wind rain landfall", "typhoon storm surge wind",
                                       "tornado storm wind damage"],
        "Top/Science/Weather/Climate": ["climate temperature average rain season", "climate warming carbon"],
        "Top/Science/Chemistry": ["zinc metal element atom", "carbon atom bond molecule",
                                  "acid base reaction molecule"],
        "Top/Sports/Football": ["football goal team match", "league team season goal"],
        "Top/Sports/Tennis": ["tennis racket match serve", "tennis court open season"],
    }
    for node, texts in docs.items():
        tree.add(node).docs.extend(texts)
    tree.add("Top/Sports/Chess")  # no documents: left out of its sibling group
    return tree


def test_tdcs_model_on_a_tiny_tree():
    tree = tiny_tree()
    model = TDCSModel.build(tree, "Top/Science/Weather/Storms", k=5)
    assert [lv.siblings for lv in model.levels] == [
        ["Top/Science", "Top/Sports"], ["Top/Science/Weather", "Top/Science/Chemistry"],
        ["Top/Science/Weather/Storms", "Top/Science/Weather/Climate"]]
    storm = text.tokenize("a storm with strong wind made landfall")
    posts = model.level_posteriors(storm)
    chained = np.cumprod(posts)  # Pr(P_c | q) of the category in the tree
    assert model.score(storm) == pytest.approx(
        (1 / 3 * chained[0] + 1 / 2 * chained[1] + 1 * chained[2]) / (1 / 3 + 1 / 2 + 1))
    tennis = text.tokenize("the tennis match")
    assert model.score(storm) > 0.9 > 0.1 > model.score(tennis)
    # the per-level reading keeps the lower levels' priors for an off-topic page
    sibling = TDCSModel.build(tree, "Top/Science/Weather/Storms", k=5, chain=False)
    p = sibling.level_posteriors(tennis)
    assert sibling.score(tennis) == pytest.approx((p[0] / 3 + p[1] / 2 + p[2]) / (1 / 3 + 1 / 2 + 1))
    assert sibling.score(tennis) > 0.4
    # Pr(N | q) sums to 1 over the siblings of every level
    q = text.tokenize("rain season wind match atom")
    storms = TDCSModel.build(tree, "Top/Science/Weather/Storms", k=5).level_posteriors(q)[2]
    climate = TDCSModel.build(tree, "Top/Science/Weather/Climate", k=5).level_posteriors(q)[2]
    assert storms + climate == pytest.approx(1.0) and 0 < storms < 1
    assert "storm" in model.features() and len(model.features()) <= 5
    # no evidence: the priors (|D| shares) of each level
    assert model.level_posteriors([])[2] == pytest.approx(3 / 5)
    with pytest.raises(TreeError, match="is the root"):
        TDCSModel.build(tree, "Top", k=5)
    with pytest.raises(TreeError, match="no descriptive documents"):
        TDCSModel.build(tree, "Top/Sports/Chess", k=5)


def test_scorers_share_the_relevance_interface():
    tree = tiny_tree()
    page = text.tokenize("the hurricane storm brought wind and rain before landfall")
    off = text.tokenize("the football team scored a goal in the league match")
    for scorer in (TDCSScorer.from_tree(tree, "Top/Science/Weather/Storms", k=5),
                   TDKWScorer.from_tree(tree, "Top/Science/Weather/Storms", k=10),
                   TDCTKWScorer.from_tree(tree, "Top/Science/Weather/Storms", k=10)):
        rel = scorer.page_relevance(page)
        assert 0.0 <= scorer.page_relevance(off) < rel <= 1.0
        anchor = scorer.anchor_relevance("storm wind")
        assert anchor > scorer.anchor_relevance("tennis racket")
        assert scorer.link_relevance(anchor, rel) == pytest.approx(0.3 * anchor + 0.7 * rel)
        again = scorer_from_state(pickle.loads(pickle.dumps(scorer.state())), Topic("t", "en", {"x": 1}, 0.5))
        assert type(again) is type(scorer)
        assert again.page_relevance(page, update_df=False) == pytest.approx(
            scorer.page_relevance(page, update_df=False))


def test_context_keywords_weight_ancestors_by_level():
    tree = tiny_tree()
    ctx = context_keywords(tree, "Top/Science/Weather/Storms", k=3)
    own = TDKWScorer.keywords(tree, "Top/Science/Weather/Storms", 3)
    assert max(own.values()) == 1.0 and all(ctx[t] >= w for t, w in own.items())  # α = 1
    ancestors = set(ctx) - set(own)
    assert ancestors and all(ctx[t] <= 0.5 for t in ancestors)  # α ≤ 1/2 above the node


def test_make_scorer_from_a_dmoz_file(tmp_path):
    rdf = tmp_path / "content.rdf"
    pages = [("Top/Science/Weather", "Storm watch", "Hurricane and storm tracking with wind maps."),
             ("Top/Science/Weather", "Rain radar", "Rain and storm radar, wind forecasts."),
             ("Top/Science/Chemistry", "Periodic table", "Elements, atoms and molecules."),
             ("Top/Science/Chemistry", "Acid lab", "Acid and base reactions of molecules."),
             ("Top/Sports/Tennis", "Tennis news", "Tennis match results and rankings.")]
    body = "".join(f'<ExternalPage about="http://e{i}.test/"><d:Title>{t}</d:Title>'
                   f"<d:Description>{d}</d:Description><topic>{n}</topic></ExternalPage>"
                   for i, (n, t, d) in enumerate(pages))
    rdf.write_text('<RDF xmlns:r="http://www.w3.org/TR/RDF/" xmlns:d="http://purl.org/dc/elements/1.0/" '
                   f'xmlns="http://dmoz.org/rdf/">{body}</RDF>', encoding="utf-8")
    scorer = make_scorer("tdcs", f"dmoz:{rdf}", "Science/Weather", k=10)
    assert scorer.page_relevance(text.tokenize("storm and wind")) > 0.5
    assert scorer.page_relevance(text.tokenize("acid molecules")) < 0.5
    topic = Topic("weather", "en", {"storm": 1.0}, 0.4, labels=frozenset({"x"}))
    kw = make_scorer("tdctkw", f"dmoz:{rdf}", "Top/Science/Weather", k=3, topic=topic)
    assert kw.topic.beta == 0.4 and "storm" in kw.topic_vector
    assert isinstance(make_scorer("vsm", topic=topic), RelevanceScorer)
    with pytest.raises(TreeError, match="unknown scorer 'bayes'"):
        make_scorer("bayes", f"dmoz:{rdf}", "Top/Science")
    with pytest.raises(TreeError, match="needs a topic tree and a node"):
        make_scorer("tdcs", None, None)
    with pytest.raises(TreeError, match="bad topic tree 'rdf:x'"):
        make_scorer("tdcs", "rdf:x", "Top/Science")
    with pytest.raises(TreeError, match="unknown parameter 'seed'"):
        make_scorer("tdcs", f"dmoz:{rdf}?seed=1", "Top/Science")
    with pytest.raises(TreeError, match="no node 'Top/Arts'"):
        make_scorer("tdkw", f"dmoz:{rdf}", "Top/Arts")


def test_literal_node_space_differs_from_group_space():
    tree = tiny_tree()
    literal = TDCSModel.build(tree, "Top/Science/Weather/Storms", k=2, space="node")
    group = TDCSModel.build(tree, "Top/Science/Weather/Storms", k=2)
    q = text.tokenize("climate storm wind rain season warming")
    assert literal.level_posteriors(q) != pytest.approx(group.level_posteriors(q))
    with pytest.raises(TreeError, match="space must be one of"):
        TDCSModel.build(tree, "Top/Science/Weather/Storms", space="all")
    assert math.isfinite(literal.score(q))
