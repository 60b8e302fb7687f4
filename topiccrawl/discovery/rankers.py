"""DWDBRM ranking (Algorithm 2, *CombinedFunctionRank*): five rankers — naive Bayes (eq. 6),
logistic regression (eq. 2), one-class SVM, cosine (eq. 5) and Jaccard (eq. 4) similarity averaged
over the seeds (eq. 3) — as scikit-learn estimators, combined with the PageRank position of the
discovered graph (eq. 8). Method and defaults: ``docs/dwdbrm.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.stats import rankdata
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.preprocessing import normalize
from sklearn.svm import OneClassSVM

from topiccrawl.discovery.pages import (
    MAX_CHARS,
    DiscoveredPage,
    DWDBRMError,
    FeatureSet,
    PageVectorizer,
    build_vocabulary,
)
from topiccrawl.scoring.importance import LinkGraph
from topiccrawl.scoring.text import add_words

# ---------------------------------------------------------------------------------------------
# rankers: scikit-learn estimators; ``features`` picks their input from a FeatureSet,
# ``decision_function`` is higher for more domain-like pages


class _Ranker(BaseEstimator):
    #: needs negative examples (background pages) in ``fit``
    needs_negatives = False

    def features(self, fs: FeatureSet):
        return fs.tf

    def _split(self, X, y) -> tuple[object, np.ndarray]:
        y = np.ones(X.shape[0], dtype=int) if y is None else np.asarray(y, dtype=int)
        if not (y == 1).any():
            raise DWDBRMError(f"{type(self).__name__}: no positive (seed) example")
        if self.needs_negatives and not (y == 0).any():
            raise DWDBRMError(f"{type(self).__name__} needs negative examples (background pages)")
        return X[y == 1], y


class NaiveBayesRanker(_Ranker):
    """Naive Bayes (eq. 6): P(c | x) ∝ P(c) Π_i P(x_i | c) over the log URL length and log host
    name length (Gaussian per class, standard deviation at least ``min_sd`` so that a handful
    of seeds cannot make the lengths decisive) and the keyword counts (multinomial, Laplace
    ``alpha``). The score is the log odds log P(seed | x) − log P(background | x)."""

    needs_negatives = True

    def __init__(self, alpha: float = 1.0, min_sd: float = 0.25):
        self.alpha = alpha
        self.min_sd = min_sd

    def features(self, fs: FeatureSet):
        lengths = np.log1p(np.column_stack([fs.url_length, fs.domain_length]))
        return sparse.hstack([sparse.csr_matrix(lengths), fs.tf], format="csr")

    def fit(self, X, y=None):
        _, y = self._split(X, y)
        lengths = X[:, :2].toarray()
        self.mean_ = np.array([lengths[y == c].mean(axis=0) for c in (0, 1)])
        self.var_ = np.maximum([lengths[y == c].var(axis=0) for c in (0, 1)], self.min_sd ** 2)
        self.words_ = MultinomialNB(alpha=self.alpha).fit(X[:, 2:], y)
        return self

    def decision_function(self, X) -> np.ndarray:
        lengths = X[:, :2].toarray()
        gauss = [-0.5 * (np.log(2 * np.pi * self.var_[c])
                         + (lengths - self.mean_[c]) ** 2 / self.var_[c]).sum(axis=1)
                 for c in (0, 1)]
        words = self.words_.predict_joint_log_proba(X[:, 2:])
        return gauss[1] - gauss[0] + words[:, 1] - words[:, 0]


class LogisticRegressionRanker(_Ranker):
    """Logistic regression (eq. 2) on binary keyword presence; seeds against background pages,
    classes balanced (a few seeds against many negatives)."""

    needs_negatives = True

    def __init__(self, C: float = 1.0, class_weight: str | None = "balanced", max_iter: int = 1000):
        self.C = C
        self.class_weight = class_weight
        self.max_iter = max_iter

    def features(self, fs: FeatureSet):
        return fs.binary

    def fit(self, X, y=None):
        self._split(X, y)
        self.model_ = LogisticRegression(C=self.C, class_weight=self.class_weight,
                                         max_iter=self.max_iter).fit(X, y)
        return self

    def decision_function(self, X) -> np.ndarray:
        return self.model_.decision_function(X)


class OneClassSVMRanker(_Ranker):
    """One-class SVM novelty detection on the seeds only: features are the L2-normalised keyword
    frequencies next to the L2-normalised keyword presence vector. The default kernel is linear:
    the features are non-negative, so the score grows with the overlap with the seeds; with an
    RBF kernel a page without any vocabulary term would sit closer to the seeds than a page
    sharing a few terms with them."""

    def __init__(self, kernel: str = "linear", nu: float = 0.5, gamma: str | float = "scale"):
        self.kernel = kernel
        self.nu = nu
        self.gamma = gamma

    def features(self, fs: FeatureSet):
        return sparse.hstack([normalize(fs.tf), normalize(fs.binary)], format="csr")

    def fit(self, X, y=None):
        positives, _ = self._split(X, y)
        self.model_ = OneClassSVM(kernel=self.kernel, nu=self.nu, gamma=self.gamma).fit(positives)
        return self

    def decision_function(self, X) -> np.ndarray:
        return self.model_.decision_function(X)


class CosineRanker(_Ranker):
    """Mean cosine similarity (eq. 5) of a page's term-frequency vector to the seeds' (eq. 3):
    (1/|S|) Σ_s cos(x, s) = x̂ · mean_s(ŝ) with x̂, ŝ the L2-normalised vectors."""

    def features(self, fs: FeatureSet):
        return normalize(fs.tf)

    def fit(self, X, y=None):
        positives, _ = self._split(X, y)
        self.centroid_ = np.asarray(positives.mean(axis=0)).ravel()
        return self

    def decision_function(self, X) -> np.ndarray:
        return np.asarray(X @ self.centroid_).ravel()


class JaccardRanker(_Ranker):
    """Mean Jaccard similarity (eq. 4) |x ∩ s| / |x ∪ s| of a page's keyword set to each seed's,
    averaged over the seeds (eq. 3); an empty union counts 0."""

    def features(self, fs: FeatureSet):
        return fs.binary

    def fit(self, X, y=None):
        self.seeds_, _ = self._split(sparse.csr_matrix(X), y)
        return self

    def decision_function(self, X) -> np.ndarray:
        X = sparse.csr_matrix(X)
        inter = (X @ self.seeds_.T).toarray()
        union = (np.asarray(X.sum(axis=1)) + np.asarray(self.seeds_.sum(axis=1)).T) - inter
        sims = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        return sims.mean(axis=1)


class BayesianSetsRanker(_Ranker):
    """Extra (DISCO's ranker, Ghahramani & Heller 2005): Bayesian Sets on keyword presence.
    score(x) = Σ_j q_j x_j with q_j = log(α̃_j/α_j) − log(β̃_j/β_j), α = κm, β = κ(1 − m),
    α̃ = α + Σ_s s_j, β̃ = β + N − Σ_s s_j, m the mean presence over seeds and background."""

    needs_negatives = True

    def __init__(self, kappa: float = 2.0):
        self.kappa = kappa

    def features(self, fs: FeatureSet):
        return fs.binary

    def fit(self, X, y=None):
        positives, _ = self._split(X, y)
        m = np.clip(np.asarray(X.mean(axis=0)).ravel(), 1e-3, 1 - 1e-3)
        alpha, beta = self.kappa * m, self.kappa * (1 - m)
        hits = np.asarray(positives.sum(axis=0)).ravel()
        self.q_ = (np.log(alpha + hits) - np.log(alpha)
                   - np.log(beta + positives.shape[0] - hits) + np.log(beta))
        return self

    def decision_function(self, X) -> np.ndarray:
        return np.asarray(X @ self.q_).ravel()


RANKERS: dict[str, type[_Ranker]] = {
    "nb": NaiveBayesRanker, "lr": LogisticRegressionRanker, "ocsvm": OneClassSVMRanker,
    "cosine": CosineRanker, "jaccard": JaccardRanker, "bsets": BayesianSetsRanker}
#: the paper's five rankers (F in eq. 8)
DEFAULT_RANKERS = ("nb", "lr", "ocsvm", "cosine", "jaccard")
COMBINATIONS = ("position", "score")


# ---------------------------------------------------------------------------------------------
# combination (Algorithm 2)


def positions(scores: Sequence[float]) -> np.ndarray:
    """1-based positions in the list sorted by decreasing score; tied pages share the mean of
    their positions (so the result does not depend on the input order)."""
    return rankdata(-np.asarray(scores, dtype=float), method="average")


def combine_positions(ranker_positions: Sequence[Sequence[float]],
                      pagerank_positions: Sequence[float], alpha: float = 0.2) -> np.ndarray:
    """Eq. 8: Score(w) = (1 − α) · Σ_i f_i(w) / |F| + α · R(w); lower is better."""
    f = np.asarray(ranker_positions, dtype=float)
    return (1 - alpha) * f.mean(axis=0) + alpha * np.asarray(pagerank_positions, dtype=float)


def _minmax(values: np.ndarray) -> np.ndarray:
    span = values.max() - values.min() if len(values) else 0.0
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


@dataclass(frozen=True)
class RankedPage:
    """A page's place in a :class:`Ranking`: final ``rank`` (1 = best), combined ``score`` (lower
    is better) and its ``positions`` in each ranker's list and in the PageRank list
    (key ``pagerank``)."""

    url: str
    rank: int
    score: float
    positions: Mapping[str, float]


class Ranking(Sequence):
    """Pages in final rank order."""

    def __init__(self, pages: Sequence[RankedPage] = ()):
        self.pages = list(pages)
        self._pos = {p.url: p.rank for p in self.pages}

    def __getitem__(self, i):
        return self.pages[i]

    def __len__(self) -> int:
        return len(self.pages)

    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.pages]

    def top(self, k: int) -> list[str]:
        """URLs of the ``k`` best pages."""
        return [p.url for p in self.pages[:k]]

    def position(self, url: str) -> int | None:
        """Final rank of ``url`` (1-based), None if not ranked."""
        return self._pos.get(url)


class CombinedFunctionRank(BaseEstimator):
    """Algorithm 2: rank discovered pages by the rankers' positions and the PageRank position.

    ``fit(seeds, background)`` learns the vocabulary (:func:`build_vocabulary`, on the first fit
    or with ``refit_vocabulary=True``) and fits every ranker, with the seeds as positives and
    ``n_negatives`` background pages sampled at random (``random_state``) as negatives.
    ``rank(pages)`` vectorises the pages not seen before, scores all pages with every ranker
    and combines: ``combination="position"`` is eq. 8 with ``alpha``; ``"score"`` (an extra)
    averages min–max normalised ranker scores instead, with the min–max normalised PageRank
    weighted by ``alpha``, and reports 1 − that so that lower is better for both.
    """

    def __init__(self, topic_words: Sequence[str] = (), rankers: Sequence[str] = DEFAULT_RANKERS,
                 alpha: float = 0.2, combination: str = "position", n_terms: int = 300,
                 n_negatives: int = 200, damping: float = 0.85, max_chars: int = MAX_CHARS,
                 random_state: int = 0):
        self.topic_words = topic_words
        self.rankers = rankers
        self.alpha = alpha
        self.combination = combination
        self.n_terms = n_terms
        self.n_negatives = n_negatives
        self.damping = damping
        self.max_chars = max_chars
        self.random_state = random_state

    def _check(self) -> None:
        unknown = [r for r in self.rankers if r not in RANKERS]
        if unknown or not self.rankers:
            raise DWDBRMError(f"unknown ranker {unknown[0] if unknown else '(none given)'!r} "
                              f"(known: {', '.join(RANKERS)})")
        if not 0.0 <= self.alpha <= 1.0:
            raise DWDBRMError(f"alpha must be in [0, 1], got {self.alpha!r}")
        if self.combination not in COMBINATIONS:
            raise DWDBRMError(f"combination must be one of {', '.join(COMBINATIONS)}, "
                              f"got {self.combination!r}")

    def fit(self, seeds: Sequence[DiscoveredPage], background: Sequence[DiscoveredPage] = (),
            refit_vocabulary: bool = False) -> CombinedFunctionRank:
        self._check()
        if not seeds:
            raise DWDBRMError("no seed pages to learn from")
        seed_urls = {p.url for p in seeds}
        pool = [p for p in dict((p.url, p) for p in background).values() if p.url not in seed_urls]
        needy = [r for r in self.rankers if RANKERS[r].needs_negatives]
        if needy and not pool:
            raise DWDBRMError(f"rankers {', '.join(needy)} need background pages as negatives; "
                              "pass background=... or leave them out of rankers")
        rng = np.random.default_rng(self.random_state)
        picked = sorted(rng.choice(len(pool), size=min(self.n_negatives, len(pool)), replace=False)) \
            if pool else []
        negatives = [pool[i] for i in picked]
        if refit_vocabulary or getattr(self, "vectorizer_", None) is None:
            add_words(list(self.topic_words))
            self.vectorizer_ = PageVectorizer(
                build_vocabulary(seeds, self.topic_words, negatives, self.n_terms, self.max_chars),
                self.max_chars)
        train = self.vectorizer_.transform([*seeds, *negatives])
        y = np.r_[np.ones(len(seeds), dtype=int), np.zeros(len(negatives), dtype=int)]
        self.rankers_ = {name: RANKERS[name]() for name in self.rankers}
        for ranker in self.rankers_.values():
            ranker.fit(ranker.features(train), y)
        return self

    @property
    def vocabulary_(self) -> list[str]:
        return self.vectorizer_.vocabulary

    def ranker_scores(self, fs: FeatureSet) -> dict[str, np.ndarray]:
        """Every ranker's decision values (higher = more like the seeds)."""
        return {name: np.asarray(r.decision_function(r.features(fs)), dtype=float)
                for name, r in self.rankers_.items()}

    def rank(self, pages: Sequence[DiscoveredPage], graph: LinkGraph | None = None) -> Ranking:
        """Rank ``pages`` (later duplicates of a URL are ignored). ``graph`` is the discovered
        link graph (default: built from the pages' outlinks); R(w) is a page's position by
        PageRank among ``pages``. Final ties are broken by URL."""
        if not hasattr(self, "rankers_"):
            raise DWDBRMError("CombinedFunctionRank is not fitted: call fit(seeds, background)")
        unique: dict[str, DiscoveredPage] = {}
        for p in pages:
            unique.setdefault(p.url, p)
        pages = list(unique.values())
        if not pages:
            return Ranking()
        fs = self.vectorizer_.transform(pages)
        scores = self.ranker_scores(fs)
        pagerank = self._pagerank(pages, graph)
        if self.combination == "position":
            pos = {name: positions(s) for name, s in scores.items()}
            pos["pagerank"] = positions(pagerank)
            combined = combine_positions([pos[n] for n in scores], pos["pagerank"], self.alpha)
        else:
            pos = {name: positions(s) for name, s in {**scores, "pagerank": pagerank}.items()}
            mean = np.mean([_minmax(s) for s in scores.values()], axis=0)
            combined = 1 - ((1 - self.alpha) * mean + self.alpha * _minmax(pagerank))
        urls = np.array(fs.urls)
        order = np.lexsort((urls, combined))
        names = list(pos)
        return Ranking([RankedPage(fs.urls[i], r, float(combined[i]),
                                   {n: float(pos[n][i]) for n in names})
                        for r, i in enumerate(order, 1)])

    def _pagerank(self, pages: Sequence[DiscoveredPage], graph: LinkGraph | None) -> np.ndarray:
        if graph is None:
            graph = LinkGraph()
            for p in pages:
                graph.add_page(p.url, p.outlinks)
        pr = graph.pagerank_array(self.damping)
        nodes = [graph.index(p.url) for p in pages]
        return np.array([pr[n] if n is not None and n < len(pr) else 1.0 for n in nodes])
