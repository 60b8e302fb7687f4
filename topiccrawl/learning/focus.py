"""The page classifier through a crawl: what it trains on, when it refits, what it reports.

:class:`PageFocus` keeps a :class:`~topiccrawl.learning.classifier.PageClassifier` fitted on

* **positives**: the topic's example pages; with words only (or besides examples), *pseudo-labels*
  — fetched pages the topic words match most strongly, recomputed at every refit so they are refined
  as the crawl goes (:func:`pseudo_positive_index`). The default rule (``pseudo="top"``) takes the
  ``pseudo_share`` of fetched pages with the highest R(P) > 0 (at least ``min_pseudo``): it needs no
  β, whose untuned value can call most pages relevant. ``pseudo="beta"`` is the earlier rule,
  R(P) ≥ max(β, the ``strong_quantile`` of R(P) over the fetched pages).
  Options chosen against on the development topics and kept as settings (docs/learned.md):
  ``rank_scorer`` ranks the pages by another score (the full-vector cosine), ``pseudo="relative"``
  takes the pages scoring at least half the 99th percentile's, ``wordless`` sets P = 0 on pages
  with none of the topic's words;
* **unlabeled**: a uniform reservoir sample (Vitter's algorithm R) of the crawl's fetched pages,
  plus the counter-examples (PU learning treats them as unlabeled: they lower P(s=1) without the
  selection assumptions labelled negatives would need).

It refits when ``refit_every`` pages (or half the pages so far, whichever is more) have been
fetched since the last fit, so a crawl of n pages refits O(log n + n / refit_every) times.
Before the first fit a page's probability is its R(P), marked as not calibrated. A refit whose
held-out positives do not rank above the fetched pages (``PageClassifier.ranks_`` False) is thrown
away under ``unranked="discard"`` (the default): the model before it stays, or R(P) before any fit
(docs/learned.md, "A refit that cannot rank"); ``"flat"`` takes it, one P for every page.

The self-assessed harvest rate (:attr:`expected_harvest`) is the mean P(relevant) of the fetched
pages: at a refit the reservoir is re-scored with the new model (an unbiased estimate of the mean
over all fetched pages, the page that triggered the refit included), and pages fetched since add
their own probability; with ``estimate="auc"`` a flagged estimate of a topic of words may be raised
to the held-out AUC's bound (:attr:`PageFocus.expected_harvest`). It is flagged
:attr:`unreliable` when the last refit's held-out positives did not stand out from the fetched
pages (``heldout_auc_`` below :data:`RELIABLE_AUC`; docs/learned.md, "Telling the user when not to
trust the estimate"), or, with words, when the labelled positives are a small share c of the pages
the classifier takes for relevant (``c_`` below :data:`RELIABLE_C`: the estimate is mostly
extrapolated; docs/learned.md, "A second reason to distrust an estimate with words").
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from topiccrawl.learning.choices import check_choice
from topiccrawl.learning.classifier import PageClassifier, counts_row, hash_terms

PSEUDO_RULES = ("top", "beta", "relative")
#: what a refit whose held-out positives do not rank (``PageClassifier.ranks_`` False) does
#: (docs/learned.md, "A refit that cannot rank")
UNRANKED_RULES = ("discard", "flat")
#: what the self-assessed harvest rate is (docs/learned.md, "The held-out AUC's bound as the estimate
#: where it flags"): the mean P, or with words and no example pages, where a kept refit's held-out AUC
#: flags the estimate (½ ≤ AUC < :data:`RELIABLE_AUC`), the larger of that and 2·(1 − AUC)
ESTIMATE_RULES = ("mean", "auc")
#: what a topic with words makes of a fetched page with none of them (R(P) = 0; docs/learned.md)
WORDLESS_RULES = ("keep", "zero", "exclude")
#: below this held-out AUC of the last refit the self-assessment is flagged unreliable (chosen on
#: the development crawls, docs/learned.md)
RELIABLE_AUC = 0.85
#: with words (pseudo-positives), below this c of the last PU refit it is flagged too (chosen on the
#: development crawls, docs/learned.md)
RELIABLE_C = 0.17


#: W of :func:`title_rank` per TOPICCRAWL_CLASSIFIER_RANK rule, chosen on the development topics
#: (docs/learned.md, "The title's closeness in the pseudo-labels"): the title's closeness in meaning
#: under the semantic prior's encoder, or its cosine to the topic words
TITLE_RANK_WEIGHTS = {"semantic": 0.5, "title": 0.3}


def title_rank(relevance: float, closeness: float, weight: float) -> float:
    """A fetched page's score for ranking the pseudo-positives: (1 − ``weight``)·R(P) +
    ``weight``·``closeness`` (its title's closeness to the topic), 0 where R(P) is 0."""
    return (1.0 - weight) * relevance + weight * closeness if relevance > 0.0 else 0.0


def pseudo_positive_index(relevance: Sequence[float], rule: str = "top", *, share: float = 0.03,
                          min_count: int = 3, beta: float = 0.3, quantile: float = 0.25,
                          max_count: int | None = None, relative: float = 0.5) -> np.ndarray:
    """Indices of the pages taken as pseudo-positives, given their R(P) (WL paper eq. 4).

    ``"top"``: the ⌈``share`` · n⌉ pages of highest R(P) (at least ``min_count``), among those with
    R(P) > 0; ties at the cut are broken by position (earlier pages first). ``"relative"``: the same
    with as many pages as have R(P) ≥ ``relative`` × the 99th percentile of R(P). ``"beta"``: the
    pages with R(P) ≥ max(``beta``, the ``quantile`` of R(P)), none when that bound is 0. Either way
    at most ``max_count``, the highest R(P) kept. Sorted by position.
    """
    r = np.asarray(relevance, dtype=np.float64)
    if rule in ("top", "relative"):
        if rule == "top":
            want = math.ceil(share * len(r) - 1e-9)  # 0.07 * 100 is 7.000000000000001
        else:
            want = int(np.count_nonzero(r >= relative * float(np.quantile(r, 0.99)))) if len(r) else 0
        order = np.argsort(-r, kind="stable")[: max(min_count, want)]
        idx = np.sort(order[r[order] > 0.0])
    elif rule == "beta":
        if not len(r):
            return np.zeros(0, dtype=np.int64)
        strong = max(beta, float(np.quantile(r, quantile)))
        idx = np.flatnonzero(r >= strong) if strong > 0.0 else np.zeros(0, dtype=np.int64)
    else:
        raise ValueError(f"pseudo-label rule {rule!r}: expected one of {', '.join(PSEUDO_RULES)}")
    if max_count is not None and len(idx) > max_count:
        idx = np.sort(idx[np.argsort(-r[idx], kind="stable")[:max_count]])
    return idx


class PageFocus:
    """P(relevant | page) for a crawl (module docstring). ``beta``: the topic's threshold on R(P)
    (used by ``pseudo="beta"`` only). ``wordless`` (with ``use_words``): a page with R(P) = 0 keeps
    the classifier's P (``"keep"``), gets P = 0 (``"zero"``), or also stays out of the classifier's
    unlabeled set (``"exclude"``). ``rank_scorer``: an object with ``page_relevance(terms)`` (a
    :class:`~topiccrawl.scoring.relevance.RelevanceScorer` over the full page vector) whose score of
    every fetched page ranks the pseudo-positives of rules ``"top"`` and ``"relative"`` instead of
    R(P) (it must be 0 exactly where R(P) is)."""

    #: a focus pickled before ``wordless`` / ``rank_scorer`` / ``unranked`` existed (a JOBDIR of older code)
    #: keeps its behaviour
    wordless = "keep"
    rank_scorer = None
    unranked = "flat"
    estimate = "mean"
    discarded = 0
    _discarded_auc = None

    def __init__(self, beta: float = 0.3, *, use_words: bool = True, refit_every: int = 100,
                 min_pages: int = 30, max_unlabeled: int = 2000, max_pseudo: int = 500,
                 pseudo: str = "top", pseudo_share: float = 0.03, min_pseudo: int = 3,
                 strong_quantile: float = 0.25, wordless: str = "keep", rank_scorer=None, seed: int = 0,
                 classifier: PageClassifier | None = None, unranked: str = "discard",
                 estimate: str = "mean") -> None:
        check_choice("pseudo", pseudo, PSEUDO_RULES)
        check_choice("wordless", wordless, WORDLESS_RULES)
        check_choice("unranked", unranked, UNRANKED_RULES)
        check_choice("estimate", estimate, ESTIMATE_RULES)
        self.estimate = estimate
        self.wordless = wordless
        self.unranked = unranked
        self.discarded = 0  # refits discarded by the ``unranked`` rule
        self._discarded_auc: float | None = None  # the held-out AUC of the last refit, when discarded
        self.rank_scorer = rank_scorer
        self.beta = beta
        self.pseudo = pseudo
        self.pseudo_share = pseudo_share
        self.min_pseudo = min_pseudo
        self.use_words = use_words
        self.refit_every = refit_every
        self.min_pages = min_pages
        self.max_unlabeled = max_unlabeled
        self.max_pseudo = max_pseudo
        self.strong_quantile = strong_quantile
        self.classifier = classifier if classifier is not None else PageClassifier(random_state=seed)
        self._rng = random.Random(seed)
        self._examples: list[sp.csr_matrix] = []
        self._counter: list[sp.csr_matrix] = []
        #: reservoir of fetched pages: hashed row and R(P)
        self._rows: list[sp.csr_matrix] = []
        self._relevance: list[float] = []
        self._rank: list[float] = []  # the rank_scorer's score (or R(P)): rules "top" and "relative"
        self._keys: list[str | None] = []  # the reservoir pages' URLs
        #: URL -> P(relevant) of the reservoir's pages under the model of the last refit
        self.reservoir_probabilities: dict[str, float] = {}
        self.pages = 0
        self.refits = 0
        self.fitted = False
        self._next_fit = min_pages
        self._base_mean = 0.0  # mean P over the reservoir at the last refit
        self._base_pages = 0  # pages fetched at the last refit
        self._since = 0.0  # Σ P of the pages fetched since
        self.positives_used = 0

    # -- inputs ----------------------------------------------------------------------------------
    def _row(self, terms: Sequence[str], hashed: tuple | None = None) -> sp.csr_matrix:
        if hashed is not None:
            return counts_row(*hashed, self.classifier.n_features)
        return hash_terms([terms], self.classifier.n_features)

    def add_example(self, terms: Sequence[str]) -> None:
        self._examples.append(self._row(terms))

    def add_counter_example(self, terms: Sequence[str]) -> None:
        self._counter.append(self._row(terms))

    @property
    def n_examples(self) -> int:
        return len(self._examples)

    def observe(self, terms: Sequence[str], relevance: float, key: str | None = None,
                hashed: tuple[np.ndarray, np.ndarray] | None = None, rank: float | None = None) -> float:
        """Record a fetched page (its terms, R(P) and optionally its URL ``key``) and return its
        P(relevant); refits when due. ``hashed``: the terms' sorted distinct hashed columns and
        counts when the caller has them (:class:`~topiccrawl.learning.vocabulary.Vocabulary`).
        ``rank``: the caller's score ranking this page for the pseudo-positives of rules ``"top"``
        and ``"relative"`` (0 where R(P) is 0; e.g. :func:`title_rank`),
        instead of the ``rank_scorer``'s or R(P)."""
        scorer = self.rank_scorer  # scores every page: its document frequencies count them all
        full = scorer.page_relevance(terms) if scorer is not None and self.use_words else None
        if rank is None or not self.use_words:
            rank = relevance if full is None else full
        self.pages += 1
        row = None
        if len(self._rows) < self.max_unlabeled:
            row = self._row(terms, hashed)
            self._rows.append(row)
            self._relevance.append(relevance)
            self._rank.append(rank)
            self._keys.append(key)
        else:
            j = self._rng.randrange(self.pages)
            if j < self.max_unlabeled:
                row = self._row(terms, hashed)
                self._rows[j], self._relevance[j], self._rank[j], self._keys[j] = row, relevance, rank, key
        # a refit re-scores the reservoir: this page is in its mean already (or, not sampled, in the
        # mean's extrapolation to every page so far) and adds no P of its own below
        refitted = self.pages >= self._next_fit and self.refit()
        if not self.fitted:
            return float(min(max(relevance, 0.0), 1.0))
        if self._gated(relevance):
            return 0.0
        # one hashing per page: the reservoir's row when the page has one
        if row is not None:
            p = self.classifier.proba_row(row)
        elif hashed is not None:
            p = self.classifier.proba_counts(*hashed)
        else:
            p = self.classifier.proba_one(terms)
        if not refitted:
            self._since += p
        return p

    def _gated(self, relevance: float) -> bool:
        """P = 0 by the ``wordless`` rule: a topic with words, a page with none of them."""
        return self.wordless != "keep" and self.use_words and relevance <= 0.0

    # -- training --------------------------------------------------------------------------------
    def _pseudo_positives(self) -> list[sp.csr_matrix]:
        if not self.use_words or not self._relevance:
            return []
        ranked = self._relevance if self.pseudo == "beta" else self._rank
        idx = pseudo_positive_index(ranked, self.pseudo, share=self.pseudo_share, min_count=self.min_pseudo,
                                    beta=self.beta, quantile=self.strong_quantile, max_count=self.max_pseudo)
        return [self._rows[i] for i in idx]

    def refit(self) -> bool:
        """Fit on the positives and the unlabeled pages now; False when there are too few of either,
        or (``unranked="discard"``) when the new fit's held-out positives do not rank above the
        fetched pages: then the model before it stays, or before any fit R(P)."""
        self._next_fit = self.pages + max(self.refit_every, self.pages // 2)
        positives = self._examples + self._pseudo_positives()
        if len(positives) < 2 or len(self._rows) + len(self._counter) < 2:
            return False
        fetched = sp.vstack(self._rows, format="csr") if self._rows else None  # stacked once: fit and re-score
        gated = np.array([self._gated(r) for r in self._relevance], dtype=bool)
        train = fetched[np.flatnonzero(~gated)] if fetched is not None and self.wordless == "exclude" else fetched
        unlabeled = [m for m in (train, *self._counter) if m is not None and m.shape[0]]
        if sum(m.shape[0] for m in unlabeled) < 2:
            return False
        discard = self.unranked == "discard"
        model = clone(self.classifier) if discard else self.classifier
        model.refit(sp.vstack(positives, format="csr"), sp.vstack(unlabeled, format="csr"))
        if discard and not model.ranks_:  # the model before stays (or R(P))
            self.discarded += 1
            self._discarded_auc = model.heldout_auc_
            return False
        self.classifier, self._discarded_auc = model, None
        self.fitted = True
        self.refits += 1
        self.positives_used = len(positives)
        if fetched is not None:
            p = self.classifier.predict_proba(fetched)[:, 1]
            p[gated] = 0.0
            self._base_mean = float(p.mean()) if len(p) else 0.0
            self.reservoir_probabilities = {k: float(v) for k, v in zip(self._keys, p.tolist()) if k is not None}
        else:
            self._base_mean = 0.0
        self._base_pages = self.pages
        self._since = 0.0
        return True

    def __setstate__(self, state: dict) -> None:  # a focus saved before the reservoir kept URLs
        state.setdefault("_keys", [None] * len(state.get("_rows", ())))
        state.setdefault("reservoir_probabilities", {})
        state.setdefault("_rank", list(state.get("_relevance", ())))
        self.__dict__.update(state)

    # -- reports ---------------------------------------------------------------------------------
    @property
    def mean_probability(self) -> float | None:
        """The mean P(relevant) of the fetched pages (module docstring); None before the first fit."""
        if not self.fitted or not self.pages:
            return None
        return (self._base_mean * self._base_pages + self._since) / self.pages

    @property
    def auc_bound(self) -> float | None:
        """2·(1 − AUC) of the last refit's held-out positives against the fetched pages: the share of
        relevant pages among those if the positives were drawn like them and the classifier told
        relevant from other pages perfectly (AUC_PU = π/2 + (1 − π)·AUC_PN with AUC_PN = 1; an upper
        bound on π under those draws); None without a held-out AUC of a kept refit, or below ½
        (positives ranked under the fetched pages: no bound)."""
        if self._discarded_auc is not None or not self.fitted:
            return None
        auc = self.classifier.heldout_auc_
        return None if auc is None or auc < 0.5 else 2.0 * (1.0 - auc)

    @property
    def bound_applied(self) -> bool:
        """With ``estimate="auc"``: the self-assessed harvest rate is :attr:`auc_bound` (a topic of
        words without example pages, the last refit kept and flagged by its held-out AUC, the bound
        above the mean P)."""
        if (self.estimate != "auc" or not self.use_words or self._examples or not self.fitted
                or self.classifier.mode_ != "pu" or self.unreliable_reason != "auc"):
            return False
        bound, mean = self.auc_bound, self.mean_probability
        return bound is not None and mean is not None and bound > mean

    @property
    def expected_harvest(self) -> float | None:
        """The self-assessed harvest rate: :attr:`mean_probability`, or :attr:`auc_bound` where
        :attr:`bound_applied` (the pseudo-positives are the densest few of the relevant pages, so P's
        level is too low where many fetched pages are relevant). None before the first fit."""
        return self.auc_bound if self.bound_applied else self.mean_probability

    @property
    def heldout_auc(self) -> float | None:
        """The last refit's held-out AUC of its positives against the unlabeled pages (PU only; a
        discarded refit's too: the estimate then comes from an older model)."""
        if self._discarded_auc is not None:
            return self._discarded_auc
        return self.classifier.heldout_auc_ if self.fitted else None  # None on a classifier of older code

    @property
    def unreliable_reason(self) -> str | None:
        """Why the self-assessment is not to be trusted: ``"auc"`` (held-out positives rank like
        ordinary pages), ``"c"`` (with words: c below :data:`RELIABLE_C`, the estimate mostly
        extrapolated), or None."""
        auc = self.heldout_auc
        if auc is None:
            return None
        if auc < RELIABLE_AUC:
            return "auc"
        if self.use_words and self.fitted and self.classifier.mode_ == "pu" and self.classifier.c_ < RELIABLE_C:
            return "c"
        return None

    @property
    def unreliable(self) -> bool:
        """The self-assessment is not to be trusted (:attr:`unreliable_reason`)."""
        return self.unreliable_reason is not None

    def stats(self) -> dict:
        c = self.classifier
        out = {"classifier/refits": self.refits, "classifier/pages": self.pages,
               "classifier/examples": len(self._examples), "classifier/positives": self.positives_used,
               "classifier/C": float(c.C)}  # TOPICCRAWL_CLASSIFIER_C (a JOBDIR's classifier keeps its own)
        if self.discarded:
            out["classifier/discarded"] = self.discarded
        if self.fitted:
            out["classifier/mode"] = c.mode_
            out["classifier/c"] = round(float(c.c_), 6)
            out["classifier/expected_harvest"] = round(self.expected_harvest or 0.0, 6)
            out["classifier/mean_probability"] = round(self.mean_probability or 0.0, 6)
            out["classifier/estimate"] = "auc_bound" if self.bound_applied else "mean"  # what expected_harvest is
        if self.heldout_auc is not None:  # also when every refit was discarded: no estimate, and why
            out["classifier/heldout_auc"] = round(self.heldout_auc, 4)
            out["classifier/unreliable"] = self.unreliable
            if self.unreliable:
                out["classifier/unreliable_reason"] = self.unreliable_reason
        return out
