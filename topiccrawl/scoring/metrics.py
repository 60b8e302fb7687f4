"""Crawl evaluation: the WL paper's measures (eqs. 7–11) and ground-truth measures.

With DP downloaded pages of relevance R_1..R_DP and LP of them at or above the threshold β:

* eq. 7  Accuracy = LP / DP                       (the scorer's own harvest rate)
* eq. 8  ARDP = (1/DP) Σ R_i                      (average relevance of downloaded pages)
* eq. 9  SDDP = sqrt((1/DP) Σ (R_i − ARDP)²)      (population standard deviation)
* eq. 10 ARLP = mean of the R_i >= β
* eq. 11 SDLP = population standard deviation of the R_i >= β

The paper divides by DP (resp. LP), i.e. the population standard deviation; so do we. All
are updated per page with Welford's algorithm. Ground truth (``truth/*``) counts a page as truly
relevant when its labels meet the topic's labels; it is only computed when those are given.
Empty-crawl values are 0.0. Scrapy-free.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

#: DP values at which :meth:`CrawlMetrics.record` keeps a snapshot (1–2.5–5 steps, plus 15,000)
DEFAULT_CHECKPOINTS = (100, 250, 500, 1000, 2500, 5000, 10_000, 15_000, 25_000, 50_000,
                       100_000, 250_000, 500_000, 1_000_000)


class _Running:
    """Welford's running mean and population variance."""

    def __init__(self, n: int = 0, mean: float = 0.0, m2: float = 0.0):
        self.n, self.mean, self.m2 = n, mean, m2

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    @property
    def sd(self) -> float:
        return math.sqrt(self.m2 / self.n) if self.n else 0.0

    def state(self) -> list:
        return [self.n, self.mean, self.m2]


class CrawlMetrics:
    """Running crawl statistics; one :meth:`record` per downloaded page."""

    def __init__(self, beta: float, relevant_labels: frozenset[str] = frozenset(),
                 checkpoints: Iterable[int] = DEFAULT_CHECKPOINTS):
        self.beta = float(beta)
        self.relevant_labels = frozenset(relevant_labels)
        self._at = frozenset(checkpoints)
        self._all = _Running()
        self._lp = _Running()
        self._truth = 0
        self._distinct: set[str] = set()  # identities of the truly relevant pages fetched
        self._sites: dict[str, bool] = {}  # site -> has a truly relevant page
        self._relevant_sites = 0
        self._snapshots: list[dict] = []

    # -- per page ----------------------------------------------------------------------------
    def record(self, url: str, relevance: float, labels: frozenset[str] | None = None,
               site: str | None = None, identity: str | None = None) -> dict:
        """Count one downloaded page; return its harvest-CSV row.

        ``labels`` are the page's ground-truth labels (None: none); ``site`` defaults to the
        URL's host name (pass the registered domain to count sites that way).
        """
        self._all.add(relevance)
        if relevance >= self.beta:
            self._lp.add(relevance)
        if self.relevant_labels:
            hit = bool(labels and self.relevant_labels & labels)
            self._truth += hit
            if hit:
                self._distinct.add(identity or url)
            key = site if site is not None else (urlsplit(url).hostname or "")
            if hit and not self._sites.get(key, False):
                self._relevant_sites += 1
            self._sites[key] = self._sites.get(key, False) or hit
        if self.dp in self._at:
            self._snapshots.append(self.snapshot())
        return {"url": url, "relevance": relevance, "dp": self.dp, "lp": self.lp,
                "accuracy": self.accuracy, "truth_relevant": self.truth_relevant,
                "truth_distinct": len(self._distinct),
                "truth_harvest_rate": self.truth_harvest_rate}

    # -- the measures ------------------------------------------------------------------------
    @property
    def dp(self) -> int:
        return self._all.n

    @property
    def lp(self) -> int:
        return self._lp.n

    @property
    def accuracy(self) -> float:
        """Eq. 7: LP / DP."""
        return self.lp / self.dp if self.dp else 0.0

    @property
    def ardp(self) -> float:
        """Eq. 8: mean relevance of the downloaded pages."""
        return self._all.mean

    @property
    def sddp(self) -> float:
        """Eq. 9: population standard deviation of the relevance of the downloaded pages."""
        return self._all.sd

    @property
    def arlp(self) -> float:
        """Eq. 10: mean relevance of the pages with R >= β."""
        return self._lp.mean

    @property
    def sdlp(self) -> float:
        """Eq. 11: population standard deviation of the relevance of the pages with R >= β."""
        return self._lp.sd

    @property
    def truth_relevant(self) -> int | None:
        """Downloaded pages that are truly relevant; None without topic labels."""
        return self._truth if self.relevant_labels else None

    @property
    def truth_harvest_rate(self) -> float | None:
        """Truly relevant pages / DP."""
        if not self.relevant_labels:
            return None
        return self._truth / self.dp if self.dp else 0.0

    def target_recall(self, total_relevant: int | None) -> float | None:
        """Distinct truly relevant pages downloaded / all truly relevant pages of the web (a page
        fetched again under an alias URL counts once: pass ``identity`` to :meth:`record`)."""
        if not self.relevant_labels or not total_relevant:
            return None
        return len(self._distinct) / total_relevant

    @property
    def site_harvest_rate(self) -> float | None:
        """Of the distinct sites visited, the fraction with at least one truly relevant page."""
        if not self.relevant_labels:
            return None
        return self._relevant_sites / len(self._sites) if self._sites else 0.0

    def snapshot(self, total_relevant: int | None = None) -> dict:
        """All measures, keyed as in the stats vocabulary (prefix ``topiccrawl/`` left out)."""
        return {"dp": self.dp, "lp": self.lp, "accuracy": self.accuracy,
                "ardp": self.ardp, "sddp": self.sddp, "arlp": self.arlp, "sdlp": self.sdlp,
                "truth/relevant": self.truth_relevant,
                "truth/distinct_relevant": len(self._distinct) if self.relevant_labels else None,
                "truth/harvest_rate": self.truth_harvest_rate,
                "truth/target_recall": self.target_recall(total_relevant),
                "truth/site_harvest_rate": self.site_harvest_rate}

    def checkpoints(self, at: Iterable[int] | None = None,
                    total_relevant: int | None = None) -> list[dict]:
        """Snapshots taken when DP reached a checkpoint (those in ``at`` if given), by DP.

        Only DP values passed to the constructor are recorded. ``total_relevant`` fills in
        ``truth/target_recall``.
        """
        wanted = None if at is None else set(at)
        out = []
        for snap in self._snapshots:
            if wanted is None or snap["dp"] in wanted:
                snap = dict(snap)
                if total_relevant and snap["truth/relevant"] is not None:
                    snap["truth/target_recall"] = snap["truth/distinct_relevant"] / total_relevant
                out.append(snap)
        return out

    # -- persistence -------------------------------------------------------------------------
    def state(self) -> dict:
        return {"beta": self.beta, "relevant_labels": sorted(self.relevant_labels),
                "checkpoints": sorted(self._at), "all": self._all.state(),
                "lp": self._lp.state(), "truth": self._truth, "distinct": sorted(self._distinct), "sites": dict(self._sites),
                "snapshots": [dict(s) for s in self._snapshots]}

    @classmethod
    def from_state(cls, state: Mapping) -> CrawlMetrics:
        new = cls(state["beta"], frozenset(state["relevant_labels"]), state["checkpoints"])
        new._all = _Running(*state["all"])
        new._lp = _Running(*state["lp"])
        new._truth = state["truth"]
        new._distinct = set(state.get("distinct", ()))
        new._sites = dict(state["sites"])
        new._relevant_sites = sum(new._sites.values())
        new._snapshots = [dict(s) for s in state["snapshots"]]
        return new


# -- ranking measures (for the ranking tables) ----------------------------------------------

def precision_at(ranked_relevance: list[bool], n: int) -> float:
    """P@N: fraction of the first ``n`` ranked items that are relevant (missing items count as
    not relevant)."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    return sum(map(bool, ranked_relevance[:n])) / n


def _ranks(ranked_relevance: list[bool]) -> list[int]:
    return [i for i, rel in enumerate(ranked_relevance, 1) if rel]


def mean_rank(ranked_relevance: list[bool]) -> float | None:
    """MR: mean 1-based rank of the relevant items (lower is better); None if there are none."""
    ranks = _ranks(ranked_relevance)
    return statistics.fmean(ranks) if ranks else None


def median_rank(ranked_relevance: list[bool]) -> float | None:
    """MedR: median 1-based rank of the relevant items; None if there are none."""
    ranks = _ranks(ranked_relevance)
    return float(statistics.median(ranks)) if ranks else None


def mean_sd(values, digits: int = 3) -> str:
    """``mean ± sd`` (sample sd; 0 for one value) of the non-None values, "–" when none: the
    cell format of every benchmark table."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {sd:.{digits}f}"
