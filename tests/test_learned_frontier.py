"""The ``learned`` strategy and its link-value model: pure, no HTTP (synthetic in-memory webs)."""

import pickle
import random
import statistics

import numpy as np
import pytest
from sklearn.feature_extraction import FeatureHasher

from topiccrawl.learning.association import TermAssociation, anchor_terms
from topiccrawl.learning.linkvalue import NUMERIC, LinkFeatures, LinkValueModel, url_tokens
from topiccrawl.strategies.base import FrontierError, Link, OptionError
from topiccrawl.strategies.learned import LearnedFrontier, LearnedOptions, make_learned, shifted, sibling_shift
from topiccrawl.strategies.simple import BestFirstFrontier

WORDS = [f"w{i}" for i in range(300)]


def host(url: str) -> str:
    return url.split("/")[2]


def drain(frontier) -> list[str]:
    out = []
    while (link := frontier.pop()) is not None:
        out.append(link.url)
    return out


def features(anchor, url, score=0.0, depth=1) -> LinkFeatures:
    return LinkFeatures(anchor=list(anchor), url=url_tokens(url), depth=depth, score=score, terms=tuple(anchor))


# -- the model -------------------------------------------------------------------------------------


def test_labels_are_discounted_distance_to_the_nearest_relevant_page():
    m = LinkValueModel(k=3, gamma=0.5)
    chain = [f"http://x.test/{c}" for c in "abcde"]  # a → b → c → d → e, only e relevant
    for parent, url in zip([None, *chain], chain):
        m.add_page(url, 0.9 if url.endswith("e") else 0.1, parent=parent)
    assert [m.value(u) for u in chain] == [0.0, 0.125, 0.25, 0.5, 1.0]  # a is 4 hops above e: > k
    assert [m.since(u) for u in chain] == [4, 4, 4, 4, 0]
    # a page fetched later that links to the relevant one (graph edge, not the crawl path)
    m.add_page("http://x.test/f", 0.0)
    assert m.value("http://x.test/f") == 0.0
    m.add_edge("http://x.test/f", chain[-1])
    assert m.value("http://x.test/f") == 0.5
    assert m.since(m_url := "http://x.test/g") == 4 and m.page(m_url) is None
    m.add_page("http://x.test/g", relevant=False, parent=chain[-1])
    assert m.since("http://x.test/g") == 1


def hasher(model: LinkValueModel) -> FeatureHasher:
    """scikit-learn's hasher the model's rows must equal on its tokens (``LinkValueModel._tokens``)."""
    return FeatureHasher(n_features=model.n_features, input_type="string", alternate_sign=False)


def test_encoded_rows_stay_the_hashers_with_remembered_and_new_words(monkeypatch):
    """encode remembers words' and bins' columns: rows from remembered columns, from a mix of
    remembered and new words, and after the memory is cleared at its bound equal the hasher's."""
    import topiccrawl.learning.linkvalue as lv

    m = LinkValueModel(n_features=2**12)
    rng = random.Random(2)

    def feats(n, words):
        return [LinkFeatures(anchor=rng.sample(words, 3), url=url_tokens(f"http://h{i}.test/{rng.choice(words)}"),
                             context=rng.sample(words, 5), holder_probability=rng.random(),
                             host_yield=rng.random(), distance=rng.randrange(-1, 6), depth=rng.randrange(12),
                             holder_value=rng.random(), score=rng.random()) for i in range(n)]

    def expected(fs):
        return [sorted(np.flatnonzero(row).tolist())
                for row in hasher(m).transform(m._tokens(f) for f in fs).toarray()]

    def columns(rows):
        return [sorted(np.flatnonzero(row[: 2**12]).tolist()) for row in m.matrix(rows).toarray()]

    first = feats(40, WORDS[:20])
    assert columns(m.encode(first)) == expected(first)  # every word new
    assert columns(m.encode(first)) == expected(first)  # every column remembered
    mixed = feats(40, WORDS[:20] + [f"new{i}" for i in range(20)])
    assert columns(m.encode(mixed)) == expected(mixed)
    remembered = sum(map(len, m._memo.values()))
    monkeypatch.setattr(lv, "_INDEX_MAX", 10)  # the memory is full: cleared, then filled again
    assert columns(m.encode(mixed)) == expected(mixed)
    assert sum(map(len, m._memo.values())) < remembered  # only the last batch's columns


def test_rows_decode_to_the_hashed_matrix_and_predictions_agree():
    m = LinkValueModel(n_features=2**12)
    rng = random.Random(1)
    feats = [LinkFeatures(anchor=rng.sample(WORDS, 3), url=url_tokens(f"http://h{i}.test/a/{i}?q=x{i}"),
                          context=rng.sample(WORDS, 5), holder_probability=rng.random(), host_yield=rng.random(),
                          distance=rng.randrange(6), depth=rng.randrange(12), holder_value=rng.random(),
                          score=rng.random()) for i in range(50)]
    X = m.transform(feats)
    assert X.shape == (50, 2**12 + len(NUMERIC))
    expected = (hasher(m).transform(m._tokens(f) for f in feats).toarray() > 0).astype(float)  # binary
    assert np.array_equal(X[:, : 2**12].toarray(), expected)
    dense = np.array([[f.holder_probability, f.host_yield, f.holder_value, f.score] for f in feats], np.float32)
    assert np.array_equal(X[:, 2**12:].toarray(), dense.astype(np.float64))
    assert np.array_equal(m.matrix([]).shape, (0, 2**12 + len(NUMERIC)))
    # fit on a learnable rule: links whose anchor holds "w1"…"w9" lead to relevant pages
    labels = []
    for i, f in enumerate(feats):
        url = f"http://t.test/{i}"
        labels.append(any(w in {f"w{j}" for j in range(1, 30)} for w in f.anchor))
        m.add_page(url, relevant=labels[-1])
        m.add_example(m.encode([f])[0], url)
    assert 5 < sum(labels) < 45
    assert not m.fitted and m.retrain() and m.fitted
    rows = m.encode(feats)
    assert np.allclose(m.predict_rows(rows), [f.score for f in feats], atol=1e-6)  # not validated yet: R(l)
    m.blend_ = 1.0  # the model alone
    batch = m.predict_rows(rows)
    assert ((batch >= 0) & (batch <= 1)).all()
    assert batch[np.array(labels)].min() > batch[~np.array(labels)].max()  # it learned the rule
    assert np.allclose(batch, [m.predict_row(r) for r in rows])
    assert np.allclose(batch, [m.predict(f) for f in feats])
    clone = pickle.loads(pickle.dumps(m))
    assert np.allclose(clone.predict_rows(rows), batch)


def test_the_anchors_closeness_is_a_binned_feature_the_model_learns_and_nan_adds_none():
    m = LinkValueModel(n_features=2**12)
    rng = random.Random(3)
    plain = LinkFeatures(anchor=["w1"], url=url_tokens("http://a.test/x"), score=0.2)
    assert m.encode([plain]) == m.encode([LinkFeatures(anchor=["w1"], url=url_tokens("http://a.test/x"), score=0.2,
                                                       closeness=float("nan"))])
    near, far = (LinkFeatures(anchor=["w1"], url=url_tokens("http://a.test/x"), score=0.2, closeness=c)
                 for c in (0.65, 0.05))
    assert "n:6" in m._tokens(near) and "n:0" in m._tokens(far) and not any(t.startswith("n:") for t in m._tokens(plain))
    assert len(m.encode([near])[0]) == len(m.encode([plain])[0]) + 4  # one more hashed column, same dense part
    # links alike but for their anchors' closeness: the close ones lead to relevant pages
    for i in range(200):
        c = rng.random() * 0.8
        url = f"http://t.test/{i}"
        m.add_page(url, relevant=c >= 0.5)
        m.add_example(m.encode([LinkFeatures(anchor=rng.sample(WORDS, 2), url=url_tokens(url), score=0.2,
                                             closeness=c)])[0], url)
    assert m.retrain()
    m.blend_ = 1.0  # the model alone
    assert m.predict(near) > m.predict(far) + 0.3


def test_model_waits_for_positive_and_negative_examples():
    m = LinkValueModel(min_positive=2)
    m.add_page("http://a.test/1", relevant=False)
    m.add_example(m.encode([features(["x"], "http://a.test/1")])[0], "http://a.test/1")
    assert not m.add_example(b"", "http://never.fetched/")  # unknown target: not an example
    assert m.retrain() is False and not m.fitted
    assert m.predict(features(["x"], "http://a.test/2")) == 0.0


# -- the frontier: protocol --------------------------------------------------------------------------


def synthetic_step(frontier, rng, step, seen):
    """Pop a link, report its page (relevant by a rule on the URL) with three fresh out-links."""
    link = frontier.pop()
    if link is None:
        return None
    outs = []
    for j in range(3):
        marked = rng.random() < 0.3
        url = f"http://h{rng.randrange(5)}.test/p{step}-{j}" + ("-zq" if marked else "")
        outs.append((url, rng.sample(WORDS, 2) + (["zq"] if marked else []), round(rng.random(), 3)))
    relevant = 1.0 if link.url.endswith("zq") else 0.0
    text = [w for _, a, _ in outs for w in a] + rng.sample(WORDS, 5)  # the page's terms (anchor association)
    frontier.observe_page(link.url, host(link.url), relevant,
                          [(u, features(a, u, s, link.depth + 1)) for u, a, s in outs], terms=text, relevance=relevant)
    for u, _, s in outs:
        if u not in seen:
            seen.add(u)
            frontier.push(Link(u, s, link.depth + 1, host(u)))
    return link.url


def test_pops_every_link_exactly_once_with_retrains_and_exploration():
    f = LearnedFrontier(LinkValueModel(n_features=2**14, retrain_every=10, min_positive=1), epsilon=0.3,
                        rescore_all=20, rescore_top=5, rescore_sample=5, seed=3)
    rng = random.Random(3)
    pushed = [f"http://s.test/{i}" for i in range(5)]
    for url in pushed:
        f.push(Link(url, 0.5, 0, "s.test"))
    seen, popped = set(pushed), []
    for step in range(300):
        url = synthetic_step(f, rng, step, seen)
        assert url is not None
        popped.append(url)
    assert f.stats()["learned/model_version"] > 0 and f.stats()["learned/explored"] > 0
    queued = len(f)
    rest = drain(f)
    assert len(rest) == queued and len(f) == 0 and f.pop() is None
    everything = popped + rest
    assert len(everything) == len(set(everything)) == len(seen)


def test_untrained_frontier_without_exploration_is_exactly_bestfirst():
    rng = random.Random(5)
    learned, best = LearnedFrontier(epsilon=0.0), BestFirstFrontier()
    for i in range(400):
        score = round(rng.random(), 1)
        learned.push(Link(f"u{i}", score))
        best.push(Link(f"u{i}", score))
        if rng.random() < 0.3:
            assert learned.pop().url == best.pop().url
    assert drain(learned) == drain(best)


def test_exploration_takes_the_best_of_k_uniform_picks():
    def picks(k):
        f = LearnedFrontier(epsilon=1.0, seed=5, explore_sample=k)  # every decision explores
        for i in range(200):
            f.push(Link(f"http://t.test/{i}", i / 200))  # R(l) = priority: link 199 is the best
        return [int(f.pop().url.rsplit("/", 1)[1]) for _ in range(40)]

    uniform, tournament = picks(1), picks(8)
    assert statistics.mean(uniform) < 130 and min(uniform) < 50  # anywhere in the queue
    assert statistics.mean(tournament) > statistics.mean(uniform) + 40  # the stronger part, mostly
    assert any(i < 160 for i in tournament)  # but not greedy: not just the top 40
    assert make_learned({"learned_explore_sample": "4"}).explore_sample == 4
    assert make_learned().explore_sample == 1


@pytest.mark.parametrize(("siblings", "association"), [("off", "off"), ("yield", "off"), ("off", "anchor")])
def test_state_round_trip_restores_the_queue_the_model_and_the_next_decisions(siblings, association):
    def fresh():
        return LearnedFrontier(LinkValueModel(n_features=2**14, retrain_every=15, min_positive=1), epsilon=0.2,
                               rescore_all=30, rescore_top=4, rescore_sample=4, seed=11, siblings=siblings,
                               association=association, association_every=7)

    f = fresh()
    rng = random.Random(11)
    for i in range(3):
        f.push(Link(f"http://s.test/{i}", 0.5, 0, "s.test"))
    seen = set()
    for step in range(120):
        synthetic_step(f, rng, step, seen)
    assert f.model.fitted
    state = pickle.loads(pickle.dumps(f.state()))
    g = fresh()
    g.load_state(state)
    timeless = lambda stats: {k: v for k, v in stats.items() if k != "learned/retrain_ms"}  # noqa: E731
    assert len(g) == len(f) and timeless(g.stats()) == timeless(f.stats())
    assert np.array_equal(g.model.coef_, f.model.coef_) and g.model.version_ == f.model.version_
    version = f.model.version_
    # the same future on both: identical decisions, retrains and re-scoring included
    rng_f, rng_g = random.Random(99), random.Random(99)
    seen_f, seen_g = set(seen), set(seen)
    order_f = [synthetic_step(f, rng_f, 1000 + s, seen_f) for s in range(80)]
    order_g = [synthetic_step(g, rng_g, 1000 + s, seen_g) for s in range(80)]
    assert order_f == order_g
    assert f.model.version_ > version and np.array_equal(g.model.coef_, f.model.coef_)  # retrained alike
    assert drain(f) == drain(g)


def test_state_from_another_strategy_is_queued_by_score():
    best = BestFirstFrontier()
    for i, s in enumerate([0.2, 0.9, 0.5]):
        best.push(Link(f"http://a.test/{i}", s))
    f = LearnedFrontier(epsilon=0.0)
    f.load_state(pickle.loads(pickle.dumps(best.state())))
    assert drain(f) == ["http://a.test/1", "http://a.test/2", "http://a.test/0"]


def test_options_and_factory():
    f = make_learned({"learned_epsilon": "0.1", "learned_hops": "2", "learned_retrain_every": "50",
                      "learned_rescore_all": "10"})
    assert f.name == "learned" and f.epsilon == 0.1 and f.model.k == 2 and f.model.retrain_every == 50
    assert f.rescore_all == 10
    assert make_learned(None).model.gamma == LearnedOptions().learned_gamma
    with pytest.raises(ValueError):
        make_learned({"learned_epsilon": "2"})


# -- re-scoring ----------------------------------------------------------------------------------------


def teach_zq(frontier, pages=40, start=0):
    """Pages whose "zq" links lead to relevant pages and whose other links do not."""
    for i in range(start, start + pages):
        holder = f"http://teach.test/h{i}"
        frontier.push(Link(holder, 1.0))
        assert frontier.pop().url == holder
        good, bad = f"http://teach.test/g{i}", f"http://teach.test/b{i}"
        frontier.observe_page(holder, "teach.test", 0.0, [(good, features(["zq", f"w{i}"], good, 0.1)),
                                                          (bad, features([f"w{i + 1}"], bad, 0.9))])
        for url, score in ((good, 0.1), (bad, 0.9)):
            frontier.push(Link(url, score))
    for url in drain(frontier):
        frontier.observe_page(url, "teach.test", 1.0 if "/g" in url else 0.0)


def queue_order(frontier):
    return drain(pickle.loads(pickle.dumps(frontier)))


def add_fresh_zq(model, start, n):
    """n labelled "zq" links to relevant pages and n others, alternating: links the model has not
    trained on."""
    for i in range(start, start + n):
        good, bad = f"http://fresh.test/g{i}", f"http://fresh.test/b{i}"
        model.add_page(good, relevant=True)
        model.add_page(bad, relevant=False)
        model.add_example(model.encode([features(["zq", f"w{i}"], good, 0.1)])[0], good)
        model.add_example(model.encode([features([f"w{i + 1}"], bad, 0.9)])[0], bad)


def queue_z_and_n(frontier, word):
    """Queue five "zq" links of R(l) 0.2 (z…) and five others of R(l) 0.8 (n…) from one page;
    return the queue's order as a string of z and n."""
    holder = "http://q.test/h"
    frontier.push(Link(holder, 1.0))
    frontier.pop()
    links = [(f"http://q.test/z{i}", ["zq", f"w{word + i}"], 0.2) for i in range(5)]
    links += [(f"http://q.test/n{i}", [f"w{word + 10 + i}"], 0.8) for i in range(5)]
    frontier.observe_page(holder, "q.test", 0.0, [(u, features(a, u, s)) for u, a, s in links])
    for u, _, s in links:
        frontier.push(Link(u, s))
    return "".join(u.split("/")[-1][0] for u in queue_order(frontier))


def test_retrain_reorders_the_queued_links():
    f = LearnedFrontier(LinkValueModel(retrain_every=10**6), epsilon=0.0)
    teach_zq(f)
    assert f.retrain() and f.model.blend_ == 0.0  # fitted, but not yet validated: R(l) still rules
    assert queue_z_and_n(f, 50) == "nnnnnzzzzz"  # R(l) order
    m = f.model
    add_fresh_zq(m, 100, 40)  # fresh labelled links the model has not trained on: they validate it
    assert f.retrain() and m.blend_ >= 0.5, m.blend_auc_
    after = queue_order(f)
    assert [u.split("/")[-1][0] for u in after] == ["z"] * 5 + ["n"] * 5  # the model's order
    assert f.stats()["learned/rescored"] == 10


def test_first_fit_holdout_lets_a_model_that_ranks_unseen_links_better_take_over_at_once():
    """first_blend="holdout": the first fit validates a model trained on the older links against the
    newest ones; with the "zq" signal (R(l) ranks those links the wrong way round) it takes over at
    the first fit, where "none" keeps R(l) until the next retrain."""
    orders = {}
    for rule in ("none", "holdout"):
        f = LearnedFrontier(LinkValueModel(retrain_every=10**6, first_blend=rule), epsilon=0.0)
        teach_zq(f)
        add_fresh_zq(f.model, 100, 30)  # the newest labelled links, both kinds: the held-out part
        assert f.retrain()
        orders[rule] = queue_z_and_n(f, 70)
        if rule == "none":
            assert f.model.blend_ == 0.0 and not f.model.blend_auc_
        else:
            auc = f.model.blend_auc_
            assert f.model.blend_ >= 0.5 and auc[f.model.blend_] > auc[0.0], auc
    assert orders == {"none": "nnnnnzzzzz", "holdout": "zzzzznnnnn"}
    _check_model_option("first_blend", "holdout", "none", "later")


def _check_model_option(name: str, value: str, default: str, bad: str) -> None:
    """A link-model option: a bad value is refused, the ``learned_`` setting reaches the model, and
    a model saved (JOBDIR) before the option existed loads with its default."""
    with pytest.raises(ValueError, match=name):
        LinkValueModel(**{name: bad})
    assert getattr(make_learned({f"learned_{name}": value}).model, name) == value
    state = LinkValueModel(**{name: value}).__getstate__()
    del state[name]
    old = LinkValueModel.__new__(LinkValueModel)
    old.__setstate__(state)
    assert getattr(old, name) == default


def test_rescoring_is_bounded_to_the_top_and_a_sample():
    f = LearnedFrontier(LinkValueModel(retrain_every=10**6), epsilon=0.0, rescore_all=60, rescore_top=3,
                        rescore_sample=2, seed=1)
    teach_zq(f)
    for i in range(50):
        f.push(Link(f"http://q.test/a{i}", i / 100))
    assert f.retrain() and f.stats()["learned/rescored"] == 50  # the first fit re-scores everything
    for i in range(50):
        f.push(Link(f"http://q.test/b{i}", i / 100))
    assert f.retrain()
    assert 50 + 3 < f.stats()["learned/rescored"] <= 50 + 5  # the top 3 and a sample of 2
    assert len(queue_order(f)) == 100 == len(f)


@pytest.mark.parametrize(("siblings", "association"), [("off", "off"), ("yield", "off"), ("off", "anchor"),
                                                     ("yield", "anchor")])
def test_every_decision_takes_the_best_live_link_across_retrains_and_rescoring(siblings, association):
    """Without exploration, each pop is the live link of highest priority (ties: first pushed), with
    bounded re-scoring, sibling re-prioritisation, association refreshes and stale heap entries in between."""
    f = LearnedFrontier(LinkValueModel(n_features=2**14, retrain_every=10, min_positive=1), epsilon=0.0,
                        rescore_all=20, rescore_top=5, rescore_sample=5, seed=4, siblings=siblings,
                        association=association, association_every=3)
    rng = random.Random(4)
    for i in range(5):
        f.push(Link(f"http://s.test/{i}", 0.5, 0, "s.test"))
    seen = {f"http://s.test/{i}" for i in range(5)}
    for step in range(300):
        best = min(f._live, key=lambda e: (-e.priority, e.link.seq))
        assert synthetic_step(f, rng, step, seen) == best.link.url
    assert f.stats()["learned/retrains"] > 5 and len(f) > 20  # bounded re-scoring ran
    assert association == "off" or any(e.assoc for e in f._live)  # shifts were applied


# -- the planted signal ----------------------------------------------------------------------------------

TOPIC = ("alpha", "beta", "gamma", "delta", "omega")


def planted_web(seed, n_general=3000, regions=100, entries=5, outdeg=8, decoy=0.3):
    """General pages with random links; relevant pages sit three hops after links whose anchor holds
    "zq" (general page → gateway → middle → relevant). Anchors of every link hold a topic word with
    the same probability, so R(l) carries no information about where relevant pages are."""
    rng = random.Random(seed)
    serial = iter(range(10**9))

    def url():
        return f"http://h{rng.randrange(20)}.test/p/{next(serial)}"

    def anchor(*extra):
        words = [*rng.sample(WORDS, 2), *extra]
        if rng.random() < decoy:
            words.append(rng.choice(TOPIC))
        return words

    def text(relevant):
        k = rng.randrange(3, 6) if relevant else (rng.randrange(4) if rng.random() < 0.4 else 0)
        return rng.sample(WORDS, 12) + rng.sample(TOPIC, k)

    general = [url() for _ in range(n_general)]
    pages = {u: (False, text(False), [(rng.choice(general), anchor()) for _ in range(outdeg)]) for u in general}
    for _ in range(regions):
        gateway, middles = url(), [url() for _ in range(3)]
        pages[gateway] = (False, text(False), [(m, anchor()) for m in middles]
                          + [(rng.choice(general), anchor()) for _ in range(3)])
        for m in middles:
            relevant = [url() for _ in range(3)]
            pages[m] = (False, text(False), [(r, anchor()) for r in relevant]
                        + [(rng.choice(general), anchor()) for _ in range(3)])
            for r in relevant:
                pages[r] = (True, text(True), [(rng.choice(general), anchor()) for _ in range(5)])
        for _ in range(entries):
            pages[rng.choice(general)][2].append((gateway, anchor("zq")))
    return general, pages


def overlap(words):
    return len(set(words) & set(TOPIC)) / len(TOPIC)


def simulate(frontier, web, budget, seed):
    """Pop, "fetch" (look the page up), report the page to a learned frontier, push unseen links
    scored R(l) = ½·overlap(anchor) + ½·overlap(page); the number of relevant pages fetched."""
    general, pages = web
    seeds = random.Random(seed).sample(general, 3)
    seen = set(seeds)
    for url in seeds:
        frontier.push(Link(url, 1.0, 0, host(url)))
    found = 0
    observe = getattr(frontier, "observe_page", None)
    for _ in range(budget):
        link = frontier.pop()
        if link is None:
            break
        relevant, words, links = pages[link.url]
        found += relevant
        page_score = overlap(words)
        scored = [(t, a, 0.5 * overlap(a) + 0.5 * page_score) for t, a in links]
        if observe is not None:
            observe(link.url, host(link.url), 1.0 if relevant else 0.0,
                    [(t, features(a, t, s, link.depth + 1)) for t, a, s in scored], terms=words, relevance=page_score)
        for t, _, s in scored:
            if t not in seen:
                seen.add(t)
                frontier.push(Link(t, s, link.depth + 1, host(t)))
    return found


@pytest.mark.parametrize(("siblings", "association"), [("off", "off"), ("yield", "off"), ("off", "anchor")])
def test_learned_finds_the_planted_signal_bestfirst_cannot(siblings, association):
    budget, results = 1500, []
    for seed in (0, 1, 2):
        web = planted_web(seed)
        results.append((simulate(BestFirstFrontier(), web, budget, seed),
                        simulate(LearnedFrontier(seed=seed, siblings=siblings, association=association),
                                 web, budget, seed)))
    best, learned = (sum(r[i] for r in results) for i in (0, 1))
    assert learned >= 1.3 * best, results
    assert all(l > b for b, l in results), results


def test_count_rule_relabels_the_top_pages_and_recomputes_distances():
    m = LinkValueModel(k=3, gamma=0.5, label_rule="count")
    chain = [f"http://x.test/{c}" for c in "abcd"]  # a → b → c → d
    for parent, url, p in zip([None, *chain], chain, (0.3, 0.3, 0.45, 0.45)):
        m.add_page(url, p, parent=parent)
    assert m.n_relevant == 0  # as added: no page reaches the threshold 0.5
    assert m.relabel("count") == 2  # round(Σ P = 1.5) = 2: c and d, the highest P
    assert [m.value(u) for u in chain] == [0.25, 0.5, 1.0, 1.0]
    m.set_probabilities({chain[2]: 0.0, chain[3]: 0.0, "http://never.fetched/": 1.0})
    assert m.relabel("count") == 1  # Σ P = 0.6: one page, a (ties by position)
    assert [m.value(u) for u in chain] == [1.0, 0.0, 0.0, 0.0]  # c and d lost their labels, b leads nowhere
    assert m.relabel("threshold") == 0 and [m.value(u) for u in chain] == [0.0] * 4
    m.set_probabilities({chain[1]: 0.9})
    m.retrain()  # a retrain relabels by the model's rule first
    assert m.is_relevant(chain[1]) and m.value(chain[0]) == 0.5


def test_page_probabilities_reach_the_link_labels_through_the_frontier():
    frontier = make_learned({"learned_labels": "threshold"})
    assert frontier.model.label_rule == "threshold"
    assert make_learned().model.label_rule == "count"  # the default
    frontier.observe_page("http://x.test/a", "x.test", 0.1)
    assert not frontier.model.is_relevant("http://x.test/a")
    frontier.page_probabilities({"http://x.test/a": 0.8})
    frontier.model.relabel(frontier.model.label_rule)
    assert frontier.model.is_relevant("http://x.test/a")
    with pytest.raises(ValueError):
        make_learned({"learned_labels": "nope"})


def test_queued_links_follow_their_holders_new_probability_at_a_classifier_refit():
    def crawl(refresh: bool):
        f = make_learned({"learned_holder_refresh": refresh, "learned_association": "off", "learned_epsilon": 0.0})
        assert f.holder_refresh is refresh
        # R(l) = 0.7·R(anchor) + 0.3·P(holder) at the push: a1 0.35 + 0.06, b1 0.28 + 0.18
        f.observe_page("http://x.test/a", "x.test", 0.2, [("http://x.test/a1", features(["p"], "http://x.test/a1", 0.41))])
        f.observe_page("http://x.test/b", "x.test", 0.6, [("http://x.test/b1", features(["q"], "http://x.test/b1", 0.46))])
        for url, score in (("http://x.test/a1", 0.41), ("http://x.test/b1", 0.46), ("http://x.test/seed", 0.45)):
            f.push(Link(url, score))
        return f

    f = crawl(refresh=True)
    assert make_learned().holder_refresh  # the default
    f.page_probabilities({"http://x.test/a": 0.9, "http://x.test/b": 0.1})  # the holder term is R(P): no weight
    assert f.peek()[1].url == "http://x.test/b1" and f.stats()["learned/holder_refreshed"] == 0
    f.page_probabilities({"http://x.test/a": 0.9, "http://x.test/b": 0.1, "http://x.test/seed": 1.0}, holder_weight=0.3)
    assert f.stats()["learned/holder_refreshed"] == 2  # the seed has no holder
    priority, link = f.peek()
    assert link.url == "http://x.test/a1" and priority == pytest.approx(0.41 + 0.3 * 0.7, abs=1e-6)
    assert drain(f) == ["http://x.test/a1", "http://x.test/seed", "http://x.test/b1"]
    f.page_probabilities({"http://x.test/a": 0.9}, holder_weight=0.3)  # nothing queued: nothing to do
    assert f.stats()["learned/holder_refreshed"] == 2

    f = crawl(refresh=True)  # a second refit moves them again, from the P the first one gave
    f.page_probabilities({"http://x.test/a": 0.9, "http://x.test/b": 0.1}, holder_weight=0.3)
    f.page_probabilities({"http://x.test/a": 0.0, "http://x.test/b": 1.0}, holder_weight=0.3)
    restored = make_learned({"learned_association": "off", "learned_epsilon": 0.0})
    restored.load_state(pickle.loads(pickle.dumps(f.state())))  # the moved rows are what JOBDIR keeps
    for g in (f, restored):
        assert g.peek()[0] == pytest.approx(0.28 + 0.3, abs=1e-6)
        assert drain(g) == ["http://x.test/b1", "http://x.test/seed", "http://x.test/a1"]

    f = crawl(refresh=False)  # the option off: the priorities stay
    f.page_probabilities({"http://x.test/a": 0.9, "http://x.test/b": 0.1}, holder_weight=0.3)
    assert drain(f) == ["http://x.test/b1", "http://x.test/seed", "http://x.test/a1"]
    assert "learned/holder_refreshed" not in f.stats()
    with pytest.raises(OptionError):
        make_learned({"learned_holder_refresh": "maybe"})


def test_queued_links_move_by_the_deltas_they_are_given():
    """``shift_scores`` (the crawler takes the anchors' semantic prior out of links queued under
    it): each queued link named moves by its delta, clipped at 0; others, and URLs not queued, stay."""
    f = make_learned({"learned_association": "off", "learned_epsilon": 0.0})
    f.observe_page("http://x.test/a", "x.test", 0.5, [(f"http://x.test/{c}", features(["p"], f"http://x.test/{c}", s))
                                                      for c, s in (("x", 0.6), ("y", 0.5), ("z", 0.4))])
    for c, s in (("x", 0.6), ("y", 0.5), ("z", 0.4)):
        f.push(Link(f"http://x.test/{c}", s))
    assert f.shift_scores({"http://x.test/x": -0.3, "http://x.test/z": -0.9, "http://x.test/never": 0.5}) == 2
    order = []
    while (top := f.peek()) is not None:  # y 0.5, x 0.6 − 0.3, z 0.4 − 0.9 clipped to 0
        order.append((top[1].url, round(top[0], 6)))
        f.pop()
    assert order == [("http://x.test/y", 0.5), ("http://x.test/x", 0.3), ("http://x.test/z", 0.0)]
    assert f.shift_scores({"http://x.test/x": -0.3}) == 0  # nothing queued: nothing moved


def test_a_refreshed_row_moves_its_score_by_the_holder_weight_and_clips_it():
    from topiccrawl.learning.linkvalue import refreshed_row

    m = LinkValueModel(n_features=2**10)  # unfitted: a row's value is its R(l)

    def row_score(row: bytes) -> float:
        return float(m.predict_rows([row])[0])

    row = m.encode([LinkFeatures(anchor=["a"], holder_probability=0.5, score=0.5)])[0]
    assert refreshed_row(row, 0.5, 0.3) is row  # the same P: the same row
    up = refreshed_row(row, 1.0, 0.3)
    assert row_score(up) == pytest.approx(0.65) and up[:-16] == row[:-16]
    assert m.matrix([up]).toarray()[0, -len(NUMERIC)] == 1.0  # the holder column holds the new P
    assert row_score(refreshed_row(row, 0.0, 2.0)) == 0.0 and row_score(refreshed_row(row, 1.0, 2.0)) == 1.0


# -- sibling yield -----------------------------------------------------------------------------------------


def test_sibling_shift_is_the_log_odds_of_the_holder_yield_against_the_crawl():
    assert sibling_shift([], 0, 0.1, 2.0) == 0.0 and shifted(0.3, 0.0) == 0.3
    up = sibling_shift([0.9, 0.8], 2, 0.1, 2.0)  # y = (1.7 + 0.2) / 4 = 0.475
    assert up == pytest.approx(np.log(0.475 / 0.525) - np.log(0.1 / 0.9))
    assert sibling_shift([0.0, 0.0, 0.0], 3, 0.1, 2.0) < 0 < up
    assert sibling_shift([0.1], 1, 0.1, 2.0) == pytest.approx(0.0)  # as good as the crawl: no change
    assert 0.3 < shifted(0.3, up) < 1.0 and 0.0 < shifted(0.3, -up) < 0.3
    assert shifted(0.3, -up) == pytest.approx(1 - shifted(0.7, up))  # symmetric in log-odds


def held_links(siblings: str, relevant_child: float):
    """Holders a and b (fetched, P = 0.2 each) hold three links each, all R(l) = 0.5, pushed in turn;
    the first link of a is fetched with P(relevant) = ``relevant_child``. The order of the other five."""
    f = LearnedFrontier(epsilon=0.0, siblings=siblings)
    for holder in ("a", "b"):
        f.push(Link(f"http://x.test/{holder}", 1.0))
    for _ in range(2):
        link = f.pop()
        name = link.url.rsplit("/", 1)[1]
        f.observe_page(link.url, "x.test", 0.2,
                       [(f"http://x.test/{name}{i}", features(["w1"], f"http://x.test/{name}{i}", 0.5)) for i in range(3)])
    for i in range(3):
        for holder in ("a", "b"):
            f.push(Link(f"http://x.test/{holder}{i}", 0.5))
    first = f.pop()
    assert first.url == "http://x.test/a0"
    f.observe_page(first.url, "x.test", relevant_child)
    return [link.url.rsplit("/", 1)[1] for link in iter(f.pop, None)]


def test_a_page_whose_fetched_targets_are_relevant_raises_its_other_links():
    assert held_links("off", 0.95) == held_links("off", 0.0) == ["b0", "a1", "b1", "a2", "b2"]  # push order
    assert held_links("yield", 0.95) == ["a1", "a2", "b0", "b1", "b2"]  # a's targets are good: a's first
    assert held_links("yield", 0.0) == ["b0", "b1", "b2", "a1", "a2"]  # a's target was off-topic: a's last


def test_a_page_linking_to_relevant_pages_fetched_before_pushes_its_links_higher():
    f = LearnedFrontier(epsilon=0.0, siblings="yield")
    for name in ("hub", "plain", "good"):
        f.push(Link(f"http://x.test/{name}", 1.0 if name == "good" else 0.9))
    assert f.pop().url.endswith("/good")
    f.observe_page("http://x.test/good", "x.test", 0.95)  # fetched and relevant, before the hub
    for name in ("hub", "plain"):
        assert f.pop().url.endswith(name)
        outs = [(f"http://x.test/{name}{i}", features(["w1"], f"http://x.test/{name}{i}", 0.4)) for i in range(2)]
        if name == "hub":
            outs.append(("http://x.test/good", features(["w1"], "http://x.test/good", 0.4)))
        f.observe_page(f"http://x.test/{name}", "x.test", 0.1, outs)
        for url, _ in outs[:2]:
            f.push(Link(url, 0.4))
    assert f.sibling_shift("http://x.test/hub") > 0 == f.sibling_shift("http://x.test/plain")
    assert [link.url.rsplit("/", 1)[1] for link in iter(f.pop, None)] == ["hub0", "hub1", "plain0", "plain1"]
    assert make_learned({"learned_siblings": "yield"}).sibling_rule == "yield" and not make_learned().siblings
    with pytest.raises(OptionError, match="TOPICCRAWL_LEARNED_SIBLINGS"):
        LearnedOptions.coerce({"learned_siblings": "on"})


def test_sibling_yield_is_refused_on_redis_with_one_line():
    from topiccrawl.redis.learned import RedisLearnedFrontier

    with pytest.raises(FrontierError, match="^TOPICCRAWL_LEARNED_SIBLINGS is not available with TOPICCRAWL_STORE=redis"):
        RedisLearnedFrontier.from_options(None, {}, {"learned_siblings": "yield"})


# -- anchor association ------------------------------------------------------------------------------------


def test_term_association_is_the_smoothed_mean_relevance_of_the_pages_holding_the_term():
    a = TermAssociation(strength=2.0)
    assert a.shift(["fern"]) == 0.0 and a.mean == 0.0  # nothing fetched yet
    a.add_page(["fern", "leaf", "fern"], 0.9)  # a repeated term counts once
    a.add_page(["aristotle", "leaf"], 0.3)
    a.add_page(["aristotle", "city"], 0.0)
    m = 0.4  # (0.9 + 0.3 + 0.0) / 3
    assert a.mean == pytest.approx(m) and len(a) == 4
    assert a.value("fern") == pytest.approx((0.9 + 2 * m) / 3)
    assert a.value("aristotle") == pytest.approx((0.3 + 2 * m) / 4)
    assert a.value("unseen") == pytest.approx(m)
    assert a.shift(["fern"]) == pytest.approx((0.9 + 2 * m) / 3 - m)  # 0.1667
    assert a.shift(["aristotle"]) == pytest.approx((0.3 + 2 * m) / 4 - m)  # -0.125: below the crawl's mean
    assert a.shift(["aristotle", "unseen"]) == 0.0  # an unknown term counts as m; the max is taken
    assert a.shift(["aristotle", "fern"]) == a.shift(["fern"]) and a.shift([]) == 0.0
    lists = [("fern",), (), ("aristotle", "unseen"), ("city", "leaf", "fern"), ("unseen",)]
    assert a.shifts(lists).tolist() == [a.shift(t) for t in lists]  # the vectorised form, exactly
    b = pickle.loads(pickle.dumps(a))
    assert b.shift(["fern"]) == a.shift(["fern"]) and b.mean == a.mean and len(b) == 4
    small = TermAssociation(max_terms=2)
    small.add_page(["x", "y", "z"], 1.0)
    assert len(small) == 2 and small.pages == 1  # the vocabulary is bounded; the page still counts in m


def test_anchor_terms_drop_stop_words_and_single_characters():
    assert anchor_terms("The Fern of a Garden") == ("fern", "garden")
    assert anchor_terms("X") == () and anchor_terms("") == ()


def anchor_race(association: str) -> list[str]:
    """A holder page with two links of the same R(l): "Aristotle" (pushed first) and "Fern". "fern" was
    written on a relevant page fetched before, "aristotle" on pages of low R(P)."""
    f = LearnedFrontier(epsilon=0.0, association=association)
    for name in ("plant", "city", "town", "hub"):
        f.push(Link(f"http://x.test/{name}", 1.0))
    pages = {"plant": (["fern", "leaf"], 0.9), "city": (["aristotle", "market"], 0.1),
             "town": (["aristotle", "square"], 0.1), "hub": (["aristotle", "fern", "leaf"], 0.5)}
    for _ in range(4):
        link = f.pop()
        name = link.url.rsplit("/", 1)[1]
        words, relevance = pages[name]
        outs = [(f"http://x.test/{t}", features([t], f"http://x.test/{t}", 0.4)) for t in ("aristotle", "fern")
                ] if name == "hub" else []
        f.observe_page(link.url, "x.test", relevance, outs, terms=words, relevance=relevance)
    for t in ("aristotle", "fern"):
        f.push(Link(f"http://x.test/{t}", 0.4))
    return [link.url.rsplit("/", 1)[1] for link in iter(f.pop, None)]


def test_an_anchor_written_on_relevant_pages_goes_first():
    assert anchor_race("off") == ["aristotle", "fern"]  # same R(l): push order
    assert anchor_race("anchor") == ["fern", "aristotle"]
    assert make_learned({"learned_association": "anchor"}).association is not None
    assert make_learned().association is not None  # "auto", the default: on in memory
    assert make_learned({"learned_association": "off"}).association is None
    with pytest.raises(OptionError, match="TOPICCRAWL_LEARNED_ASSOCIATION"):
        LearnedOptions.coerce({"learned_association": "on"})


def test_queued_links_get_their_association_recomputed_as_pages_arrive():
    f = LearnedFrontier(epsilon=0.0, association="anchor", association_every=5)
    f.push(Link("http://x.test/seed", 1.0))
    f.pop()
    outs = [("http://x.test/fern", features(["fern"], "http://x.test/fern", 0.40)),
            ("http://x.test/other", features(["zzz"], "http://x.test/other", 0.45))]
    f.observe_page("http://x.test/seed", "x.test", 0.2, outs, terms=["seed"], relevance=0.2)
    for url, _ in outs:
        f.push(Link(url, 0.4 if url.endswith("fern") else 0.45))
    for i in range(6):  # pages that write "fern" and are relevant, none linking to the queued ones
        f.push(Link(f"http://x.test/p{i}", 2.0))
        assert f.pop().url == f"http://x.test/p{i}"
        f.observe_page(f"http://x.test/p{i}", "x.test", 0.9, terms=["fern", f"w{i}"], relevance=0.9)
    # a refresh ran at the 5th page: "fern" now lifts its link above the one of higher R(l)
    assert [link.url.rsplit("/", 1)[1] for link in iter(f.pop, None)] == ["fern", "other"]


def test_example_pages_join_the_association_as_pages_of_known_relevance_when_asked():
    examples, counters = [["albatross", "petrel", "seabird"], ["petrel", "gull"]], [["football", "goal"]]
    off = LearnedFrontier(association="anchor")  # the class's default is off; the crawl's setting is on
    assert off.observe_examples(examples, counters) == 0 and off.association.pages == 0
    assert make_learned().association_examples
    assert not make_learned({"learned_association_examples": "false"}).association_examples
    f = LearnedFrontier(association="anchor", association_examples=True)
    assert f.observe_examples(examples, counters) == 3
    a = f.association
    assert a.pages == 3 and a.total == 2.0  # relevance 1 for an example, 0 for a counter-example
    for i in range(20):  # ordinary pages of middling R(P), none of them naming these words
        a.add_page([f"w{i}", "common"], 0.2)
    assert a.shift(["petrel"]) > a.shift(["albatross"]) > 0.0 > a.shift(["football"])
    assert f.stats()["learned/association_examples"] == 3
    g = LearnedFrontier(association="anchor", association_examples=True)
    g.load_state(pickle.loads(pickle.dumps(f.state())))  # JOBDIR keeps the count with the statistics
    assert g.stats()["learned/association_examples"] == 3 and g.association.shift(["petrel"]) == a.shift(["petrel"])
    assert LearnedFrontier(association="off", association_examples=True).observe_examples(examples) == 0


def _top_and_mass(rng_seed: int = 0):
    """Links where R(l) puts half the links that lead somewhere at the very top (and half at the
    bottom), while the model ranks all of them above most links but below a few strong decoys."""
    rng = np.random.default_rng(rng_seed)
    y = np.zeros(200, dtype=bool)
    y[:10] = True
    score = np.where(y, 0.0, rng.uniform(0.1, 0.8, 200))
    score[:5] = 0.9
    model = np.where(y, 0.6, 0.1)
    model[10:30] = 0.7
    return score, model, y


def test_the_blend_is_chosen_by_the_whole_ranking_or_by_its_top():
    """blend_score: the ROC AUC prefers the model, which ranks the mass of links better; the average
    precision keeps more of R(l), whose top holds the links that lead to relevant pages."""
    from scipy import sparse

    score, model, y = _top_and_mass()
    X = sparse.csr_matrix(np.column_stack([np.zeros((200, 16 + len(NUMERIC) - 1)), score]))
    chosen = {}
    for measure in ("auc", "ap"):
        m = LinkValueModel(n_features=16, blend_score=measure)
        m._update_blend(X, model, y)
        assert set(m.blend_auc_) == set(LinkValueModel.BLENDS)
        chosen[measure] = m.blend_
        if measure == "ap":  # the model alone has the worst top of all
            assert m.blend_auc_[1.0] == min(m.blend_auc_.values()), m.blend_auc_
    assert chosen["auc"] >= 0.75 and chosen["ap"] <= 0.5, chosen
    _check_model_option("blend_score", "ap", "auc", "f1")


def test_the_blend_max_caps_the_models_weight():
    """blend_max (TOPICCRAWL_LEARNED_BLEND_MAX): where the model alone ranks the links best and R(l)
    not at all, the blend gives it the whole weight, or at most blend_max, so R(l) keeps the rest."""
    from scipy import sparse

    rng = np.random.default_rng(3)
    y = np.arange(200) % 4 == 0
    score = rng.random(200)  # R(l): no signal
    model = np.where(y, 0.5, 0.3) + rng.random(200) * 0.3  # the model: most of it
    X = sparse.csr_matrix(np.column_stack([np.zeros((200, 16 + len(NUMERIC) - 1)), score]))
    chosen = {}
    for cap in (1.0, 0.75, 0.3, 0.0):
        m = LinkValueModel(n_features=16, blend_max=cap)
        m._update_blend(X, model, y)
        assert set(m.blend_auc_) == {w for w in LinkValueModel.BLENDS if w <= cap}
        chosen[cap] = m.blend_
    assert chosen == {1.0: 1.0, 0.75: 0.75, 0.3: 0.25, 0.0: 0.0}
    with pytest.raises(ValueError, match="blend_max"):
        LinkValueModel(blend_max=1.5)
    assert make_learned({"learned_blend_max": "0.75"}).model.blend_max == 0.75
    with pytest.raises(OptionError, match="TOPICCRAWL_LEARNED_BLEND_MAX=.2. is out of range"):
        make_learned({"learned_blend_max": "2"})
    state = LinkValueModel(blend_max=0.5).__getstate__()
    assert state["blend_max"] == 0.5  # saved with JOBDIR: a resumed crawl keeps its cap
    del state["blend_max"]
    old = LinkValueModel.__new__(LinkValueModel)
    old.__setstate__(state)  # a model saved before the option: no cap
    assert old.blend_max == 1.0 and old.blends == LinkValueModel.BLENDS


# -- the link model with and without its word features ---------------------------------------------------


def test_the_structural_mask_is_exactly_the_binned_features_columns():
    """Every column the binned features can produce, and no other hashed column (so the model
    without words keeps all of them and nothing else)."""
    m = LinkValueModel()
    rng = np.random.default_rng(0)
    feats = [LinkFeatures(holder_probability=float(rng.uniform()), host_yield=float(rng.uniform()),
                          distance=int(rng.integers(-1, 8)), depth=int(rng.integers(0, 12)),
                          holder_value=float(rng.uniform()), score=float(rng.uniform()),
                          closeness=float(rng.uniform(-0.1, 0.8)) if i % 2 else float("nan"))
             for i in range(3000)]
    X = m.matrix(m.encode(feats))
    hashed = set(X.indices[X.indices < m.n_features].tolist())
    mask = m.structural_mask()
    assert set(np.flatnonzero(mask[:m.n_features]).tolist()) == hashed and mask[m.n_features:].all()
    worded = m.encode([LinkFeatures(anchor=[f"a{i}"], url=[f"u{i}x"], context=[f"c{i}"], score=0.5)
                       for i in range(200)])
    full, plain = m.matrix(worded), m.matrix(worded, words=False)
    assert mask[plain.indices].all() and full.nnz - plain.nnz >= 590  # the words gone (collisions aside)
    assert np.array_equal(plain[:, m.n_features:].toarray(), full[:, m.n_features:].toarray())


def _feed_batch(m, rng, batch: int, gold_is_signal: bool, n: int = 100) -> None:
    """n labelled links and one retrain. The holder's P is the steady signal (relevant with
    probability P); "gold" in the anchor marks the relevant targets when ``gold_is_signal``, and
    half of all links at random otherwise."""
    for i in range(n):
        p = float(rng.uniform())
        relevant = bool(rng.uniform() < p)
        gold = relevant if gold_is_signal else bool(rng.uniform() < 0.5)
        url = f"http://w.test/{batch}/{i}"
        m.add_page(url, relevant=relevant)
        m.add_example(m.encode([LinkFeatures(anchor=["gold" if gold else "plain", "item"],
                                             holder_probability=p, score=0.3, depth=1)])[0], url)
    m.retrain()


def _gold_lift(m) -> float:
    gold, plain = (LinkFeatures(anchor=[w, "item"], holder_probability=0.5, score=0.3, depth=1)
                   for w in ("gold", "plain"))
    return m.predict(gold) - m.predict(plain)


def test_auto_keeps_the_words_while_they_lead_and_drops_them_when_they_stop():
    """words="auto": both models are validated on the links labelled since the last retrain.
    While "gold" marks the relevant targets the model with words wins; once "gold" is noise (the
    crawl moved on), the model without words ranks fresh links better and predicts."""
    m = LinkValueModel(n_features=2**12, words="auto", random_state=3)
    rng = np.random.default_rng(3)
    for batch in range(4):
        _feed_batch(m, rng, batch, gold_is_signal=True)
    assert m.plain_ is not None and m.words_ and m.blend_ > 0.0 and _gold_lift(m) > 0.1
    assert m.blend_auc_[m.blend_] > max(m.plain_auc_.values())
    for batch in range(4, 14):
        _feed_batch(m, rng, batch, gold_is_signal=False)
    assert not m.words_ and m.blend_ > 0.0 and _gold_lift(m) == 0.0
    assert m.plain_auc_[m.blend_] > max(m.blend_auc_.values())
    assert not m.coef_[:m.n_features][~m.structural_mask()[:m.n_features]].any()
    # "on" keeps predicting with the words it learned first; "off" never learns them
    on, off = LinkValueModel(n_features=2**12, random_state=3), LinkValueModel(n_features=2**12, words="off",
                                                                               random_state=3)
    for model in (on, off):
        rng = np.random.default_rng(3)
        for batch in range(14):
            _feed_batch(model, rng, batch, gold_is_signal=batch < 4)
    assert on.plain_ is None and on.words_ and _gold_lift(on) > 0.0 and not on.plain_auc_
    assert off.plain_ is None and not off.words_ and _gold_lift(off) == 0.0 and off.version_ == 14
    # JOBDIR keeps both models and the choice; a model saved before the option loads as "on"
    back = pickle.loads(pickle.dumps(m))
    assert back.plain_ is not None and not back.words_ and back.plain_auc_ == m.plain_auc_
    probe = LinkFeatures(anchor=["gold"], holder_probability=0.8, score=0.3, depth=1)
    assert back.predict(probe) == m.predict(probe)
    state = m.__getstate__()
    for name in ("words", "words_", "plain_", "plain_auc_"):
        del state[name]
    old = LinkValueModel.__new__(LinkValueModel)
    old.__setstate__(state)
    assert old.words == "on" and old.words_ and old.plain_ is None
    with pytest.raises(ValueError, match="words"):
        LinkValueModel(words="some")
    assert make_learned({"learned_words": "auto"}).model.words == "auto"
    assert make_learned().model.words == "on"
    assert make_learned().stats()["learned/words"] == 1


# -- the guard: a bandit between the learned order and best-first's -------------------------------------


def _guarded_frontier(n: int = 400) -> LearnedFrontier:
    """Links whose learned priority is the reverse of their R(l): the two orders disagree at the top."""
    f = LearnedFrontier(LinkValueModel(retrain_every=10**6), epsilon=0.0, seed=5, association="off",
                        guard="thompson")
    for i in range(n):
        link = Link(f"http://g.test/{i}", i / n, 0, "g.test")
        link.seq = i
        f._add(link, f.model.encode([f._fallback_features(link)])[0], None, 1.0 - i / n)
    return f


@pytest.mark.parametrize("rewarded", ["bestfirst", "learned"])
def test_the_guard_follows_the_order_whose_pages_are_relevant(rewarded):
    """Pages reached by best-first's order (high R(l)) are relevant, the learned order's are not, or
    the other way round: most decisions go to the rewarded order once a few pages are back."""
    f = _guarded_frontier()
    taken = []
    for _ in range(150):
        link = f.pop()
        high = link.score >= 0.5  # best-first's half of the queue
        taken.append(high)
        f.observe_page(link.url, "g.test", 1.0 if high == (rewarded == "bestfirst") else 0.0)
    stats = f.stats()
    late = taken[50:]
    if rewarded == "bestfirst":
        assert stats["learned/guard_bestfirst"] > 3 * stats["learned/guard_learned"]
        assert sum(late) > 0.85 * len(late)
    else:
        assert stats["learned/guard_learned"] > 3 * stats["learned/guard_bestfirst"]
        assert sum(late) < 0.15 * len(late)
    assert stats["learned/guard_agreed"] == 0


def test_the_guard_state_round_trip_and_options():
    f = _guarded_frontier(60)
    for _ in range(20):
        link = f.pop()
        f.observe_page(link.url, "g.test", float(link.score >= 0.5))
    for _ in range(3):
        f.pop()  # in flight: their arm waits for their page
    g = _guarded_frontier(0)
    g.load_state(pickle.loads(pickle.dumps(f.state())))
    assert g.stats() == f.stats() and g._arms == f._arms and g._armed == f._armed
    assert drain(g) == drain(f)  # the same decisions (the RNG and both orders restored)
    assert make_learned({"learned_guard": "thompson"}).guard == "thompson" and make_learned().guard == "off"
    with pytest.raises(OptionError, match="TOPICCRAWL_LEARNED_GUARD"):
        LearnedOptions.coerce({"learned_guard": "ucb"})
    with pytest.raises(ValueError, match="guard"):
        LearnedFrontier(guard="ucb")
    state = f.state()
    del state["learned"]["guard"]  # saved before the guard existed
    h = _guarded_frontier(0)
    h.load_state(state)
    assert h._arms == [[0.0, 0.0], [0.0, 0.0]] and len(h) == len(f)


def test_the_guard_is_refused_on_redis_with_one_line():
    from topiccrawl.redis.learned import RedisLearnedFrontier

    with pytest.raises(FrontierError, match="^TOPICCRAWL_LEARNED_GUARD is not available with TOPICCRAWL_STORE=redis"):
        RedisLearnedFrontier.from_options(None, {}, {"learned_guard": "thompson"})


def test_the_blend_is_validated_against_reaching_or_relevant_targets():
    """blend_label: most links lead to a relevant page within k hops; the model ranks the few that
    lead nowhere last, R(l) ranks the relevant targets first. Validated against reaching, the model
    gets at least half the weight; against relevant targets, R(l) keeps it all."""
    from scipy import sparse

    rng = np.random.default_rng(3)
    v = np.full(400, 0.25)  # two hops from a relevant page
    v[:30] = 1.0  # relevant targets
    v[30:45] = 0.0  # lead nowhere within k hops
    score = np.where(v == 1.0, 0.8, 0.4) + rng.normal(0, 0.05, 400)  # R(l): relevant targets first
    model = np.where(v == 0.0, 0.1, 0.6) + rng.normal(0, 0.05, 400)  # the model: the dead ends last
    X = sparse.csr_matrix(np.column_stack([np.zeros((400, 16 + len(NUMERIC) - 1)), score]))
    chosen = {}
    for label in ("reach", "target"):
        m = LinkValueModel(n_features=16, blend_label=label)
        y = m._validation_labels(v)
        assert int(y.sum()) == (385 if label == "reach" else 30)
        m._update_blend(X, model, y)
        chosen[label] = m.blend_
    assert chosen["reach"] >= 0.5 and chosen["target"] == 0.0, chosen
    _check_model_option("blend_label", "target", "reach", "hops")


def test_state_round_trip_keeps_the_counters_of_every_statistic():
    """A resumed crawl's learned/* statistics cover every run: the holder and judge counters are
    saved with the rest (they restarted at 0 on resume)."""
    def fresh():
        return LearnedFrontier(holder_refresh=True, holder_mean=True, anchor_judge=0.5, judge_refresh=True)

    f = fresh()
    f._holder_refreshed, f._holders_followed, f._judge_followed, f._judge_refreshed = 7, 5, 3, 2
    keys = ("learned/holder_refreshed", "learned/holders_followed", "learned/judge_followed", "learned/judge_refreshed")
    assert [f.stats()[k] for k in keys] == [7, 5, 3, 2]
    g = fresh()
    g.load_state(pickle.loads(pickle.dumps(f.state())))
    assert [g.stats()[k] for k in keys] == [7, 5, 3, 2]
    # a state saved before these were: they start from 0
    old = pickle.loads(pickle.dumps(f.state()))
    del old["learned"]["tallies"]
    h = fresh()
    h.load_state(old)
    assert [h.stats()[k] for k in keys] == [0, 0, 0, 0]
