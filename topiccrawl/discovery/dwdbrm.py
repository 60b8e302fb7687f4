"""DWDBRM: domain web page discovery by a ranking mechanism (Wang, Li & Li, Data Mining 2022), a
re-implementation of DISCO (Pham, Santos & Freire, WWW 2019). The pure, Scrapy-free parts:

* ranking (Algorithm 2, *CombinedFunctionRank*): five rankers — naive Bayes (eq. 6), logistic
  regression (eq. 2), one-class SVM, cosine (eq. 5) and Jaccard (eq. 4) similarity averaged over
  the seeds (eq. 3) — combined with the PageRank position of the discovered graph (eq. 8);
* the UCB1 bandit that chooses a discovery operator (Algorithm 3, eq. 11) and its rewards
  (eqs. 9–10);
* planning of the four discovery operators — keyword search (KS), related search (RS), forward
  crawl (FC) and backward crawl (BC) — as request URLs tagged with their role.

A crawler feeds fetched pages in as :class:`DiscoveredPage` records and takes
:class:`PlannedRequest` URLs out; one iteration::

    op = bandit.select()
    requests = planner.plan(op, [pages[u] for u in ranking.top(k)], known=pages)
    ... fetch; search answers -> planner.follow(); BC hubs -> planner.expand_hub() ...
    new = cfr.rank(all_pages)
    bandit.update(op, operator_reward(new.urls, ranking.urls, found), seeds=..., new_pages=found)

Method, equations, ambiguities and defaults: ``docs/dwdbrm.md``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from urllib.parse import urlsplit

import numpy as np
from scipy import sparse
from scipy.stats import rankdata
from sklearn.base import BaseEstimator
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.preprocessing import normalize
from sklearn.svm import OneClassSVM

from topiccrawl.scoring.importance import LinkGraph
from topiccrawl.discovery.search import SearchBackend, SearchResult
from topiccrawl.scoring.text import Extracted, add_words, tokenize

#: the discovery operators: keyword search, related search, forward crawl, backward crawl
OPERATORS = ("KS", "RS", "FC", "BC")
#: characters of a page's main text that are tokenised
MAX_CHARS = 5000


class DWDBRMError(ValueError):
    """Bad input to the discovery algorithms (one-line message)."""


# ---------------------------------------------------------------------------------------------
# pages and features


@dataclass
class DiscoveredPage:
    """A fetched page as the discovery algorithms see it. The URL is its identity."""

    url: str
    title: str = ""
    text: str = ""
    keywords: Sequence[str] = ()
    description: str = ""
    outlinks: Sequence[str] = ()
    operator: str = "seed"
    iteration: int = 0

    @classmethod
    def from_extracted(cls, url: str, extracted: Extracted, operator: str = "seed",
                       iteration: int = 0) -> DiscoveredPage:
        """From :func:`topiccrawl.scoring.text.extract` output; outlinks are the distinct anchor URLs."""
        return cls(url, extracted.title, extracted.text, tuple(extracted.keywords),
                   extracted.description, tuple(dict.fromkeys(a.url for a in extracted.anchors)),
                   operator, iteration)

    def document(self, max_chars: int = MAX_CHARS) -> str:
        """Title, meta keywords, meta description and the first ``max_chars`` of the text."""
        return " ".join((self.title, " ".join(self.keywords), self.description,
                         self.text[:max_chars]))


def _vectorizer(cls, **kwargs):
    return cls(tokenizer=tokenize, lowercase=False, token_pattern=None, **kwargs)


def build_vocabulary(seeds: Sequence[DiscoveredPage], topic_words: Iterable[str] = (),
                     background: Sequence[DiscoveredPage] = (), n_terms: int = 300,
                     max_chars: int = MAX_CHARS) -> list[str]:
    """The topic words (tokenised) then the ``n_terms`` terms of highest TF-IDF summed over the
    seed pages; IDF is computed over the seeds and ``background`` pages, so that words common
    on the whole web are down-weighted. Ties are broken alphabetically."""
    words = [t for w in topic_words for t in tokenize(w)]
    if not seeds:
        raise DWDBRMError("no seed pages: the vocabulary is learnt from them")
    tfidf = _vectorizer(TfidfVectorizer)
    docs = [p.document(max_chars) for p in (*seeds, *background)]
    try:
        matrix = tfidf.fit_transform(docs)
    except ValueError:  # no term in any document
        top = []
    else:
        weight = np.asarray(matrix[:len(seeds)].sum(axis=0)).ravel()
        terms = tfidf.get_feature_names_out()
        order = np.lexsort((terms, -weight))
        top = [str(terms[i]) for i in order[:n_terms] if weight[i] > 0]
    vocabulary = list(dict.fromkeys(words + top))
    if not vocabulary:
        raise DWDBRMError("empty vocabulary: the seed pages have no terms and no topic words "
                          "were given")
    return vocabulary


@dataclass
class FeatureSet:
    """Features of a list of pages: term frequencies over the vocabulary (CSR, one row per page)
    and URL/host name lengths."""

    urls: list[str]
    tf: sparse.csr_matrix
    url_length: np.ndarray
    domain_length: np.ndarray

    @cached_property
    def binary(self) -> sparse.csr_matrix:
        """Keyword presence (0/1)."""
        out = self.tf.copy()
        out.data[:] = 1.0
        return out

    def __len__(self) -> int:
        return len(self.urls)


class PageVectorizer:
    """Term-frequency rows over a fixed vocabulary, cached by URL: a page is tokenised once, so
    re-ranking only tokenises the pages that are new since the last call."""

    def __init__(self, vocabulary: Sequence[str], max_chars: int = MAX_CHARS):
        self.vocabulary = list(dict.fromkeys(vocabulary))
        self.max_chars = max_chars
        self._cv = _vectorizer(CountVectorizer, vocabulary=self.vocabulary, dtype=np.float64)
        self._row: dict[str, int] = {}
        self._blocks: list[sparse.csr_matrix] = []
        self._stacked: sparse.csr_matrix | None = None

    def __len__(self) -> int:
        return len(self._row)

    def transform(self, pages: Sequence[DiscoveredPage]) -> FeatureSet:
        new = {p.url: p for p in pages if p.url not in self._row}
        if new:
            self._blocks.append(self._cv.transform(
                [p.document(self.max_chars) for p in new.values()]).tocsr())
            for url in new:
                self._row[url] = len(self._row)
            self._stacked = None
        if self._stacked is None:
            self._stacked = sparse.vstack(self._blocks, format="csr") if self._blocks else \
                sparse.csr_matrix((0, len(self.vocabulary)))
        urls = [p.url for p in pages]
        tf = self._stacked[[self._row[u] for u in urls]]
        hosts = [urlsplit(u).hostname or "" for u in urls]
        return FeatureSet(urls, tf, np.array([len(u) for u in urls], dtype=float),
                          np.array([len(h) for h in hosts], dtype=float))


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


# ---------------------------------------------------------------------------------------------
# rewards and the UCB1 bandit (Algorithm 3)

REWARDS = ("paper", "disco")


def operator_reward(ranking: Sequence[str], previous: Iterable[str], found: Iterable[str],
                    variant: str = "paper", k: int | None = None) -> float:
    """Reward μ_op of an operator (eqs. 9–10) from the ranking after its iteration.

    ``ranking``: URLs of the new ranking, best first (length len); ``previous``: URLs of the
    ranking before the iteration; ``found``: the URLs the operator fetched this iteration.

    * ``paper``: Σ over found pages in ``ranking`` but not in ``previous`` of (1 − pos/len),
      pos the 1-based position; pages already ranked before (and found pages not ranked)
      count 0.
    * ``disco``: the same over hosts (DISCO rewards new websites): the ranking is reduced to its
      hosts in order of first appearance (length H), and each host of a found page that was
      not a host of ``previous`` counts 1 − pos/H.

    The sum is divided by len (resp. H) as in Algorithm 3, or by ``k`` when given (eq. 9).
    """
    if variant not in REWARDS:
        raise DWDBRMError(f"reward variant must be one of {', '.join(REWARDS)}, got {variant!r}")
    if k is not None and k < 1:
        raise DWDBRMError(f"k must be a positive integer, got {k!r}")
    ranking, previous, found = list(ranking), set(previous), list(found)
    if variant == "disco":
        ranking = list(dict.fromkeys(map(_host, ranking)))
        previous = {_host(u) for u in previous}
        found = [_host(u) for u in found]
    if not ranking:
        return 0.0
    pos = {u: i for i, u in enumerate(ranking, 1)}
    n = len(ranking)
    total = sum(1 - pos[u] / n for u in dict.fromkeys(found) if u in pos and u not in previous)
    return total / (k if k is not None else n)


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").removeprefix("www.")


@dataclass
class IterationRecord:
    """One iteration of Algorithm 3: the chosen operator, the top-k pages it started from
    (``seeds``), the pages it found, its reward and every active arm's UCB score (eq. 11) at
    the time of the choice."""

    iteration: int
    operator: str
    seeds: list[str]
    new_pages: list[str]
    reward: float
    scores: dict[str, float]


class UCB1Bandit:
    """UCB1 over the discovery operators (Algorithm 3, eq. 11):

        Score(op, t) = μ̄_op + √(2 ln n / n_op,t)

    μ̄_op is the operator's mean reward, n_op,t its number of plays and n the plays of all
    operators. An operator not played yet scores +inf (the paper's "same high score"), so every
    operator is played once first. Ties go to the operator listed first in ``operators``
    (default KS, RS, FC, BC). :meth:`drop` removes an operator that cannot be served.
    """

    def __init__(self, operators: Sequence[str] = OPERATORS):
        if not operators or len(set(operators)) != len(operators):
            raise DWDBRMError(f"operators must be distinct and non-empty, got {list(operators)}")
        self.operators = tuple(operators)
        self.plays = dict.fromkeys(self.operators, 0)
        self.totals = dict.fromkeys(self.operators, 0.0)
        self.dropped: dict[str, str] = {}
        self.log: list[IterationRecord] = []

    @classmethod
    def for_backend(cls, backend: SearchBackend, operators: Sequence[str] = OPERATORS) -> UCB1Bandit:
        """A bandit with the search operators ``backend`` cannot serve dropped (FC needs none)."""
        bandit = cls(operators)
        for op in operators:
            if op != "FC" and op not in backend.capabilities:
                bandit.drop(op, f"the {backend.name} search backend cannot serve {op}")
        return bandit

    @property
    def active(self) -> list[str]:
        return [op for op in self.operators if op not in self.dropped]

    def _known(self, op: str) -> None:
        if op not in self.plays:
            raise DWDBRMError(f"unknown operator {op!r} (known: {', '.join(self.operators)})")

    def drop(self, op: str, reason: str) -> None:
        """Never choose ``op`` again; ``reason`` is kept in :attr:`dropped`."""
        self._known(op)
        self.dropped[op] = reason

    def mean(self, op: str) -> float:
        """μ̄_op, 0.0 before the first play."""
        self._known(op)
        return self.totals[op] / self.plays[op] if self.plays[op] else 0.0

    def scores(self) -> dict[str, float]:
        """Eq. 11 for every active operator (+inf for one not played yet)."""
        n = sum(self.plays.values())
        return {op: self.mean(op) + math.sqrt(2 * math.log(n) / self.plays[op])
                if self.plays[op] else math.inf for op in self.active}

    def select(self) -> str:
        """The operator of highest UCB score (first listed on ties)."""
        scores = self.scores()
        if not scores:
            why = "; ".join(f"{op}: {r}" for op, r in self.dropped.items())
            raise DWDBRMError(f"no discovery operator left ({why})")
        return max(scores, key=scores.__getitem__)

    def update(self, op: str, reward: float, seeds: Sequence[str] = (),
               new_pages: Sequence[str] = ()) -> IterationRecord:
        """Count one play of ``op`` with ``reward`` and log the iteration (the UCB scores are
        those before the update, i.e. the ones the choice was made on)."""
        self._known(op)
        if op in self.dropped:
            raise DWDBRMError(f"operator {op} was dropped: {self.dropped[op]}")
        if not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise DWDBRMError(f"reward must be a finite number, got {reward!r}")
        record = IterationRecord(len(self.log) + 1, op, list(seeds), list(new_pages),
                                 float(reward), self.scores())
        self.plays[op] += 1
        self.totals[op] += float(reward)
        self.log.append(record)
        return record

    def state(self) -> dict:
        return {"operators": list(self.operators), "plays": dict(self.plays),
                "totals": dict(self.totals), "dropped": dict(self.dropped),
                "log": [asdict(r) for r in self.log]}

    @classmethod
    def from_state(cls, state: Mapping) -> UCB1Bandit:
        new = cls(state["operators"])
        new.plays.update(state["plays"])
        new.totals.update(state["totals"])
        new.dropped.update(state["dropped"])
        new.log = [IterationRecord(**r) for r in state["log"]]
        return new


# ---------------------------------------------------------------------------------------------
# operator planning


def description_terms(description: str, exclude: Iterable[str] = ()) -> list[str]:
    """Distinct terms of a domain description (``房地产 产品 物业 沈阳 售卖``), minus ``exclude``."""
    skip = set(exclude)
    return [t for t in dict.fromkeys(tokenize(description)) if t not in skip]


class KeywordQueries:
    """Keyword-search (KS) queries, never the same query twice.

    The first call gives the topic words, by decreasing weight, one per query. Later calls take
    the ``top_terms`` most frequent meta keywords and meta description terms of the current
    top-k pages (in most pages first, then first seen), each combined with every domain description
    term (``房地产 物业``); then the unused topic words; then topic word + description term.
    At most ``per_call`` queries per call.
    """

    def __init__(self, topic_words: Mapping[str, float] | Sequence[str],
                 description: Sequence[str] | str = (), per_call: int = 5, top_terms: int = 10):
        if isinstance(topic_words, Mapping):
            topic_words = sorted(topic_words, key=lambda w: -topic_words[w])
        self.topic_words = list(dict.fromkeys(topic_words))
        self.description = (description_terms(description) if isinstance(description, str)
                            else list(dict.fromkeys(description)))
        self.per_call = per_call
        self.top_terms = top_terms
        self.used: list[str] = []
        self._used: set[str] = set()

    def _combined(self, terms: Iterable[str]) -> Iterable[str]:
        for t in terms:
            if not self.description:
                yield t
            for d in self.description:
                if d != t:
                    yield f"{t} {d}"

    def _meta_terms(self, pages: Iterable[DiscoveredPage]) -> list[str]:
        """Meta keywords (whole entries, lower-cased) and description terms of the pages, by the
        number of pages they occur in."""
        counts: Counter[str] = Counter()
        for p in pages:
            keywords = [k.strip().lower() for k in p.keywords if k.strip()]
            counts.update(list(dict.fromkeys(keywords + tokenize(p.description))))
        skip = set(self.description)
        return [t for t, _ in counts.most_common() if t not in skip][:self.top_terms]

    def next(self, top_pages: Iterable[DiscoveredPage] = ()) -> list[str]:
        """The next queries (possibly none when all were used)."""
        if not self.used:
            candidates: Iterable[str] = self.topic_words
        else:
            candidates = (*self._combined(self._meta_terms(top_pages)), *self.topic_words,
                          *self._combined(self.topic_words))
        out = []
        for q in candidates:
            if q not in self._used and len(out) < self.per_call:
                out.append(q)
                self._used.add(q)
        self.used += out
        return out

    def state(self) -> dict:
        return {"used": list(self.used)}

    def restore(self, state: Mapping) -> None:
        self.used = list(state["used"])
        self._used = set(self.used)


#: roles of planned requests: a search-API URL (parse, then :meth:`DiscoveryPlanner.follow`),
#: a candidate page (fetch and rank), a backlink hub (fetch, then
#: :meth:`DiscoveryPlanner.expand_hub`)
ROLES = ("search", "page", "hub")


@dataclass(frozen=True)
class PlannedRequest:
    """A URL to request for ``operator``; ``source`` is the query of a search request, else the
    page or search request it came from."""

    url: str
    role: str
    operator: str
    source: str = ""


@dataclass
class DiscoveryPlanner:
    """Turns an operator and the current top-k pages into requests (Algorithm 3's operators).

    * KS: one search request per query of :class:`KeywordQueries` (``result_pages`` result pages
      each);
    * RS: ``related:URL`` and BC: ``link:URL`` for each top-k page; the backlink pages BC finds
      are hubs whose outlinks are forward-crawled (:meth:`expand_hub`);
    * FC: outlinks of the top-k pages, at most ``links_per_page`` per page and ``links_per_host``
      per target host per call.

    URLs in ``known`` (already fetched or queued) and search URLs already issued are skipped.
    """

    backend: SearchBackend
    queries: KeywordQueries
    result_pages: int = 1
    links_per_page: int = 20
    links_per_host: int = 10
    searched: set[str] = field(default_factory=set)

    def plan(self, operator: str, top_pages: Sequence[DiscoveredPage],
             known: Container[str] = ()) -> list[PlannedRequest]:
        if operator not in OPERATORS:
            raise DWDBRMError(f"unknown operator {operator!r} (known: {', '.join(OPERATORS)})")
        if operator == "FC":
            return self._forward(top_pages, "FC", known)
        if operator not in self.backend.capabilities:
            raise DWDBRMError(f"the {self.backend.name} search backend cannot serve {operator}")
        args = self.queries.next(top_pages) if operator == "KS" else [p.url for p in top_pages]
        out = []
        for arg in args:
            query = self.backend.query(operator, arg)
            for pageno in range(1, self.result_pages + 1):
                url = self.backend.search_url(query, pageno)
                if url not in self.searched:
                    self.searched.add(url)
                    out.append(PlannedRequest(url, "search", operator, query))
        return out

    def follow(self, request: PlannedRequest, results: Sequence[SearchResult],
               known: Container[str] = ()) -> list[PlannedRequest]:
        """Requests for the results of a search request: candidate pages (KS, RS) or hubs (BC)."""
        role = "hub" if request.operator == "BC" else "page"
        urls = dict.fromkeys(r.url for r in results if r.url not in known)
        return [PlannedRequest(u, role, request.operator, request.url) for u in urls]

    def expand_hub(self, hub: DiscoveredPage, known: Container[str] = ()) -> list[PlannedRequest]:
        """BC's second step: forward-crawl the outlinks of a fetched backlink hub."""
        return self._forward([hub], "BC", known)

    def _forward(self, pages: Sequence[DiscoveredPage], operator: str,
                 known: Container[str]) -> list[PlannedRequest]:
        per_host: Counter[str] = Counter()
        out: dict[str, PlannedRequest] = {}
        for page in pages:
            taken = 0
            for url in page.outlinks:
                if taken >= self.links_per_page:
                    break
                host = urlsplit(url).hostname
                if (url == page.url or url in out or url in known or not host
                        or urlsplit(url).scheme not in ("http", "https")
                        or per_host[host] >= self.links_per_host):
                    continue
                per_host[host] += 1
                taken += 1
                out[url] = PlannedRequest(url, "page", operator, page.url)
        return list(out.values())

    def state(self) -> dict:
        return {"queries": self.queries.state(), "searched": sorted(self.searched)}

    def restore(self, state: Mapping) -> None:
        self.queries.restore(state["queries"])
        self.searched = set(state["searched"])
