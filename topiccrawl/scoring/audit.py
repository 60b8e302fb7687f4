"""A harvest audit: the true harvest rate estimated from a few pages a person labels.

A crawl's self-assessed harvest rate is the mean of its own per-page judgement f_i over the N
counted pages (f_i = P(relevant) of the page classifier, or 1 when R(P) ≥ β): it can be biased
by any amount. A uniform random sample of n of those pages, labelled y_j ∈ {0, 1} by a person,
corrects it with the survey-sampling *difference estimator* (Särndal, Swensson & Wretman, *Model
Assisted Survey Sampling*, 1992, §6.3; the mean case of prediction-powered inference,
Angelopoulos et al., *Science* 382, 2023):

    θ̂ = (1/N) Σ_i f_i + (1/n) Σ_j (y_j − f_j)

unbiased over the random sample whatever f is; f only sets the variance,
Var θ̂ = (1 − n/N) · s²_r / n with s²_r the sample variance of the residuals y − f. The interval
is θ̂ ± t_{n−1} · se; θ̂ and the interval are clipped to [0, 1]. The labels alone give the plain proportion ȳ, reported
beside it with Wilson's interval. Scrapy-free.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

#: label spellings a person may write in ``audit.csv`` (case-insensitive); blank = not labelled
YES = frozenset({"1", "y", "yes", "true", "relevant", "r", "+"})
NO = frozenset({"0", "n", "no", "false", "irrelevant", "not", "-"})


class AuditError(ValueError):
    """A user mistake in an audit (unreadable label, no labels, unknown page): one line."""


def parse_label(text: str) -> bool | None:
    """``"1"``/``"yes"``/… → True, ``"0"``/``"no"``/… → False, blank → None; :class:`AuditError` otherwise."""
    value = (text or "").strip().lower()
    if not value:
        return None
    if value in YES:
        return True
    if value in NO:
        return False
    raise AuditError(f"label {text!r}: expected 1 or 0 (yes/no), or blank for a page not labelled")


def sample_positions(n_pages: int, k: int, rng: random.Random) -> list[int]:
    """k positions of ``range(n_pages)`` drawn uniformly without replacement, in random order: any
    prefix of the list is itself a uniform random sample (label from the top, stop anywhere)."""
    return rng.sample(range(n_pages), min(max(k, 0), n_pages))


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class AuditEstimate:
    """One audit: N pages, n labelled; ``self_assessed`` = mean f over the N pages; ``audited`` =
    the difference estimate θ̂ with its interval; ``plain`` = the labels' proportion (Wilson);
    ``bias`` = self-assessed − θ̂ (how far the crawl's own figure is off), with its interval."""

    pages: int
    labelled: int
    confidence: float
    self_assessed: float
    audited: Interval
    plain: Interval
    bias: Interval
    method: str = "difference"
    weight: float = 1.0  # λ: the weight of the crawl's judgement (1 for the difference estimate)

    def as_dict(self) -> dict:
        return asdict(self)


def _t(confidence: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """The proportion successes / n with Wilson's score interval."""
    if n <= 0:
        raise AuditError("no labelled page: label some rows of audit.csv first")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


#: how the judgement enters the estimate: "difference" (λ = 1) or "tuned" (λ fitted, PPI++)
METHODS = ("difference", "tuned")


def difference_estimate(judged: Sequence[float], sample_judged: Sequence[float], labels: Sequence[bool],
                        confidence: float = 0.95, *, method: str = "difference", widen: bool = False) -> AuditEstimate:
    """The audit of N pages with judgements ``judged`` from the labelled sample (``sample_judged``
    = the f of the sampled pages, ``labels`` their y), drawn uniformly without replacement.

    ``method="tuned"``: ȳ + λ(F̄ − f̄) with λ = s_yf / s²_f clipped to [0, 1] (0 when f is constant
    on the sample), the power-tuned estimate of PPI++ (Angelopoulos, Duchi & Zrnic, 2023).
    ``widen``: the interval also holds the labels' Wilson interval."""
    if not 0.0 < confidence < 1.0:
        raise AuditError(f"confidence {confidence!r}: expected a number between 0 and 1")
    if method not in METHODS:
        raise ValueError(f"method={method!r}: expected one of {', '.join(METHODS)}")
    n, big_n = len(labels), len(judged)
    if len(sample_judged) != n:
        raise ValueError("one judgement per label")
    if n == 0:
        raise AuditError("no labelled page: label some rows of audit.csv first")
    if big_n < n:
        raise ValueError("more labelled pages than pages")
    mean_f = math.fsum(judged) / big_n
    ys = [float(y) for y in labels]
    lam = 1.0
    if method == "tuned":
        mean_y, mean_fs = math.fsum(ys) / n, math.fsum(sample_judged) / n
        var_f = math.fsum((f - mean_fs) ** 2 for f in sample_judged)
        cov = math.fsum((y - mean_y) * (f - mean_fs) for y, f in zip(ys, sample_judged))
        lam = min(1.0, max(0.0, cov / var_f)) if var_f > 0 else 0.0
    residuals = [y - lam * f for y, f in zip(ys, sample_judged)]
    mean_r = math.fsum(residuals) / n
    raw = lam * mean_f + mean_r
    estimate = min(1.0, max(0.0, raw))  # a rate: clipping only moves it towards the truth
    plain = wilson(sum(bool(y) for y in labels), n, confidence)
    if n > 1:
        var = math.fsum((r - mean_r) ** 2 for r in residuals) / (n - 1)
        se = math.sqrt(max(0.0, 1.0 - n / big_n) * var / n)
        half = _t(confidence, n - 1) * se
        low, high = max(0.0, raw - half), min(1.0, raw + half)
        if widen:
            low, high = min(low, plain.low), max(high, plain.high)
        audited = Interval(estimate, low, high)
        bias = Interval(mean_f - raw, mean_f - high, mean_f - low)
    else:
        audited, bias = Interval(estimate, None, None), Interval(mean_f - raw, None, None)
    return AuditEstimate(pages=big_n, labelled=n, confidence=confidence, self_assessed=mean_f, audited=audited,
                         plain=plain, bias=bias, method=method, weight=lam)
