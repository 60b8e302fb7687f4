"""A calibrated page classifier: P(relevant | page) from the terms of a page.

Features: term counts hashed into ``n_features`` columns (exactly the matrix of scikit-learn's
``HashingVectorizer(analyzer=terms, n_features=n_features, alternate_sign=False, norm=None)``,
see :func:`hash_terms`), TF-IDF weighted (``TfidfTransformer(sublinear_tf=True)``), and a
logistic regression. Two ways to train (:meth:`PageClassifier.fit`):

* labelled pages (``y`` = 1 relevant, 0 not): probabilities calibrated with
  ``CalibratedClassifierCV(method="sigmoid")`` (the mean of ``cv`` calibrated fold models) when
  each class has ``min_calibration`` pages, the logistic regression's own otherwise;
* positive and unlabeled pages (``y`` = 1 positive, -1 unlabeled, the scikit-learn marker of
  unlabeled samples): PU learning after Elkan & Noto (2008), with the share of relevant pages
  among the unlabeled ones estimated as a mixture proportion (Blanchard, Lee & Scott 2010), see
  :meth:`PageClassifier.fit`.

The self-assessed harvest rate of a crawl is then the mean probability over its fetched pages
(:meth:`PageClassifier.expected_harvest`). Pure (no Scrapy); the fitted model pickles.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import chain, repeat

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from topiccrawl.learning.ranking import one_blas_thread, roc_auc
from topiccrawl.learning.vocabulary import hashed_column
from topiccrawl.scoring.text import tokenize

#: term -> column, per ``n_features``: terms recur across pages, so a page is hashed with dict
#: look-ups; cleared when it grows past ``_INDEX_MAX`` terms (about 30 MB)
_INDEX: dict[int, dict[str, int]] = {}
_INDEX_MAX = 1 << 18


def _terms(doc) -> Sequence[str]:
    """A page as terms: a string is tokenised (:func:`tokenize`), anything else is taken as terms."""
    return tokenize(doc) if isinstance(doc, str) else list(doc)


def _columns(terms: Sequence[str], n_features: int) -> np.ndarray:
    """The hashed column of each term, through a bounded term -> column cache."""
    index = _INDEX.get(n_features)
    if index is None or len(index) > _INDEX_MAX:
        index = _INDEX[n_features] = {}
    cols = np.fromiter(map(index.get, terms, repeat(-1)), dtype=np.int64, count=len(terms))
    for i in np.flatnonzero(cols < 0).tolist():  # terms not in the index (repeats: the first adds it)
        term = terms[i]
        col = index.get(term)
        if col is None:
            col = index[term] = hashed_column(term, n_features)
        cols[i] = col
    return cols


def _counts(terms: Sequence[str], n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted hashed columns of a page's terms and their counts (colliding terms add up)."""
    cols, counts = np.unique(_columns(terms, n_features), return_counts=True)
    return cols, counts.astype(np.float64)


def hash_short(docs: Sequence[Sequence[str]], n_features: int = 2**18) -> sp.csr_matrix:
    """:func:`hash_terms` of many short term lists (anchors, the words around them) at once: one
    look-up of all their terms instead of one per list. Same matrix up to the order of the columns
    within a row."""
    lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    flat = list(chain.from_iterable(docs))
    cols = _columns(flat, n_features)
    rows = np.repeat(np.arange(len(docs)), lengths)
    m = sp.coo_matrix((np.ones(len(flat)), (rows, cols)), shape=(len(docs), n_features)).tocsr()
    m.sum_duplicates()
    return m


def counts_row(columns: np.ndarray, counts: np.ndarray, n_features: int = 2**18) -> sp.csr_matrix:
    """One page's row of :func:`hash_terms` from its sorted distinct hashed ``columns`` and their
    ``counts`` (:func:`topiccrawl.learning.vocabulary.merge_columns`)."""
    return sp.csr_matrix((counts.astype(np.float64), columns.astype(np.int32), np.array([0, len(columns)], dtype=np.int64)),
                         shape=(1, n_features))


def hash_terms(docs: Iterable, n_features: int = 2**18) -> sp.csr_matrix:
    """Term counts of ``docs`` (strings or term lists) as a CSR matrix of ``n_features`` columns.

    Stateless: rows of different calls can be stacked (``scipy.sparse.vstack``), so a crawl can
    hash each page once and refit from the stored rows. :class:`PageClassifier` accepts the
    matrix wherever it accepts pages.
    """
    indptr, indices, data = [0], [], []
    for doc in docs:
        cols, counts = _counts(_terms(doc), n_features)
        indices.append(cols)
        data.append(counts)
        indptr.append(indptr[-1] + len(cols))
    return sp.csr_matrix((np.concatenate(data) if data else np.empty(0),
                          np.concatenate(indices).astype(np.int32) if indices else np.empty(0, np.int32),
                          np.asarray(indptr, dtype=np.int64)), shape=(len(indptr) - 1, n_features))


class PageClassifier(ClassifierMixin, BaseEstimator):
    """Calibrated P(relevant | page) over hashed TF-IDF features and logistic regression.

    Pages (``X``) are strings, term lists (:func:`topiccrawl.scoring.text.tokenize`) or a matrix
    from :func:`hash_terms`. ``C`` is the inverse L2 regularisation of the logistic regression;
    ``cv`` the folds of the sigmoid calibration and of the PU estimates; ``pu_prior`` how PU
    learning estimates c (``"mixture"`` or Elkan & Noto's ``"e1"``, see :meth:`fit`), ``pu_kept``
    the least share of the labelled positives a set S of the mixture estimate keeps.

    The fitted model is K linear scores z_k = w_k · x + b_k over the TF-IDF vector x of a page
    (K = ``cv`` calibrated fold models, or 1) and P(relevant) = min(1, mean_k
    1 / (1 + exp(a_k z_k + b'_k)) / c). Fitted attributes: ``mode_`` (``"calibrated"``,
    ``"logistic"`` or ``"pu"``), ``columns_`` (the hashed columns seen in training, sorted),
    ``idf_`` (their IDF) and ``idf_unseen_``, ``coef_`` (K x columns), ``intercept_`` (K),
    ``sigmoid_`` (K x 2: a, b'), ``c_`` (PU: the estimated P(labelled | relevant); 1 otherwise),
    ``prior_`` (PU: the estimated share of relevant pages among the unlabeled ones) and
    ``heldout_auc_`` (PU: the ROC AUC of the labelled positives' out-of-fold scores against the
    unlabeled pages', how well held-out positives stand out; None otherwise) and ``ranks_`` (PU:
    False when the held-out positives' scores do not rise with P(s=1) in the sigmoid fit, so that
    every page gets the same probability, about the estimated share of relevant pages; True otherwise).
    """

    #: a classifier pickled before ``pu_kept`` existed (a JOBDIR of older code) keeps its behaviour
    pu_kept = 0.5
    #: a classifier fitted before the held-out AUC was kept reports none
    heldout_auc_ = None
    #: a classifier fitted before ``ranks_`` existed is taken to rank
    ranks_ = True

    def __init__(self, n_features: int = 2**18, C: float = 1.0, calibration: str = "auto",
                 min_calibration: int = 30, cv: int = 3, pu_prior: str = "mixture", pu_kept: float = 0.5,
                 max_iter: int = 300, tol: float = 1e-3, random_state: int | None = 0):
        self.n_features = n_features
        self.C = C
        self.calibration = calibration
        self.min_calibration = min_calibration
        self.cv = cv
        self.pu_prior = pu_prior
        self.pu_kept = pu_kept
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    # -- training ------------------------------------------------------------------------------
    def fit(self, X, y) -> PageClassifier:
        """Train on pages ``X`` with labels ``y``: 1 relevant, 0 not relevant, -1 unlabeled.

        Without -1 labels: a logistic regression, calibrated with
        ``CalibratedClassifierCV(method="sigmoid")`` when ``calibration`` is ``"sigmoid"``, or
        ``"auto"`` and each class has at least ``min_calibration`` pages.

        With -1 labels, PU learning (0-labelled pages join the unlabeled ones). Elkan & Noto
        (2008): a classifier g(x) = P(s=1 | x) separates the labelled positives (s=1) from the
        unlabeled pages (s=0); if the labelled positives are a random sample of the relevant
        pages ("selected completely at random"), then (their Lemma 1)

            P(y=1 | x) = P(s=1 | x) / c,   c = P(s=1 | y=1).

        Here g is a logistic regression with balanced class weights whose scores are mapped to
        probabilities by a sigmoid fitted on out-of-fold scores (Platt scaling, as in their
        paper). ``pu_prior="e1"`` estimates c as their e1, the mean of g over held-out labelled
        positives. ``"mixture"`` (default) estimates the share π of relevant pages among the n_U
        unlabeled ones as the largest proportion of the positives' distribution in the unlabeled
        one (Blanchard, Lee & Scott 2010), π = min over S of P_U(S) / P_P(S), with S = {z >= t}
        for t at the out-of-fold scores z of the labelled positives that keep at least a share
        ``pu_kept`` (default half) of them in S; then c = n_P / (n_P + π n_U). With few positives
        (5-20) e1's mean is dominated by a few held-out positives and underestimates c. The
        probability is min(1, g(x) / c). Needs at least 2 labelled positives.
        """
        y = np.asarray(y).ravel()
        if not np.isin(y, (-1, 0, 1)).all():
            raise ValueError("labels must be 1 (relevant), 0 (not relevant) or -1 (unlabeled)")
        if self.calibration not in ("auto", "sigmoid", "none"):
            raise ValueError(f"calibration={self.calibration!r}: expected 'auto', 'sigmoid' or 'none'")
        if self.pu_prior not in ("mixture", "e1"):
            raise ValueError(f"pu_prior={self.pu_prior!r}: expected 'mixture' or 'e1'")
        if not 0.0 < self.pu_kept <= 1.0:
            raise ValueError(f"pu_kept={self.pu_kept!r}: expected a share in (0, 1]")
        counts = self._hashed(X)
        if counts.shape[0] != len(y):
            raise ValueError(f"{counts.shape[0]} pages but {len(y)} labels")
        # one BLAS thread: the solver's vector operations are small, and BLAS threads competing
        # with the crawl (or other processes) for the cores slow a fit down many times over
        with one_blas_thread():
            return self._fit(counts, y)

    def _fit(self, counts: sp.csr_matrix, y: np.ndarray) -> PageClassifier:
        self.classes_ = np.array([0, 1])
        tfidf = TfidfTransformer(sublinear_tf=True).fit(counts)
        # the solver works on the columns in use only (a bincount: linear, where np.unique sorts)
        self.columns_ = np.flatnonzero(np.bincount(counts.indices, minlength=counts.shape[1]))
        self.idf_ = tfidf.idf_[self.columns_]
        self.idf_unseen_ = float(np.log(counts.shape[0] + 1.0) + 1.0)  # smooth_idf with df = 0
        Xc = tfidf.transform(counts).tocsr()[:, self.columns_]
        self.c_, self.prior_, self.heldout_auc_, self.ranks_ = 1.0, None, None, True
        if (y == -1).any():
            models, sigmoids = self._fit_pu(Xc, (y == 1).astype(int))
            self.mode_ = "pu"
        else:
            models, sigmoids = self._fit_labelled(Xc, y.astype(int))
        self.coef_ = np.vstack([m.coef_.ravel() for m in models])
        self.intercept_ = np.array([float(m.intercept_[0]) for m in models])
        self.sigmoid_ = np.array(sigmoids, dtype=np.float64).reshape(len(models), 2)
        return self

    def _fit_labelled(self, Xc, y: np.ndarray):
        if len(np.unique(y)) < 2:
            raise ValueError("labelled training needs relevant (1) and irrelevant (0) pages")
        smallest = int(np.bincount(y).min())
        if self.calibration == "sigmoid" or (
                self.calibration == "auto" and smallest >= max(self.min_calibration, self.cv)):
            calibrated = CalibratedClassifierCV(
                self._logistic(), method="sigmoid", ensemble=True,
                cv=StratifiedKFold(min(self.cv, smallest), shuffle=True,
                                   random_state=self.random_state)).fit(Xc, y)
            self.mode_ = "calibrated"
            members = calibrated.calibrated_classifiers_
            return ([m.estimator for m in members],
                    [(m.calibrators[0].a_, m.calibrators[0].b_) for m in members])
        self.mode_ = "logistic"
        return [self._logistic().fit(Xc, y)], [(-1.0, 0.0)]

    def _fit_pu(self, Xc, s: np.ndarray):
        n_pos, n_unl = int(s.sum()), int(len(s) - s.sum())
        if n_pos < 2 or n_unl < 2:
            raise ValueError("PU learning needs at least 2 labelled positive and 2 unlabeled pages")
        oof = np.empty(len(s))
        folds = StratifiedKFold(min(self.cv, n_pos, n_unl), shuffle=True, random_state=self.random_state)
        for train, test in folds.split(Xc, s):
            oof[test] = self._logistic("balanced").fit(Xc[train], s[train]).decision_function(Xc[test])
        self.heldout_auc_ = roc_auc(s, oof)
        platt = LogisticRegression(C=1e6).fit(oof[:, None], s)
        a, b = -float(platt.coef_[0, 0]), -float(platt.intercept_[0])
        self.ranks_ = a < 0
        if a >= 0:  # held-out positives score no higher than the rest: nothing learnt to rank by
            a, b = -1e-6, -math.log(n_pos / n_unl)
        pos, unl = np.sort(oof[s == 1]), oof[s == 0]
        last = n_pos - max(1, math.ceil(self.pu_kept * n_pos - 1e-9))  # S keeps >= pu_kept of them
        share = min((unl >= t).mean() * n_pos / (n_pos - k) for k, t in enumerate(pos[: last + 1]))
        self.prior_ = min(1.0, float(share))
        if self.pu_prior == "e1":
            self.c_ = float(expit(-(a * pos + b)).mean())
        else:
            self.c_ = n_pos / (n_pos + self.prior_ * n_unl)
        return [self._logistic("balanced").fit(Xc, s)], [(a, b)]

    def refit(self, positives, unlabeled) -> PageClassifier:
        """Fit again in PU mode on ``positives`` (relevant pages: examples, pseudo-labels) and
        ``unlabeled`` pages (the crawl's fetched pages, a background sample): pages or
        :func:`hash_terms` matrices. Returns self."""
        if sp.issparse(positives):
            X = sp.vstack([positives, unlabeled], format="csr")
            n_pos, n_unl = positives.shape[0], unlabeled.shape[0]
        else:
            X, n_pos, n_unl = [*positives, *unlabeled], len(positives), len(unlabeled)
        return self.fit(X, np.r_[np.ones(n_pos, int), -np.ones(n_unl, int)])

    def _logistic(self, class_weight=None) -> LogisticRegression:
        return LogisticRegression(C=self.C, class_weight=class_weight, max_iter=self.max_iter,
                                  tol=self.tol)

    # -- prediction ----------------------------------------------------------------------------
    def _hashed(self, X) -> sp.csr_matrix:
        if sp.issparse(X):
            if X.shape[1] != self.n_features:
                raise ValueError(f"hashed pages have {X.shape[1]} columns, expected {self.n_features}")
            return sp.csr_matrix(X)
        if isinstance(X, str):
            raise TypeError("X is a list of pages, not one string")
        return hash_terms(X, self.n_features)

    def _lookup(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position in ``columns_``, whether trained, and IDF of hashed columns ``cols`` (the
        position of an untrained column is any valid one: its weight is masked)."""
        if len(cols) > 65536:  # many pages: one look-up table beats a binary search per column
            table = np.full(self.n_features, -1, dtype=np.int64)
            table[self.columns_] = np.arange(len(self.columns_))
            at = table[cols]
            seen = at >= 0
        else:
            at = np.minimum(np.searchsorted(self.columns_, cols), len(self.columns_) - 1)
            seen = self.columns_[at] == cols
        return at, seen, np.where(seen, self.idf_[at], self.idf_unseen_)

    def _scores(self, X) -> np.ndarray:
        """The K linear scores of each page (pages x K); TF-IDF as ``TfidfTransformer``."""
        check_is_fitted(self, "coef_")
        counts = self._hashed(X)
        n = counts.shape[0]
        rows = np.repeat(np.arange(n), np.diff(counts.indptr))
        at, seen, idf = self._lookup(counts.indices)
        weights = (1.0 + np.log(counts.data)) * idf
        norm = np.sqrt(np.bincount(rows, weights * weights, minlength=n).astype(np.float64))
        norm[norm == 0] = 1.0
        weights = np.where(seen, weights, 0.0)
        dots = [np.bincount(rows, weights * w[at], minlength=n).astype(np.float64) for w in self.coef_]
        return np.column_stack(dots) / norm[:, None] + self.intercept_

    def decision_function(self, X) -> np.ndarray:
        """The mean of the K linear scores z_k = w_k · x + b_k of each page (higher: more like the
        positives: P(relevant) rises with it)."""
        return self._scores(X).mean(axis=1)

    def _proba(self, z: np.ndarray) -> np.ndarray:
        p = expit(-(self.sigmoid_[:, 0] * z + self.sigmoid_[:, 1])).mean(axis=-1)
        return np.minimum(1.0, p / self.c_)

    def predict_proba(self, X) -> np.ndarray:
        """``[[P(not relevant), P(relevant)], ...]`` for pages ``X``."""
        p = self._proba(self._scores(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X) -> np.ndarray:
        """1 where P(relevant) >= 0.5, else 0."""
        return (self._proba(self._scores(X)) >= 0.5).astype(int)

    def proba_one(self, terms: Sequence[str]) -> float:
        """P(relevant) of one page given as terms: the number :meth:`predict_proba` gives, without
        building a matrix (the per-page path of a crawl)."""
        check_is_fitted(self, "coef_")
        return self._proba_counts(*_counts(terms if isinstance(terms, (list, tuple)) else list(terms), self.n_features))

    def proba_row(self, row: sp.csr_matrix) -> float:
        """P(relevant) of one page given as a 1-row :func:`hash_terms` matrix (as :meth:`proba_one`)."""
        check_is_fitted(self, "coef_")
        return self._proba_counts(row.indices.astype(np.int64, copy=False), row.data.astype(np.float64))

    def proba_counts(self, columns: np.ndarray, counts: np.ndarray) -> float:
        """P(relevant) of one page given as its sorted distinct hashed ``columns`` and their
        ``counts`` (as :meth:`proba_one`)."""
        check_is_fitted(self, "coef_")
        return self._proba_counts(columns.astype(np.int64, copy=False), counts.astype(np.float64, copy=False))

    def _proba_counts(self, cols: np.ndarray, counts: np.ndarray) -> float:
        z = self.intercept_
        if len(cols):
            at, seen, idf = self._lookup(cols)
            weights = np.log(counts)
            weights += 1.0
            weights *= idf
            norm = math.sqrt(float(weights @ weights))
            z = self.coef_[:, at[seen]] @ weights[seen] / norm + self.intercept_
        return float(self._proba(z))

    def expected_harvest(self, X) -> float:
        """The self-assessed harvest rate of pages ``X``: the mean P(relevant)."""
        p = self._proba(self._scores(X))
        return float(p.mean()) if len(p) else 0.0
