"""A harvest audit: the true harvest rate estimated from a few pages a person labels.

A crawl's self-assessed harvest rate is the mean F̄ of its own per-page judgement f_i over the N
counted pages (f_i = P(relevant) of the page classifier, or 1 when R(P) ≥ β): it can be biased
by any amount. A uniform random sample of n of those pages, labelled y_j ∈ {0, 1} by a person,
corrects it. The *difference estimator* of survey sampling (Särndal, Swensson & Wretman, *Model
Assisted Survey Sampling*, 1992, §6.3; the mean case of prediction-powered inference, Angelopoulos
et al., *Science* 382, 2023) is F̄ + mean(y − f), unbiased whatever f is; f only sets its variance.
The power-tuned form (PPI++, Angelopoulos, Duchi & Zrnic, 2023; the survey regression estimator)
weighs the judgement by λ = s_yf / s²_f in [0, 1]:

    θ̂ = ȳ + λ (F̄ − f̄),    se² = (1 − n/N) · s²(y − λf) / n

the labels' proportion ȳ when f tells nothing (λ = 0), the difference estimate when it tells a lot.
The interval θ̂ ± t_{n−1}·se is widened to hold the labels' Wilson interval too (a sample with no
relevant page, or no error of f, would otherwise collapse it); θ̂ and the interval are clipped to
[0, 1]. Which form and interval: chosen on development crawls (docs/benchmarks.md, "Harvest audit").
Scrapy-free.
"""
from __future__ import annotations

import math
import random
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

#: label spellings a person may write in ``audit.csv`` (case-insensitive); blank = not labelled
YES = frozenset({"1", "1.0", "y", "yes", "true", "relevant", "r", "+", "是"})  # 1.0: a column pandas wrote
NO = frozenset({"0", "0.0", "n", "no", "false", "irrelevant", "not", "-", "否"})


class AuditError(ValueError):
    """A user mistake in an audit (unreadable label, no labels, unknown page): one line."""


def parse_label(text: str) -> bool | None:
    """``"1"``/``"yes"``/… → True, ``"0"``/``"no"``/… → False, blank → None; :class:`AuditError` otherwise.
    Full-width forms (``１``, ``ｙｅｓ``, an input method's) read as their ASCII ones."""
    value = unicodedata.normalize("NFKC", text or "").strip().lower()
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
    the estimate θ̂ with its interval; ``plain`` = the labels' proportion (Wilson); ``bias`` =
    self-assessed − θ̂ (how far the crawl's own figure is off), with its interval; ``method`` and
    ``weight`` (λ) say how the judgement entered θ̂."""

    pages: int
    labelled: int
    confidence: float
    self_assessed: float
    audited: Interval
    plain: Interval
    bias: Interval
    method: str = "tuned"
    weight: float = 1.0  # λ: the weight of the crawl's judgement (1 for the difference estimate)

    def as_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=256)
def _t(confidence: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


@lru_cache(maxsize=16)
def _z(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2))


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """The proportion successes / n with Wilson's score interval."""
    if n <= 0:
        raise AuditError("no labelled page: label some rows of audit.csv first")
    z = _z(confidence)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


#: how the judgement enters the estimate: "tuned" (λ fitted, PPI++) or "difference" (λ = 1)
METHODS = ("tuned", "difference")


def audit_estimate(judged: Sequence[float], sample_judged: Sequence[float], labels: Sequence[bool],
                   confidence: float = 0.95, *, method: str = "tuned", widen: bool = True) -> AuditEstimate:
    """The audit of N pages with judgements ``judged`` from the labelled sample (``sample_judged``
    = the f of the sampled pages, ``labels`` their y), drawn uniformly without replacement.

    ``method="tuned"`` (the default): ȳ + λ(F̄ − f̄) with λ = s_yf / s²_f clipped to [0, 1] (0 when f
    is constant on the sample), the power-tuned estimate of PPI++; ``"difference"``: λ = 1.
    ``widen`` (the default): the interval also holds the labels' Wilson interval. Every page
    labelled (n = N): the labels' share, exactly (each interval that one point)."""
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
    if n == big_n:  # every page labelled: the rate is known, with no interval around it
        known = Interval(math.fsum(ys) / n, math.fsum(ys) / n, math.fsum(ys) / n)
        gap = mean_f - known.estimate
        return AuditEstimate(pages=big_n, labelled=n, confidence=confidence, self_assessed=mean_f, audited=known,
                             plain=known, bias=Interval(gap, gap, gap), method=method, weight=0.0)
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
