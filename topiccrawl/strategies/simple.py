"""Frontier strategies: which queued link is fetched next.

Scrapy-free. Every strategy implements the small :class:`Frontier` protocol (``push``, ``pop``,
``__len__``, ``state``/``from_state``); :class:`topiccrawl.crawl.scheduler.TopicScheduler` only
translates Scrapy requests to :class:`Link` objects and back. The payload of a link (a Scrapy
request in a crawl, anything in a test) is opaque to the strategy.

Strategies
----------
``bfs``
    First in, first out: breadth-first order of discovery.
``bestfirst``
    Exact highest-R(l)-first order (WL paper's OPS baseline). Ties are broken by insertion order
    (earlier first), so the order is fully deterministic.
``oracle``
    Uses the ground-truth labels of the link *targets*: truly relevant targets first, then by
    R(l), then insertion order. It peeks at labels the crawler cannot know; it exists only as the
    upper bound in benchmarks.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True)
class Link:
    """A queued link. ``score`` is the link relevance R(l) (WL paper eq. 5)."""

    url: str
    score: float = 0.0
    depth: int = 0
    domain: str = ""  # registered domain of the URL (region competition, site statistics)
    potential: bool = False  # found on a page whose unnormalised PageRank >= 2 ("potential value")
    payload: Any = field(default=None, compare=False)
    seq: int = -1  # insertion number, assigned by the frontier

    def __lt__(self, other: Link) -> bool:
        """Best-first order: higher R(l) first, then earlier insertion. A heap of links needs no
        ``(key, link)`` tuple per entry (~120 bytes per queued URL, docs/benchmarks.md "Scale")."""
        return self.score > other.score or (self.score == other.score and self.seq < other.seq)


class Frontier(Protocol):
    name: str

    def push(self, link: Link) -> None: ...

    def pop(self) -> Link | None: ...

    def __len__(self) -> int: ...

    def state(self) -> dict: ...

    def load_state(self, state: dict) -> None: ...


class _Base:
    name = "base"

    def __init__(self) -> None:
        self._seq = itertools.count()

    def _stamp(self, link: Link) -> Link:
        if link.seq < 0:
            link.seq = next(self._seq)
        return link

    def _links(self) -> list[Link]:
        raise NotImplementedError

    def state(self) -> dict:
        """Queued links in a form that ``load_state`` restores to the identical order."""
        return {"links": self._links(), "next_seq": next(self._seq)}

    def load_state(self, state: dict) -> None:
        self._seq = itertools.count(state["next_seq"])
        for link in sorted(state["links"], key=lambda l: l.seq):
            self.push(link)


class BFSFrontier(_Base):
    """First in, first out."""

    name = "bfs"

    def __init__(self) -> None:
        super().__init__()
        self._q: deque[Link] = deque()

    def push(self, link: Link) -> None:
        self._q.append(self._stamp(link))

    def pop(self) -> Link | None:
        return self._q.popleft() if self._q else None

    def __len__(self) -> int:
        return len(self._q)

    def _links(self) -> list[Link]:
        return list(self._q)


class BestFirstFrontier(_Base):
    """Highest R(l) first; ties by insertion order (``Link.__lt__``). O(log n) per push and pop."""

    name = "bestfirst"

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[Link] = []

    def push(self, link: Link) -> None:
        self._stamp(link)
        heapq.heappush(self._heap, link)

    def pop(self) -> Link | None:
        return heapq.heappop(self._heap) if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def _links(self) -> list[Link]:
        return list(self._heap)


class OracleFrontier(_Base):
    """Truly relevant targets first (ground truth), then best-first. Benchmarks only."""

    name = "oracle"

    def __init__(self, is_relevant: Callable[[str], bool]) -> None:
        super().__init__()
        self._is_relevant = is_relevant
        self._heap: list[tuple] = []

    def push(self, link: Link) -> None:
        self._stamp(link)
        heapq.heappush(self._heap, (not self._is_relevant(link.url), link))

    def pop(self) -> Link | None:
        return heapq.heappop(self._heap)[1] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def _links(self) -> list[Link]:
        return [entry[1] for entry in self._heap]


class FrontierError(ValueError):
    """Unknown strategy, a bad strategy option, or a strategy that lacks what it needs."""


def _oracle(options: dict, is_relevant: Callable[[str], bool] | None) -> Frontier:
    if is_relevant is None:
        raise FrontierError(
            "strategy 'oracle' needs ground truth: set TOPICCRAWL_GROUND_TRUTH or crawl an "
            "offline web (TOPICCRAWL_WEB) and give the topic evaluation labels"
        )
    return OracleFrontier(is_relevant)


#: strategy name -> factory(options, is_relevant) or "module:factory" (imported on first use).
#: ``options`` holds every ``TOPICCRAWL_*`` setting, keys lower-cased without the prefix.
STRATEGIES: dict[str, Callable | str] = {
    "bfs": lambda options, is_relevant: BFSFrontier(),
    "bestfirst": lambda options, is_relevant: BestFirstFrontier(),
    "oracle": _oracle,
    "wl": "topiccrawl.strategies.wanglandau:make_wl",
    "sa": "topiccrawl.strategies.annealing:make_sa",
    "fcsa-host": "topiccrawl.strategies.annealing:make_fcsa_host",
    "sitefinder": "topiccrawl.sitefinder.core:make_sitefinder",
}


def make_frontier(name: str, is_relevant: Callable[[str], bool] | None = None,
                  options: dict | None = None) -> Frontier:
    """Build a strategy by name (see ``STRATEGIES``)."""
    factory = STRATEGIES.get(name)
    if factory is None:
        raise FrontierError(f"unknown strategy {name!r}; expected one of: {', '.join(STRATEGIES)}")
    if isinstance(factory, str):
        import importlib

        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(options or {}, is_relevant)
