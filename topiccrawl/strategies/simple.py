"""Frontier strategies: which queued link is fetched next.

Scrapy-free. Every strategy derives from :class:`~topiccrawl.strategies.base.FrontierBase` (the
:class:`~topiccrawl.strategies.base.Frontier` hooks) and is registered in
:data:`topiccrawl.strategies.base.STRATEGIES`; :class:`topiccrawl.crawl.scheduler.TopicScheduler`
only translates Scrapy requests to :class:`Link` objects and back. The payload of a link (a Scrapy
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
``oracle-path``
    Also knows the offline web's whole link graph: truly relevant targets first, then the targets
    fewest links away from a relevant page not fetched yet, then R(l), then insertion order. Where
    the ``oracle`` falls back to best-first between relevant pages, this one walks the shortest
    path to the next: the stronger bound in benchmarks (docs/benchmarks.md, "A stronger oracle").
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable

from topiccrawl.strategies.base import Frontier, FrontierBase, FrontierError, Link, make_frontier

__all__ = ["BFSFrontier", "BestFirstFrontier", "Frontier", "FrontierError", "Link", "OracleFrontier",
           "PathOracleFrontier", "make_bestfirst", "make_bfs", "make_frontier", "make_oracle", "make_oracle_path"]


class _Base(FrontierBase):
    """Insertion numbers and ``state``/``load_state`` from the queued links (``_links``)."""

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

    def peek(self) -> tuple[float, Link] | None:
        return (max(self._heap[0].score, 0.0), self._heap[0]) if self._heap else None

    def value(self, link: Link) -> float | None:
        return max(link.score, 0.0)

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

    def peek(self) -> tuple[float, Link] | None:
        """Value 1 for a truly relevant target, 0 otherwise (R(l) only breaks ties)."""
        return (0.0 if self._heap[0][0] else 1.0, self._heap[0][1]) if self._heap else None

    def value(self, link: Link) -> float | None:
        return 1.0 if self._is_relevant(link.url) else 0.0

    def __len__(self) -> int:
        return len(self._heap)

    def _links(self) -> list[Link]:
        return [entry[1] for entry in self._heap]


class PathOracleFrontier(_Base):
    """Fewest links to a truly relevant page not fetched yet first (ground truth and the whole link
    graph: :class:`~topiccrawl.scoring.groundtruth.TruthPaths`), then best-first. The hops are
    recomputed every :attr:`REFRESH_EVERY` pops and the queue re-ordered. Benchmarks only."""

    name = "oracle-path"
    #: pops between two recomputations of the hops (a popped page stops being a page to reach)
    REFRESH_EVERY = 25

    def __init__(self, paths) -> None:
        super().__init__()
        self._paths = paths
        self._heap: list[tuple] = []
        self._popped: list[str] = []  # the pages no longer to reach (their number: the pops)

    def push(self, link: Link) -> None:
        self._stamp(link)
        heapq.heappush(self._heap, (self._paths.hops(link.url), link))

    def pop(self) -> Link | None:
        if not self._heap:
            return None
        if self._popped and len(self._popped) % self.REFRESH_EVERY == 0:
            self._paths.refresh()
            self._heap = [(self._paths.hops(link.url), link) for _, link in self._heap]
            heapq.heapify(self._heap)
        link = heapq.heappop(self._heap)[1]
        self._paths.fetched(link.url)
        self._popped.append(link.url)
        return link

    def state(self) -> dict:
        return {**super().state(), "popped": list(self._popped)}

    def load_state(self, state: dict) -> None:
        for url in state.get("popped", ()):
            self._paths.fetched(url)
        self._popped = list(state.get("popped", ()))
        self._paths.refresh()
        super().load_state(state)

    def peek(self) -> tuple[float, Link] | None:
        """Value 1 / (1 + hops): 1 for a truly relevant target, 0 for one that leads to none."""
        return (self._value(self._heap[0][0]), self._heap[0][1]) if self._heap else None

    def value(self, link: Link) -> float | None:
        return self._value(self._paths.hops(link.url))

    @staticmethod
    def _value(hops: float) -> float:
        return 1.0 / (1.0 + hops)

    def stats(self) -> dict:
        return {"oracle_path/refreshes": self._paths.refreshes}

    def __len__(self) -> int:
        return len(self._heap)

    def _links(self) -> list[Link]:
        return [entry[1] for entry in self._heap]


def make_bfs(options: None = None, is_relevant: Callable[[str], bool] | None = None) -> BFSFrontier:
    """Factory of ``bfs`` (no options)."""
    return BFSFrontier()


def make_bestfirst(options: None = None, is_relevant: Callable[[str], bool] | None = None) -> BestFirstFrontier:
    """Factory of ``bestfirst`` (no options)."""
    return BestFirstFrontier()


def make_oracle(options: None = None, is_relevant: Callable[[str], bool] | None = None) -> OracleFrontier:
    """Factory of ``oracle`` (no options); ``is_relevant`` is the ground truth of link targets."""
    if is_relevant is None:
        raise FrontierError("strategy 'oracle' needs ground truth: the relevance labels of the link targets")
    return OracleFrontier(is_relevant)


def make_oracle_path(options: None = None, is_relevant: Callable[[str], bool] | None = None,
                     paths=None) -> PathOracleFrontier:
    """Factory of ``oracle-path`` (no options); ``paths``: the offline web's
    :class:`~topiccrawl.scoring.groundtruth.TruthPaths`."""
    if paths is None:
        raise FrontierError("strategy 'oracle-path' needs an offline web's link graph and ground truth "
                            "(TOPICCRAWL_WEB and a topic with evaluation labels)")
    return PathOracleFrontier(paths)
