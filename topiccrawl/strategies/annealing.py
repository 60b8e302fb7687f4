"""Simulated-annealing baselines for the WL paper's comparison: ``sa`` and ``fcsa-host``.

``sa``: each decision draws r uniformly from {0, …, k−1} and proposes the (r+1)-th best queued
link (by priority p); the best link is fetched unless the lower candidate is accepted with the
Metropolis probability exp(−Δ/T), Δ = p(best) − p(candidate) ≥ 0. The temperature cools
geometrically, T ← max(α·T, T_min), once per decision, so the crawl drifts from exploration to
best-first. For ``sa`` the priority is p(l) = R(l) (paper eq. 5).

``fcsa-host``: SA with a memory of host quality. The crawler reports every fetched page with
``feedback(url, domain, relevance, beta)``; a host's smoothed harvest is

    q(h) = (Σ_pages v + a·q0) / (n_h + a),   v = 1 if relevance ≥ β else 0 (or v = relevance
                                                 clipped to [0, 1] when no β is given),

and a link's priority becomes p(l) = (1 − w)·R(l) + w·q(host(l)). Unvisited hosts get q0, so
hosts that keep yielding relevant pages rise and hosts that yield none sink. Links are kept in
one max-heap per host plus a heap of hosts keyed by their best link's priority, so feedback
re-ranks a host's links in O(log hosts). Options: :class:`SAOptions`, :class:`FCSAHostOptions`
(docs/wl.md).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from topiccrawl.strategies.base import FrontierBase, Link, StrategyOptions, option_field
from topiccrawl.strategies.wanglandau import clip01


class _Host:
    __slots__ = ("name", "heap", "version", "good", "seen")

    def __init__(self, name: str) -> None:
        self.name = name
        self.heap: list[tuple] = []  # (−R, seq, link)
        self.version = 0
        self.good = 0.0  # Σ v over reported pages
        self.seen = 0  # pages reported


class SAFrontier(FrontierBase):
    """Simulated annealing over the frontier (``sa``); with ``host_weight`` > 0 see FCSAHostFrontier."""

    name = "sa"

    def __init__(self, *, t0: float = 0.1, alpha: float = 0.999, tmin: float = 1e-3, top_k: int = 16,
                 seed: int = 0, host_weight: float = 0.0, host_prior: float = 0.5,
                 host_strength: float = 2.0) -> None:
        self.t0, self.alpha, self.tmin, self.top_k = t0, alpha, tmin, top_k
        self.host_weight, self.host_prior, self.host_strength = host_weight, host_prior, host_strength
        self._rng = random.Random(seed)
        self._t = t0
        self._hosts: dict[str, _Host] = {}
        self._hheap: list[tuple] = []  # (−p(best link), its seq, host version, host name)
        self._size = self._live = self._next_seq = 0
        self._decisions = self._worse = 0

    def host_quality(self, domain: str) -> float:
        """q(h) = (Σ v + a·q0) / (n_h + a)."""
        h = self._hosts.get(domain)
        good, seen = (h.good, h.seen) if h else (0.0, 0)
        return (good + self.host_strength * self.host_prior) / (seen + self.host_strength)

    def priority(self, link: Link) -> float:
        """p(l) = (1 − w)·R(l) + w·q(host(l))."""
        w = self.host_weight
        score = clip01(link.score)
        return (1.0 - w) * score + w * self.host_quality(link.domain) if w else score

    def _host(self, name: str) -> _Host:
        h = self._hosts.get(name)
        if h is None:
            h = self._hosts[name] = _Host(name)
        return h

    def _touch(self, h: _Host) -> None:
        h.version += 1
        if h.heap:
            best = h.heap[0][2]
            heapq.heappush(self._hheap, (-self.priority(best), best.seq, h.version, h.name))
        if len(self._hheap) > 2 * self._live + 64:
            self._hheap = []
            for x in self._hosts.values():
                if x.heap:
                    x.version += 1
                    best = x.heap[0][2]
                    self._hheap.append((-self.priority(best), best.seq, x.version, x.name))
            heapq.heapify(self._hheap)

    def _add(self, link: Link) -> None:
        h = self._host(link.domain)
        if not h.heap:
            self._live += 1
        heapq.heappush(h.heap, (-clip01(link.score), link.seq, link))
        self._size += 1
        if h.heap[0][2] is link:  # new best link of its host
            self._touch(h)

    def _pop_best(self) -> tuple[Link, float]:
        h = self._hheap
        while True:
            neg_p, _, version, name = h[0]
            host = self._hosts[name]
            if host.version == version:
                break
            heapq.heappop(h)
        link = heapq.heappop(host.heap)[2]
        if not host.heap:
            self._live -= 1
        self._size -= 1
        self._touch(host)
        return link, -neg_p

    # -- Frontier protocol ---------------------------------------------------------------------------
    def push(self, link: Link) -> None:
        if link.seq < 0:
            link.seq = self._next_seq
            self._next_seq += 1
        self._add(link)

    def pop(self) -> Link | None:
        if not self._size:
            return None
        r = self._rng.randrange(min(self.top_k, self._size))
        taken = [self._pop_best() for _ in range(r + 1)]
        (best, p_best), (chosen, p_cand) = taken[0], taken[-1]
        delta = p_best - p_cand
        if delta > 0:
            if math.log(1.0 - self._rng.random()) <= -delta / self._t:
                self._worse += 1
            else:
                chosen = best
        for link, _ in taken:
            if link is not chosen:
                self._add(link)
        self._t = max(self._t * self.alpha, self.tmin)
        self._decisions += 1
        return chosen

    def __len__(self) -> int:
        return self._size

    @property
    def temperature(self) -> float:
        return self._t

    def stats(self) -> dict:
        return {"sa/temperature": self._t, "sa/decisions": self._decisions, "sa/accepted_worse": self._worse}

    def state(self) -> dict:
        return {
            "links": [entry[2] for h in self._hosts.values() for entry in h.heap],
            "next_seq": self._next_seq,
            "sa": {"t": self._t, "decisions": self._decisions, "worse": self._worse, "rng": self._rng.getstate(),
                   "hosts": {h.name: (h.good, h.seen) for h in self._hosts.values() if h.seen}},
        }

    def load_state(self, state: dict) -> None:
        self._hosts, self._hheap = {}, []
        self._size = self._live = 0
        self._next_seq = state["next_seq"]
        sa = state.get("sa")
        if sa is not None:
            self._t, self._decisions, self._worse = sa["t"], sa["decisions"], sa["worse"]
            self._rng.setstate(sa["rng"])
            for name, (good, seen) in sa["hosts"].items():
                h = self._host(name)
                h.good, h.seen = good, seen
        for link in state["links"]:
            self._add(link)


class FCSAHostFrontier(SAFrontier):
    """``fcsa-host``: SA whose priorities include the observed harvest of each host."""

    name = "fcsa-host"

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None:
        """A fetched page of ``domain`` had ``relevance``; counts as relevant when relevance ≥ β."""
        h = self._host(domain)
        h.good += (1.0 if relevance >= beta else 0.0) if beta is not None else clip01(relevance)
        h.seen += 1
        self._touch(h)

    def stats(self) -> dict:
        return {**super().stats(), "sa/hosts_with_feedback": sum(1 for h in self._hosts.values() if h.seen)}


@dataclass(frozen=True)
class SAOptions(StrategyOptions):
    """Options of ``sa``; each field is read from the setting of its name (docs/wl.md)."""

    sa_t0: float = option_field(0.1, low=1e-12)
    sa_alpha: float = option_field(0.999, low=1e-12, high=1.0)
    sa_tmin: float = option_field(1e-3, low=1e-12, high="sa_t0")
    sa_top_k: int = option_field(16, low=1)
    sa_seed: int = 0

    def kwargs(self) -> dict:
        """The :class:`SAFrontier` arguments."""
        return {"t0": self.sa_t0, "alpha": self.sa_alpha, "tmin": self.sa_tmin, "top_k": self.sa_top_k,
                "seed": self.sa_seed}


@dataclass(frozen=True)
class FCSAHostOptions(SAOptions):
    """Options of ``fcsa-host``: those of ``sa`` plus the host memory's w, q0 and a."""

    sa_host_weight: float = option_field(0.3, low=0.0, high=1.0)
    sa_host_prior: float = option_field(0.5, low=0.0, high=1.0)
    sa_host_strength: float = option_field(2.0, low=1e-12)

    def kwargs(self) -> dict:
        """The :class:`FCSAHostFrontier` arguments."""
        return {**super().kwargs(), "host_weight": self.sa_host_weight, "host_prior": self.sa_host_prior,
                "host_strength": self.sa_host_strength}


def make_sa(options: SAOptions | Mapping | None = None,
            is_relevant: Callable[[str], bool] | None = None) -> SAFrontier:
    """Factory of ``sa`` (:class:`SAOptions`, or a settings mapping: ``SAOptions.coerce``)."""
    return SAFrontier(**SAOptions.coerce(options).kwargs())


def make_fcsa_host(options: FCSAHostOptions | Mapping | None = None,
                   is_relevant: Callable[[str], bool] | None = None) -> FCSAHostFrontier:
    """Factory of ``fcsa-host`` (:class:`FCSAHostOptions`, or a settings mapping)."""
    return FCSAHostFrontier(**FCSAHostOptions.coerce(options).kwargs())
