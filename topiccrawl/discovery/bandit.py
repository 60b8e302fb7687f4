"""DWDBRM operator choice (Algorithm 3): the UCB1 bandit over the discovery operators (eq. 11)
and the operator rewards (eqs. 9–10). Method and defaults: ``docs/dwdbrm.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from topiccrawl.discovery.pages import OPERATORS, DWDBRMError
from topiccrawl.discovery.search import SearchBackend

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
