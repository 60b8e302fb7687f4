"""Learning from pages: Traditional-Chinese tokenisation, stop words, topic words from example
pages, and the calibrated page classifier (labelled and PU training).

The generated web (in-process, ground-truth labels) always runs; Wikispeedia (real articles and
categories, $TOPICCRAWL_DATA_DIR/wikispeedia) skips with the reason when the data is absent.
Thresholds are measured values with a margin; the measurements are in the comments.
"""

from __future__ import annotations

import pickle

import jieba
import numpy as np
import pytest
import tomllib
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from conftest import shared_data_dir
from topiccrawl.learning.classifier import PageClassifier, hash_terms
from topiccrawl.learning.examples import format_words_toml, topic_words
from topiccrawl.learning.focus import RELIABLE_AUC, RELIABLE_C, PageFocus
from topiccrawl.learning.normalize import stopwords, to_simplified
from topiccrawl.scoring.text import STOPWORDS, has_cjk, tokenize
from topiccrawl.scoring.topic import load_topic
from topiccrawl.weblab.corpus import open_corpus
from topiccrawl.weblab.generated import load_words

# -- Traditional Chinese and stop words ------------------------------------------------------

#: written for this test: a typhoon report in Traditional characters
TRADITIONAL = (
    "颱風「海燕」今晨在東部沿海登陸，中心附近最大風力達十四級，氣象局發布海上陸上颱風警報。"
    "受颱風環流影響，北部山區出現豪雨，多條河川水位暴漲，當局已撤離低窪地區居民並關閉學校。"
    "風暴潮使沿岸漁港海水倒灌，數百艘漁船回港避風，電力公司表示約三萬戶停電，正在搶修線路。"
    "專家提醒民眾遠離海邊與山區，注意土石流與淹水災情，颱風過後仍須防範強降雨帶來的災害。")


def _single_share(terms: list[str]) -> float:
    return sum(len(t) == 1 for t in terms) / len(terms)


def test_traditional_text_tokenises_like_its_simplified_form():
    simplified = to_simplified(TRADITIONAL)
    assert "台风" in simplified and "颱" not in simplified and len(simplified) == len(TRADITIONAL)
    terms = tokenize(TRADITIONAL)
    assert terms == tokenize(simplified)
    assert terms.count("台风") == 4 and {"风暴潮", "登陆", "停电", "渔船"} <= set(terms)
    # jieba straight on the Traditional text (the tokenizer before conversion): 颱|風, 離海邊 ...
    raw = [t for t in jieba.lcut(TRADITIONAL) if has_cjk(t) and t not in STOPWORDS]
    assert "台风" not in raw and "颱" in raw
    assert _single_share(raw) > 0.18 and _single_share(terms) < 0.12  # measured 0.22 vs 0.08


def test_to_simplified_keeps_simplified_and_latin_text():
    latin = "Typhoon Haiyan, 2013: storm surge & 300 km/h gusts"
    assert to_simplified(latin) is latin
    simplified = "台风“海燕”在福建登陆，气象部门发布暴雨预警。GB18030编码 ok"
    assert to_simplified(simplified) == simplified
    assert to_simplified("颱風 Typhoon 風暴潮") == "台风 Typhoon 风暴潮"


def test_stop_words_of_both_scripts():
    zh, en = stopwords("zh"), stopwords("en")
    assert 150 <= len(zh) <= 500 and 150 <= len(en) <= 500
    assert {"的", "了", "我们", "因为", "已经", "这些"} <= zh and not zh & {"台风", "暴雨", "灾害"}
    assert {"the", "of", "because", "don't", "don\u2019t", "themselves"} <= en
    assert not en & {"storm", "weather", "hurricane"}
    assert all(to_simplified(w) == w for w in zh)  # Simplified forms only
    with pytest.raises(ValueError):
        stopwords("fr")


# -- the generated web: pages, terms and ground truth ------------------------------------------

TYPHOON = "topic:台风灾害"
DISASTER = ("topic:台风灾害", "topic:暴雨灾害")


@pytest.fixture(scope="module")
def generated():
    """(terms per page, label sets) of the 2,000-page generated zh web, in URL order."""
    web = open_corpus("generated:zh-disaster?pages=2000&seed=1")
    pages = []
    for url in web.iter_urls():
        doc = web.doc(url)
        if doc is not None and doc.text:
            pages.append((tokenize(doc.text), web.labels(url)))
    return [t for t, _ in pages], [lab for _, lab in pages]


def _labels(labels, wanted) -> np.ndarray:
    return np.array([any(w in lab for w in wanted) for lab in labels], dtype=int)


def _split(y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Stratified halves."""
    rng = np.random.default_rng(seed)
    train = np.concatenate([rng.permutation(np.flatnonzero(y == k))[: (y == k).sum() // 2] for k in (0, 1)])
    return np.sort(train), np.setdiff1d(np.arange(len(y)), train)


def _reliability(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """True rate among pages predicted < 0.2 and among pages predicted >= 0.5."""
    return float(y[p < 0.2].mean()), float(y[p >= 0.5].mean())


def test_hashed_features_are_hashing_vectorizers(generated):
    docs = generated[0][:300]
    expected = HashingVectorizer(analyzer=lambda d: d, n_features=2**18, alternate_sign=False,
                                 norm=None).transform(docs)
    assert (hash_terms(docs) != expected).nnz == 0
    assert (hash_terms(["台风 登陆", ["台风", "登陆"]], 2**10)[0] != hash_terms([["台风", "登陆"]], 2**10)).nnz == 0


def test_labelled_training_is_calibrated_on_held_out_pages(generated):
    docs, labels = generated
    y = _labels(labels, DISASTER)
    X = hash_terms(docs)
    for negatives_per_positive in (None, 2):  # natural prevalence, and one of 1/3
        keep = np.arange(len(y))
        if negatives_per_positive:
            rng = np.random.default_rng(1)
            neg = rng.permutation(np.flatnonzero(y == 0))[: negatives_per_positive * y.sum()]
            keep = np.sort(np.r_[np.flatnonzero(y == 1), neg])
        train, test = _split(y[keep])
        clf = PageClassifier(min_calibration=30).fit(X[keep[train]], y[keep[train]])
        assert clf.mode_ == "calibrated" and clf.coef_.shape[0] == 3  # 3 calibrated fold models
        p, truth = clf.predict_proba(X[keep[test]])[:, 1], y[keep[test]]
        # measured: mean 0.044 vs 0.042 (natural), 0.346 vs 0.336 (1/3); AUC >= 0.9998;
        # true rate 0.00 below 0.2 and 0.975-1.0 from 0.5
        assert abs(p.mean() - truth.mean()) < 0.1
        assert abs(clf.expected_harvest(X[keep[test]]) - p.mean()) < 1e-12
        low, high = _reliability(p, truth)
        assert high > 0.8 and low < 0.05
        assert roc_auc_score(truth, p) > 0.98


def test_calibrated_mode_is_calibrated_classifier_cv(generated):
    docs, labels = generated
    y = _labels(labels, DISASTER)
    X = hash_terms(docs[::2])
    clf = PageClassifier().fit(X, y[::2])
    features = TfidfTransformer(sublinear_tf=True).fit_transform(X).tocsr()[:, clf.columns_]
    reference = CalibratedClassifierCV(
        LogisticRegression(C=1.0, max_iter=300, tol=1e-3), method="sigmoid",
        cv=StratifiedKFold(3, shuffle=True, random_state=0)).fit(features, y[::2])
    test = hash_terms(docs[1::2])
    expected = reference.predict_proba(TfidfTransformer(sublinear_tf=True).fit(X).transform(test)
                                       .tocsr()[:, clf.columns_])
    assert np.allclose(clf.predict_proba(test), expected)


def test_fast_path_pickle_and_estimator_conventions(generated):
    docs, labels = generated
    y = _labels(labels, [TYPHOON])
    clf = PageClassifier(calibration="none").fit(docs[::2], y[::2])
    assert clf.mode_ == "logistic"
    batch = clf.predict_proba(docs[1::2][:200])[:, 1]
    one = np.array([clf.proba_one(d) for d in docs[1::2][:200]])
    assert np.allclose(one, batch, atol=1e-12)
    rows = hash_terms(docs[1::2][:200])
    assert np.allclose([clf.proba_row(rows[i]) for i in range(200)], batch, atol=1e-12)
    # a batch this large looks its columns up in a table, not by binary search: the same numbers
    rows = hash_terms(docs[1::2])
    assert rows.nnz > 65536
    assert np.allclose([clf.proba_row(rows[i]) for i in range(rows.shape[0])], clf.predict_proba(rows)[:, 1],
                       atol=1e-12)
    # the model is a logistic regression over TfidfTransformer(sublinear_tf=True) features
    tfidf = TfidfTransformer(sublinear_tf=True).fit(hash_terms(docs[::2]))
    weights = np.zeros(2**18)
    weights[clf.columns_] = clf.coef_[0]
    z = tfidf.transform(hash_terms(docs[1::2][:200])) @ weights + clf.intercept_[0]
    assert np.allclose(1 / (1 + np.exp(-z)), batch)
    restored = pickle.loads(pickle.dumps(clf))
    assert np.array_equal(restored.predict_proba(docs[1::2][:50]), clf.predict_proba(docs[1::2][:50]))
    assert clone(clf).get_params() == clf.get_params() and not hasattr(clone(clf), "coef_")
    assert clf.proba_one([]) == pytest.approx(clf.predict_proba([[]])[0, 1])
    with pytest.raises(ValueError):
        PageClassifier().fit(docs[:10], [1] * 10)
    with pytest.raises(ValueError):
        PageClassifier().fit(docs[:10], [1] + [-1] * 9)  # PU needs 2 positives


def test_pu_learning_from_five_positives(generated):
    docs, labels = generated
    y = _labels(labels, [TYPHOON])
    X = hash_terms(docs)
    train, test = _split(y)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        positives = rng.choice(train[y[train] == 1], 5, replace=False)
        unlabeled = np.setdiff1d(train, positives)
        clf = PageClassifier().refit(X[positives], X[unlabeled])
        assert clf.mode_ == "pu" and 0 < clf.c_ <= 1
        p = clf.predict_proba(X[test])[:, 1]
        # measured over these 3 draws: AUC >= 0.9997; self-assessed rate 0.006-0.009 on the
        # unlabeled pages (truth 0.018) and 0.011-0.015 on the test half (truth 0.024)
        assert roc_auc_score(y[test], p) > 0.97
        assert abs(clf.expected_harvest(X[unlabeled]) - y[unlabeled].mean()) < 0.05
        assert abs(p.mean() - y[test].mean()) < 0.05
        e1 = PageClassifier(pu_prior="e1").refit(X[positives], X[unlabeled])
        assert e1.c_ != clf.c_ and roc_auc_score(y[test], e1.predict_proba(X[test])[:, 1]) > 0.97
    # term lists give the same model as their hashed rows
    same = PageClassifier().refit([docs[i] for i in positives], [docs[i] for i in unlabeled])
    assert np.allclose(same.predict_proba(X[test]), clf.predict_proba(X[test]))


def test_pu_mixture_sets_that_keep_fewer_positives_can_only_lower_the_prior(generated):
    docs, labels = generated
    y = _labels(labels, [TYPHOON])
    X = hash_terms(docs)
    train, _ = _split(y)
    rng = np.random.default_rng(0)
    # impure pseudo-positives: 10 relevant pages and 10 others, as the top R(P) pages of a crawl
    positives = np.concatenate([rng.choice(train[y[train] == 1], 10, replace=False),
                                rng.choice(train[y[train] == 0], 10, replace=False)])
    unlabeled = np.setdiff1d(train, positives)
    fits = {kept: PageClassifier(pu_kept=kept).refit(X[positives], X[unlabeled]) for kept in (1.0, 0.5, 0.25, 0.1)}
    priors = [fits[kept].prior_ for kept in (1.0, 0.5, 0.25, 0.1)]
    assert priors == sorted(priors, reverse=True) and priors[0] > priors[-1]
    assert fits[0.1].c_ > fits[1.0].c_
    assert fits[0.1].expected_harvest(X[unlabeled]) < fits[1.0].expected_harvest(X[unlabeled])
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="pu_kept"):
            PageClassifier(pu_kept=bad).refit(X[positives], X[unlabeled])
    # a classifier pickled by code without pu_kept (a JOBDIR of an older version) refits as 0.5
    old = PageClassifier()
    del old.__dict__["pu_kept"]
    restored = pickle.loads(pickle.dumps(old)).refit(X[positives], X[unlabeled])
    assert restored.prior_ == fits[0.5].prior_


def test_the_held_out_auc_tells_positives_that_stand_out_from_ones_that_do_not(generated):
    """``heldout_auc_``: how well the PU fit's held-out positives rank above the unlabeled pages;
    :class:`PageFocus` flags its self-assessment unreliable below ``RELIABLE_AUC``."""
    docs, labels = generated
    y = _labels(labels, [TYPHOON])
    X = hash_terms(docs)
    rng = np.random.default_rng(0)
    relevant, other = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    positives = rng.choice(relevant, 10, replace=False)
    unlabeled = rng.choice(np.setdiff1d(np.arange(len(y)), positives), 500, replace=False)
    clear = PageClassifier().refit(X[positives], X[unlabeled])
    assert clear.heldout_auc_ > 0.95
    # positives drawn from the same pages as the unlabeled ones: nothing for held-out ones to stand out by
    blurred = rng.choice(other, 10, replace=False)
    mixed = PageClassifier().refit(X[blurred], X[np.setdiff1d(unlabeled, blurred)])
    assert mixed.heldout_auc_ < 0.75
    # labelled training has no held-out positives against unlabeled pages
    train, _ = _split(y)
    assert PageClassifier().fit(X[train], y[train]).heldout_auc_ is None
    # through PageFocus: the flag follows the threshold, and is reported
    for pages, flagged in ((positives, False), (blurred, True)):
        focus = PageFocus(use_words=False, min_pages=1000)
        for i in pages:
            focus.add_example(docs[i])
        for i in np.setdiff1d(unlabeled, pages)[:300]:
            focus.observe(docs[i], 0.0)
        assert focus.refit()
        assert focus.unreliable is flagged and (focus.heldout_auc < RELIABLE_AUC) is flagged
        assert focus.stats()["classifier/unreliable"] is flagged


def test_with_words_an_estimate_mostly_extrapolated_is_flagged(generated):
    """With words the held-out positives are pseudo-positives, which stand out whatever the topic;
    the estimate is also flagged when they are a small share c of the pages the classifier takes
    for relevant (c < RELIABLE_C): the more relevant pages the crawl holds beyond the 3 % it
    labels, the smaller c."""
    docs, labels = generated
    y = _labels(labels, DISASTER)
    relevant, other = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    for share, reason in ((0.03, None), (0.2, "c")):
        rng = np.random.default_rng(0)
        k = int(share * 300)
        pages = rng.permutation(np.r_[rng.choice(relevant, k, replace=False), rng.choice(other, 300 - k, replace=False)])
        focus = PageFocus(use_words=True, min_pages=1000)
        for i in pages:  # R(P) > 0 on the relevant pages only: the pseudo-positives are relevant
            focus.observe(docs[i], float(y[i]) * (0.2 + 0.8 * rng.random()))
        assert focus.refit()
        assert focus.heldout_auc >= RELIABLE_AUC  # the AUC rule alone would trust both
        assert (focus.classifier.c_ < RELIABLE_C) is (reason == "c")
        assert focus.unreliable_reason == reason and focus.unreliable is (reason is not None)
        assert focus.stats()["classifier/unreliable"] is (reason is not None)
        assert focus.stats().get("classifier/unreliable_reason") == reason
        focus.use_words = False  # a topic of examples only keeps the AUC rule alone
        assert focus.unreliable_reason is None


def test_the_auc_rule_raises_a_flagged_estimate_to_the_held_out_auc_bound(generated):
    """``estimate="auc"``: with words, no example pages and a kept refit's held-out AUC from ½ to
    below RELIABLE_AUC, the self-assessed harvest rate is max(mean P, 2·(1 − AUC)); otherwise, and
    under ``"mean"``, the mean P. Where many fetched pages are relevant the pseudo-positives (the densest 3 %) put P's level
    under the truth (here 0.274 against 0.4 relevant), and the bound (0.422) is nearer."""
    docs, labels = generated
    y = _labels(labels, DISASTER)
    relevant, other = np.flatnonzero(y == 1), np.flatnonzero(y == 0)

    def crawl(share: float, n: int, seed: int, estimate: str) -> tuple[PageFocus, float]:
        rng = np.random.default_rng(seed)
        k = int(share * n)
        pages = rng.permutation(np.r_[rng.choice(relevant, k, replace=False), rng.choice(other, n - k, replace=False)])
        focus = PageFocus(use_words=True, min_pages=1000, estimate=estimate)
        for i in pages:  # R(P) > 0 on the relevant pages only
            focus.observe(docs[i], float(y[i]) * (0.2 + 0.8 * rng.random()))
        assert focus.refit()
        return focus, float(y[pages].mean())

    focus, truth = crawl(0.4, 200, 1, "auc")
    assert focus.unreliable_reason == "auc" and focus.auc_bound == pytest.approx(2 * (1 - focus.heldout_auc))
    assert focus.mean_probability < focus.auc_bound == focus.expected_harvest
    assert abs(focus.expected_harvest - truth) < abs(focus.mean_probability - truth)
    stats = focus.stats()
    assert stats["classifier/expected_harvest"] == pytest.approx(focus.auc_bound, abs=1e-6)
    assert stats["classifier/mean_probability"] == pytest.approx(focus.mean_probability, abs=1e-6)
    assert stats["classifier/estimate"] == "auc_bound" and focus.bound_applied
    # a last refit thrown away (its positives did not rank): its AUC gives no bound, the mean stands
    focus._discarded_auc = 0.44
    assert focus.unreliable_reason == "auc" and focus.auc_bound is None
    assert focus.expected_harvest == focus.mean_probability and focus.stats()["classifier/estimate"] == "mean"
    focus._discarded_auc = None
    kept_auc = focus.classifier.heldout_auc_
    focus.classifier.heldout_auc_ = 0.4  # a kept fit whose positives rank under the fetched pages: no bound
    assert focus.auc_bound is None and focus.expected_harvest == focus.mean_probability
    focus.classifier.heldout_auc_ = kept_auc
    focus.estimate = "mean"
    assert focus.expected_harvest == focus.mean_probability and not focus.bound_applied
    focus.estimate = "auc"
    focus.add_example(docs[relevant[0]])  # example pages: the positives are not the densest few
    assert focus.expected_harvest == focus.mean_probability
    # not flagged by the AUC: the mean stands
    focus, _ = crawl(0.27, 300, 0, "auc")
    assert focus.heldout_auc >= RELIABLE_AUC and focus.expected_harvest == focus.mean_probability
    with pytest.raises(ValueError, match="estimate='max': expected one of mean, auc"):
        PageFocus(estimate="max")
    # a focus pickled before the rule existed (a JOBDIR of older code) reports the mean
    old = PageFocus()
    del old.__dict__["estimate"]
    assert pickle.loads(pickle.dumps(old)).estimate == "mean"


# -- topic words from example pages ------------------------------------------------------------


def test_topic_words_of_five_relevant_pages_match_the_topic(generated, tmp_path):
    docs, labels = generated
    relevant = [i for i, lab in enumerate(labels) if TYPHOON in lab]
    rng = np.random.default_rng(3)
    examples = list(rng.choice(relevant, 5, replace=False))
    background = [i for i in rng.choice(len(docs), 500, replace=False) if i not in examples]
    words = topic_words([docs[i] for i in examples], [docs[i] for i in background], k=30)
    assert words == topic_words([docs[i] for i in examples], [docs[i] for i in background], k=30)
    top = [w for w, _ in words]
    weights = [x for _, x in words]
    assert len(words) == 30 and weights[0] == 1.0 and all(0 < x <= 1 for x in weights)
    assert weights == sorted(weights, reverse=True)
    shipped = set(load_topic("台风灾害").words)  # 台风 风暴潮 暴雨 气压 风力
    vocabulary = {t for w in load_words("zh-typhoon")[0] for t in tokenize(w)}
    # 20 draws of 5 examples: 台风 first every time, 2-4 of the 5 shipped words in the top 30,
    # 83-100 % of the top 30 from the generator's typhoon vocabulary
    assert top[0] == "台风" and "风暴潮" in top and len(shipped & set(top)) >= 2
    assert np.mean([w in vocabulary for w in top]) >= 0.7
    assert not set(top) & (stopwords("zh") | stopwords("en"))

    toml = format_words_toml(words[:10])
    assert toml.startswith("[words]\n") and '"台风" = 1.00' in toml
    path = tmp_path / "derived.toml"
    path.write_text(f'name = "derived"\nbeta = 0.5\n\n{toml}', encoding="utf-8")
    assert load_topic(str(path)).words == dict(tomllib.loads(toml)["words"])
    # as the crawl prints it: with its β first, a topic file once a name is put above it
    toml = format_words_toml(words[:10], beta=0.3)
    path.write_text(f'name = "derived"\n{toml}', encoding="utf-8")
    topic = load_topic(str(path))
    assert topic.beta == 0.3 and topic.words == dict(tomllib.loads(toml)["words"])


def test_topic_words_edge_cases():
    assert topic_words([], ["a page"]) == []
    words = topic_words(["Storm surge and storms", "a storm surge warning"], [], k=5)
    assert words[0] == ("storm", 1.0) and "and" not in dict(words)
    assert format_words_toml([("storm", 0.0004), ("风暴潮", 0.5), ("don't", 1)]) == (
        '[words]\nstorm = 0.01\n"风暴潮" = 0.50\n"don\'t" = 1.00\n')
    # a word of every page of the web (site boilerplate) tops the examples' own counts; against a
    # background of ordinary pages of the same web (the seeds) the topic's own words come first
    examples = ["wikipedia wikipedia saffron spice crocus", "wikipedia wikipedia celery leaf stalk saffron",
                "wikipedia wikipedia saffron celery"]
    background = ["wikipedia wikipedia earth planet", "wikipedia wikipedia country state", "wikipedia wikipedia map"]
    assert topic_words(examples, [], k=3)[0][0] == "wikipedia"
    ranked = [w for w, _ in topic_words(examples, background, k=3)]
    assert ranked[:2] == ["saffron", "celery"] and "wikipedia" not in ranked[:2]
    # Traditional examples give Simplified topic words
    trad = topic_words([TRADITIONAL, TRADITIONAL.replace("海燕", "莫拉克")], ["今天天气晴朗，适合出游。"], k=5)
    assert trad[0][0] == "台风"


# -- Wikispeedia: real articles and categories ---------------------------------------------------


@pytest.fixture(scope="module")
def wikispeedia():
    root = shared_data_dir()
    if root is None or not (root / "wikispeedia").is_dir():
        pytest.skip("third-party data wikispeedia/ missing: set TOPICCRAWL_DATA_DIR to the folder that "
                    "holds it (docs/real-corpora.md)")
    web = open_corpus(f"wikispeedia:{root / 'wikispeedia'}")
    urls = list(web.iter_urls())
    docs = []
    for url in urls:
        doc = web.doc(url)
        docs.append(tokenize(f"{doc.title} {doc.text[:3000]}"))
    return hash_terms(docs), [web.labels(u) for u in urls]


def test_wikispeedia_calibration_on_held_out_articles(wikispeedia):
    X, labels = wikispeedia
    for category in ("subject.Science.Biology", "subject.Geography.European_Geography"):
        y = _labels(labels, [category])
        train, test = _split(y)
        clf = PageClassifier().fit(X[train], y[train])
        p = clf.predict_proba(X[test])[:, 1]
        # measured: Biology mean 0.150 vs 0.152, AUC 0.995, bins 0.007 / 0.95; European
        # geography 0.032 vs 0.030, AUC 0.963, bins 0.013 / 1.0
        assert clf.mode_ == "calibrated"
        assert abs(p.mean() - y[test].mean()) < 0.1
        low, high = _reliability(p, y[test])
        assert high > 0.7 and low < 0.05
        assert roc_auc_score(y[test], p) > 0.9


def test_wikispeedia_pu_learning(wikispeedia):
    X, labels = wikispeedia
    y = _labels(labels, ["subject.Science.Biology"])
    train, test = _split(y)
    for n_pos in (5, 20):
        for seed in range(2):
            rng = np.random.default_rng(seed)
            positives = rng.choice(train[y[train] == 1], n_pos, replace=False)
            unlabeled = np.setdiff1d(train, positives)
            clf = PageClassifier().refit(X[positives], X[unlabeled])
            p = clf.predict_proba(X[test])[:, 1]
            # measured: AUC 0.95-0.96 with 5 positives, 0.97-0.99 with 20; self-assessed rate
            # 0.04-0.06 (5) and 0.105-0.127 (20) where the truth is 0.144-0.150
            assert roc_auc_score(y[test], p) > 0.85
            if n_pos == 20:
                assert abs(clf.expected_harvest(X[unlabeled]) - y[unlabeled].mean()) < 0.1


# -- pseudo-labels of a topic with words -------------------------------------------------------


def test_pseudo_positive_rules_on_plain_scores():
    from topiccrawl.learning.focus import pseudo_positive_index

    # 100 fetched pages, R(P) written out: 60 zeros, 30 weak matches (0.31-0.45), then 10 strong
    # ones (0.50-0.95) at known positions
    r = np.zeros(100)
    r[60:90] = np.linspace(0.31, 0.45, 30)
    strong = [3, 17, 25, 41, 58, 92, 93, 95, 97, 99]
    r[strong] = np.linspace(0.50, 0.95, 10)
    # rule "top": the 3 % of highest R(P), i.e. 3 pages, whatever β is
    assert pseudo_positive_index(r, "top", share=0.03).tolist() == [95, 97, 99]
    assert pseudo_positive_index(r, "top", share=0.10, beta=0.9).tolist() == sorted(strong)
    # ceil(share * n), at least min_count, and never a page with R(P) = 0
    assert len(pseudo_positive_index(r, "top", share=0.031)) == 4
    assert pseudo_positive_index(r[:10], "top", share=0.03, min_count=3).tolist() == [3]
    assert pseudo_positive_index(np.zeros(50), "top").tolist() == []
    # ties at the cut: earlier pages first
    assert pseudo_positive_index([0.5, 0.7, 0.5, 0.5], "top", share=0.5, min_count=1).tolist() == [0, 1]
    # rule "beta" (the earlier one): R(P) >= max(β, the 25th percentile) calls the 40 pages with
    # R(P) >= 0.3 relevant, 4 times as many as the strong ones
    assert len(pseudo_positive_index(r, "beta", beta=0.3)) == 40
    assert pseudo_positive_index(r, "beta", beta=0.5).tolist() == sorted(strong)
    assert pseudo_positive_index(r, "beta", beta=0.0).tolist() == []  # bound 0: nothing
    # max_count keeps the highest
    assert pseudo_positive_index(r, "beta", beta=0.3, max_count=2).tolist() == [97, 99]
    # rule "relative": R(P) >= relative x its 99th percentile (0.95 here): the count follows the
    # scores, not a share of the pages
    assert pseudo_positive_index(r, "relative").tolist() == sorted(strong)
    assert len(pseudo_positive_index(r, "relative", relative=0.3)) == 40
    assert pseudo_positive_index(r, "relative", relative=1.0, min_count=3).tolist() == [95, 97, 99]
    assert pseudo_positive_index(np.zeros(50), "relative").tolist() == []
    with pytest.raises(ValueError, match="pseudo-label rule"):
        pseudo_positive_index(r, "median")


def test_page_focus_trains_on_the_top_share_without_beta():
    from topiccrawl.learning.focus import PageFocus

    # synthetic pages: 10 about "orbit planet", 90 about other things; R(P) given, and β = 0.05
    # (so low that rule "beta" also calls the 50 pages of R(P) = 0.1 relevant)
    rng = np.random.default_rng(0)
    focus_top = PageFocus(beta=0.05, pseudo="top", pseudo_share=0.1, min_pages=100, refit_every=1000)
    # 60 positives of 100 pages, 50 of them weak matches: held-out positives cannot rank, and such a
    # refit would be discarded (test_a_refit_whose_held_out_positives_do_not_rank_is_discarded)
    focus_beta = PageFocus(beta=0.05, pseudo="beta", min_pages=100, refit_every=1000, unranked="flat")
    truth = []
    for i in range(100):
        on = i % 10 == 0
        words = ["orbit", "planet", "telescope"] if on else ["river", "city", "farm", "music"]
        terms = list(rng.choice(words, 30)) + list(rng.choice(["the", "of", "year", "people"], 20))
        relevance = 0.6 + 0.03 * (i % 7) if on else (0.1 if i % 2 else 0.0)
        truth.append(on)
        focus_top.observe(terms, relevance)
        focus_beta.observe(terms, relevance)
    assert focus_top.fitted and focus_top.positives_used == 10
    assert focus_beta.fitted and focus_beta.positives_used == 60  # the 50 weak matches too
    with pytest.raises(ValueError, match="pseudo="):
        PageFocus(pseudo="nope")


def test_a_callers_rank_picks_the_pseudo_positives_instead_of_r_p():
    """``observe(rank=...)``: the caller's score (e.g. R(P) mixed with the title's closeness to the
    topic) ranks the pseudo-positives; R(P) still gates nothing else."""
    from topiccrawl.learning.focus import PageFocus

    rng = np.random.default_rng(3)
    by_r = PageFocus(pseudo="top", pseudo_share=0.1, min_pages=100, refit_every=1000)
    by_rank = PageFocus(pseudo="top", pseudo_share=0.1, min_pages=100, refit_every=1000)
    pages = []
    for i in range(100):
        kind = "decoy" if i % 10 == 0 else "on" if i % 10 == 5 else "other"
        words = {"decoy": ["orbit", "election", "senate"], "on": ["orbit", "planet", "telescope"],
                 "other": ["river", "city", "farm", "music"]}[kind]
        terms = list(rng.choice(words, 30))
        # decoys hold the topic's words best (R(P) 0.9), the pages on the topic less (0.6), but their
        # titles are close to the topic: the caller's rank says so
        relevance = {"decoy": 0.9, "on": 0.6, "other": 0.0}[kind]
        rank = {"decoy": 0.5, "on": 0.7, "other": 0.0}[kind]
        pages.append((kind, terms))
        by_r.observe(terms, relevance)
        by_rank.observe(terms, relevance, rank=rank)
    assert by_r.fitted and by_rank.fitted and by_r.positives_used == by_rank.positives_used == 10
    on = [t for k, t in pages if k == "on"]
    decoy = [t for k, t in pages if k == "decoy"]
    assert min(map(by_rank.classifier.proba_one, on)) > max(map(by_rank.classifier.proba_one, decoy))
    assert min(map(by_r.classifier.proba_one, decoy)) > max(map(by_r.classifier.proba_one, on))


def test_page_focus_rescores_its_reservoir_pages_by_url_at_each_refit():
    from topiccrawl.learning.focus import PageFocus

    rng = np.random.default_rng(1)
    focus = PageFocus(pseudo="top", pseudo_share=0.1, min_pages=40, refit_every=1000, max_unlabeled=30)
    pages = {}
    for i in range(40):
        on = i % 8 == 0
        words = ["orbit", "planet", "telescope"] if on else ["river", "city", "farm", "music"]
        pages[f"http://x.test/{i}"] = terms = list(rng.choice(words, 30))
        focus.observe(terms, 0.7 if on else 0.05, key=f"http://x.test/{i}")
    assert focus.fitted and focus.refits == 1
    probs = focus.reservoir_probabilities
    assert len(probs) == 30 and set(probs) <= set(pages)  # the reservoir's pages (30 of 40), by URL
    for url, p in probs.items():
        assert p == pytest.approx(focus.classifier.proba_one(pages[url]), abs=1e-9)
    assert min(p for u, p in probs.items() if int(u.rsplit("/", 1)[1]) % 8 == 0) > max(
        p for u, p in probs.items() if int(u.rsplit("/", 1)[1]) % 8)


@pytest.mark.parametrize("wordless", ["keep", "zero", "exclude"])
def test_pages_with_none_of_the_topic_words_by_the_wordless_rule(wordless, monkeypatch):
    """``wordless``: with a topic's words, a page with R(P) = 0 keeps the classifier's P, gets 0,
    or also stays out of the unlabeled pages the classifier learns from."""
    from topiccrawl.learning.focus import PageFocus

    def focus_for(rule, use_words=True):
        return PageFocus(pseudo="top", pseudo_share=0.1, min_pages=60, refit_every=1000, wordless=rule,
                         use_words=use_words)

    rng = np.random.default_rng(2)
    pages = []
    for i in range(60):
        on, wordless_page = i % 6 == 0, i % 3 == 2  # 10 on the topic, 20 with none of its words
        words = ["orbit", "planet", "telescope"] if on else ["orbit", "city", "farm", "music"]
        terms = list(rng.choice(words, 30))
        pages.append((f"http://x.test/{i}", terms, 0.0 if wordless_page else (0.7 if on else 0.1)))
    focus, keep = focus_for(wordless), focus_for("keep")
    for u, t, r in pages:
        keep.observe(t, r, key=u)
    fits = []
    fit = PageClassifier.refit  # a refit fits a copy of the classifier: watch them all
    monkeypatch.setattr(PageClassifier, "refit", lambda self, pos, unl: (fits.append(unl.shape[0]), fit(self, pos, unl))[1])
    p_last = [focus.observe(t, r, key=u) for u, t, r in pages][-1]
    assert focus.fitted and keep.fitted and pages[-1][2] == 0.0
    zeros = [u for u, _, r in pages if r == 0.0]
    probs = focus.reservoir_probabilities
    assert fits == [40 if wordless == "exclude" else 60]  # the unlabeled set the classifier saw
    if wordless == "keep":
        assert p_last > 0 and min(probs[u] for u in zeros) > 0
        assert focus.expected_harvest == pytest.approx(keep.expected_harvest)
    else:
        assert p_last == 0.0 and all(probs[u] == 0.0 for u in zeros)
        assert max(probs[u] for u in probs if u not in zeros) > 0
        assert focus.expected_harvest == pytest.approx(sum(probs.values()) / 60)
        assert focus.expected_harvest < keep.expected_harvest
    if wordless == "zero":  # the same model as "keep": only the wordless pages' P changed
        assert all(probs[u] == pytest.approx(keep.reservoir_probabilities[u]) for u in probs if u not in zeros)
    # a topic of example pages only has no words to miss: the rule does not apply
    examples_only = focus_for(wordless, use_words=False)
    examples_only.add_example(pages[0][1])
    examples_only.add_example(pages[6][1])
    for u, t, r in pages:
        examples_only.observe(t, r, key=u)
    assert min(examples_only.reservoir_probabilities[u] for u in zeros) > 0
    with pytest.raises(ValueError, match="wordless="):
        PageFocus(wordless="drop")
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="TOPICCRAWL_CLASSIFIER_WORDLESS='drop'"):
        TopicCrawlConfig(classifier_wordless="drop").validate()


def test_pseudo_positives_ranked_by_the_full_vector_cosine():
    """``rank_scorer``: rule "top" ranks the pseudo-positives by how much of a page is about the
    topic (the cosine over the full page vector), not by the mix of topic words it holds (R(P))."""
    from topiccrawl.learning.focus import PageFocus
    from topiccrawl.scoring.relevance import RelevanceScorer
    from topiccrawl.scoring.topic import Topic

    topic = Topic(name="space", language="en", words={"orbit": 1.0, "planet": 1.0, "moon": 0.5}, beta=0.3)
    restricted = RelevanceScorer(topic)
    rng = np.random.default_rng(3)
    other = [f"w{i}" for i in range(400)]
    pages = []
    for i in range(100):
        if i % 10 == 0:  # short pages about the topic: orbit is a fifth of each, planet and moon missing
            terms = list(rng.choice(["orbit", "telescope", "star", "galaxy", "comet"], 40))
        elif i % 10 == 5:  # long pages about other things that hold the topic words in its mix
            terms = list(rng.choice(other[:60], 600)) + ["orbit", "planet"] * 3 + ["moon"] * 2
        else:
            terms = list(rng.choice(other, 50)) + (["planet"] if i % 3 == 0 else [])
        pages.append((f"http://x.test/{i}", terms, restricted.page_relevance(terms)))
    assert min(r for u, _, r in pages if u.endswith("5")) > max(r for u, _, r in pages if u.endswith("0"))

    def focus_for(rank_scorer):
        return PageFocus(pseudo="top", pseudo_share=0.1, min_pages=100, refit_every=1000, rank_scorer=rank_scorer)

    by_r, by_full = focus_for(None), focus_for(RelevanceScorer(topic, restrict_to_topic=False))
    for u, t, r in pages:
        by_r.observe(t, r, key=u)
        by_full.observe(t, r, key=u)
    on = [u for u, _, _ in pages if u.endswith("0")]
    long_ = [u for u, _, _ in pages if u.endswith("5")]
    for focus, learnt, not_learnt in ((by_r, long_, on), (by_full, on, long_)):
        p = focus.reservoir_probabilities
        assert focus.fitted and focus.positives_used == 10
        assert min(p[u] for u in learnt) > max(p[u] for u in not_learnt)
    # a focus pickled by older code (no rank, wordless or rank_scorer yet) loads and ranks by R(P)
    state = dict(by_r.__dict__)
    for name in ("_rank", "wordless", "rank_scorer"):
        state.pop(name)
    old = PageFocus.__new__(PageFocus)
    old.__setstate__(state)
    assert old.wordless == "keep" and old.rank_scorer is None and old._rank == old._relevance
    assert old.refit() and old.reservoir_probabilities == pytest.approx(by_r.reservoir_probabilities)
    # saved with the focus (JOBDIR), the full vector's document frequencies go on from where they were
    again = pickle.loads(pickle.dumps(by_full))
    assert again.rank_scorer.df.n_docs == by_full.rank_scorer.df.n_docs == 100
    assert again.rank_scorer.page_relevance(pages[0][1]) == by_full.rank_scorer.page_relevance(pages[0][1])
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig

    with pytest.raises(ConfigError, match="TOPICCRAWL_CLASSIFIER_RANK='tfidf'"):
        TopicCrawlConfig(classifier_rank="tfidf").validate()


def test_a_refit_whose_held_out_positives_do_not_rank_is_discarded():
    """``unranked="discard"``: a PU refit whose held-out positives score no higher than the fetched
    pages (``ranks_`` False, every page the same P under ``"flat"``) is thrown away; the model
    before it stays, or before any fit P stays R(P); the flag reads the discarded refit's AUC."""
    from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig
    from topiccrawl.learning.focus import PageFocus

    topic = [f"t{c}" for c in "abcdefghij"]
    common = [f"w{i}" for i in range(200)]
    rng = np.random.default_rng(0)
    examples = [list(rng.choice(topic + common[:30], 40)) for _ in range(5)]
    ordinary = [list(rng.choice(common, 40)) for _ in range(60)]
    # then pages drawn like the examples: held-out examples no longer stand out among them
    alike = [list(rng.choice(topic + common[:30], 40)) for _ in range(240)]
    on_topic, off_topic = list(rng.choice(topic + common[:30], 40)), list(rng.choice(common, 40))

    def focus(rule, pages):
        f = PageFocus(use_words=False, min_pages=10**6, refit_every=10**6, unranked=rule)
        for terms in examples:
            f.add_example(terms)
        for terms in pages:
            f.observe(terms, 0.25)
        return f

    flat, kept = focus("flat", ordinary), focus("discard", ordinary)
    assert flat.refit() and kept.refit() and kept.classifier.ranks_ and kept.heldout_auc > 0.95
    good = kept.classifier
    before = good.predict_proba([on_topic, off_topic])[:, 1]
    assert before[0] > 0.9 > 0.1 > before[1]
    for terms in alike:
        flat.observe(terms, 0.25)
        kept.observe(terms, 0.25)
    # the rule before (flat): the refit is taken, and every page gets one probability
    assert flat.refit() and not flat.classifier.ranks_
    p = flat.classifier.predict_proba([on_topic, off_topic])[:, 1]
    assert p[0] == pytest.approx(p[1], abs=1e-3)
    # discard: the refit is thrown away, the model before it still ranks
    assert not kept.refit()
    assert kept.classifier is good and kept.refits == 1 and kept.discarded == 1
    assert list(kept.classifier.predict_proba([on_topic, off_topic])[:, 1]) == list(before)
    assert kept.observe(on_topic, 0.25) == pytest.approx(before[0])
    assert kept.heldout_auc < RELIABLE_AUC and kept.unreliable  # the discarded refit's AUC
    assert kept.stats()["classifier/discarded"] == 1 and "classifier/discarded" not in flat.stats()
    # before any fit: a first refit that cannot rank leaves P = R(P)
    first = focus("discard", alike)
    assert not first.refit() and not first.fitted and first.discarded == 1
    assert first.observe(on_topic, 0.25) == 0.25 and first.expected_harvest is None
    assert first.unreliable_reason == "auc"
    # no estimate, and the stats say why
    assert first.stats()["classifier/unreliable"] is True and "classifier/expected_harvest" not in first.stats()
    with pytest.raises(ValueError, match="unranked="):
        PageFocus(unranked="drop")
    with pytest.raises(ConfigError, match="TOPICCRAWL_CLASSIFIER_UNRANKED='drop'"):
        TopicCrawlConfig(classifier_unranked="drop").validate()


def test_the_self_assessment_counts_each_fetched_page_once():
    """The mean P of the fetched pages: the reservoir re-scored at the refit (the page whose fetch
    triggered it included), then each page fetched since with the P it was judged by."""
    rng = np.random.default_rng(5)

    def page(i):
        on = i % 5 == 0  # one page in five on the topic
        words = ["orbit", "planet", "telescope", "comet"] if on else ["city", "farm", "music", "orbit"]
        return f"http://x.test/{i}", list(rng.choice(words, 30)), 0.6 if on else 0.05

    focus = PageFocus(pseudo="top", pseudo_share=0.1, min_pages=60, refit_every=1000)
    judged = [focus.observe(t, r, key=u) for u, t, r in map(page, range(90))]
    assert focus.fitted and focus.refits == 1 and focus.pages == 90
    at_fit = focus.reservoir_probabilities
    assert len(at_fit) == 60 and at_fit["http://x.test/59"] == pytest.approx(judged[59])  # the refit's page
    assert focus.expected_harvest == pytest.approx((sum(at_fit.values()) + sum(judged[60:])) / 90)
