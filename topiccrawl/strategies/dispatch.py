"""Harvest-aware dispatch: when to hand out the next queued link. Scrapy-free.

With many requests in flight a scheduler that answers every "next request?" at once fetches
whatever is queued, however weak, while the pages in flight may be about to bring much better
links (docs/dispatch.md). :class:`PatientDispatch` holds the queue head back while it is clearly
worse than what the pages in flight can be expected to bring, for a bounded time.

Values are the strategy's own ranking values (higher = fetched earlier; ``Frontier.peek`` and
``Frontier.value``), assumed ≥ 0: R(l) for ``bestfirst``, 1/0 (truly relevant target or not) for
``oracle``, the learned link value for ``learned``. What a page in flight "can be expected to
bring" is learned from the crawl itself: for every page done, the value of the page's own link and
the best value among the links it queued. A page in flight of value v is judged by its bin, the
``neighbours`` recent pages with the lowest values ≥ v (a window of the last ``window`` pages, so it
follows a strategy whose scale changes, as ``learned``'s does at its first fit; never values below
v, which would let weak pages speak for strong ones): p_i = the share of the bin whose best child
value exceeded the bar h / ``margin``, for a queue head of value h. With fewer than ``min_samples``
pages in the bin, p_i = 1 if v > the bar, else 0 ("as good as its own link"). A page without a
value (a seed: nothing queued is known to be better than what it brings) has p_i = 1.

Rule: hand out the queue head unless the pages in flight (in the head's download slot with
``scope="slot"``), handed out less than ``max_wait`` seconds ago, are likely enough to bring a
better link. Otherwise hold — return nothing — until such a page is done (the caller asks again)
or ``max_wait`` seconds after it was handed out: the longest the crawl waits for any one page.
"Likely enough" depends on ``rule``:

* ``"any"``: 1 − Π_i (1 − p_i) ≥ ``p`` (pages taken as independent): some page in flight is
  likely enough to bring a better link, although none alone may be;
* ``"probability"``: p_i ≥ ``p`` for some page i;
* ``"median"``: the median best child value of some page's bin exceeds the bar (about
  ``"probability"`` with ``p`` = 0.5).
"""

from __future__ import annotations

import bisect
import statistics
from collections import deque
from dataclasses import dataclass


@dataclass
class DispatchStats:
    """Holds (episodes), their total seconds, and pages in flight given up after ``max_wait``."""

    holds: int = 0
    held_seconds: float = 0.0
    timeouts: int = 0
    released: int = 0  # decisions that handed out a link (held or not)

    def as_dict(self) -> dict:
        return {"dispatch/holds": self.holds, "dispatch/held_seconds": round(self.held_seconds, 3),
                "dispatch/hold_timeouts": self.timeouts}


class PatientDispatch:
    """The patient dispatch rule (module docstring). Keys are URLs of requests handed out.

    ``margin``: hand out the head when its value ≥ margin × the expected best child of the best
    page in flight (0 = never hold); ``max_wait``: longest hold, seconds; ``scope``: ``"crawl"``
    (every page in flight counts) or ``"slot"`` (only pages in flight in the head's download slot,
    so other hosts keep their concurrency); ``rule``: ``"any"``, ``"probability"`` or ``"median"``
    and ``p``, the threshold of the first two, in (0, 1] (module docstring); ``window``, ``neighbours``,
    ``min_samples``: the expectation's recent pages, how many nearest ones it uses, and the
    cold-start count.
    """

    RULES = ("median", "probability", "any")

    def __init__(self, margin: float = 1.0, max_wait: float = 1.0, scope: str = "crawl", *,
                 rule: str = "any", p: float = 0.95,
                 window: int = 256, neighbours: int = 16, min_samples: int = 8) -> None:
        if scope not in ("crawl", "slot"):
            raise ValueError(f"scope must be 'crawl' or 'slot', not {scope!r}")
        if rule not in self.RULES:
            raise ValueError(f"rule must be 'median', 'probability' or 'any', not {rule!r}")
        if not 0.0 < p <= 1.0:
            raise ValueError(f"p must lie in (0, 1], not {p!r}")
        self.rule, self.p = rule, float(p)
        self.margin, self.max_wait, self.scope = float(margin), float(max_wait), scope
        self.window, self.neighbours, self.min_samples = int(window), int(neighbours), int(min_samples)
        #: key -> (value or None, slot, time handed out) of a page in flight that may be waited for
        self.inflight: dict[str, tuple[float | None, str, float]] = {}
        self._gave_up: set[str] = set()
        self._best_child: dict[str, float] = {}
        self._recent: deque[tuple[float, float]] = deque()  # (value, best child) in arrival order
        self._values: list[float] = []  # sorted values of _recent
        self._children: list[float] = []  # best child values, aligned with _values
        self._hold_since: float | None = None
        self._until: float | None = None
        self.stats = DispatchStats()

    # -- what happens to requests ---------------------------------------------------------------
    def started(self, key: str, value: float | None, slot: str = "", now: float = 0.0) -> None:
        """A request was handed out at ``now``; ``value`` None: a seed, expected to bring more
        than anything queued."""
        self.inflight[key] = (None if value is None else float(value), slot, now)

    def child(self, parent: str | None, value: float | None) -> None:
        """A link of page ``parent`` was queued with ``value``."""
        if parent is not None and value is not None and parent in self.inflight:
            best = self._best_child.get(parent)
            if best is None or value > best:
                self._best_child[parent] = float(value)

    def finished(self, key: str) -> None:
        """The page of ``key`` is done (its links are queued) or failed: learn what it brought."""
        entry = self.inflight.pop(key, None)
        self._gave_up.discard(key)
        best = self._best_child.pop(key, 0.0)
        if entry is not None and entry[0] is not None:
            self._learn(entry[0], best)

    def _learn(self, value: float, best_child: float) -> None:
        self._recent.append((value, best_child))
        i = bisect.bisect_right(self._values, value)
        self._values.insert(i, value)
        self._children.insert(i, best_child)
        if len(self._recent) > self.window:
            old_value, old_child = self._recent.popleft()
            lo = bisect.bisect_left(self._values, old_value)
            hi = bisect.bisect_right(self._values, old_value)
            j = self._children.index(old_child, lo, hi)
            del self._values[j], self._children[j]

    def expected(self, value: float | None) -> float:
        """What a page of ``value`` is expected to bring: the median best child value of the recent
        pages with the lowest values ≥ ``value`` (so a hold means "more likely than not, a better
        link is coming"); ``value`` itself with too few of them; infinite for None (a seed)."""
        if value is None:
            return float("inf")
        i = bisect.bisect_left(self._values, value)
        chunk = self._children[i:i + self.neighbours]
        if len(chunk) < self.min_samples:
            return value
        return statistics.median(chunk)

    def p_better(self, value: float | None, bar: float) -> float:
        """Empirical probability that a page of ``value`` brings a link of value > ``bar``: the share
        of the recent pages with the lowest values ≥ ``value`` whose best child beat ``bar``; with
        too few of them 1 or 0 (``value`` > ``bar`` or not); 1 for None (a seed)."""
        if value is None:
            return 1.0
        i = bisect.bisect_left(self._values, value)
        chunk = self._children[i:i + self.neighbours]
        if len(chunk) < self.min_samples:
            return 1.0 if value > bar else 0.0
        return sum(c > bar for c in chunk) / len(chunk)

    def waits_for(self, value: float | None, bar: float) -> bool:
        """Whether a page in flight of ``value`` can hold back a head whose value is ``bar`` × margin."""
        if self.rule == "probability":
            return self.p_better(value, bar) >= self.p
        return self.expected(value) > bar

    # -- the decision ----------------------------------------------------------------------------
    def decide(self, head_value: float | None, head_slot: str, now: float) -> bool:
        """True: hand out the head now; False: hold it (ask again when a page is done, or after
        :meth:`wait_left` seconds)."""
        if head_value is None or self.margin <= 0:
            return self._release(now)
        bar = head_value / self.margin
        self._until = None
        joint = self.rule == "any"
        none_better = 1.0  # "any": P(no page in flight brings a link better than the bar)
        for key, (value, slot, since) in self.inflight.items():
            if self.scope == "slot" and slot != head_slot:
                continue
            if joint:
                p_i = self.p_better(value, bar)
                if p_i <= 0.0:
                    continue
            elif not self.waits_for(value, bar):
                continue
            if now - since >= self.max_wait:  # waited long enough for this one
                if key not in self._gave_up:
                    self._gave_up.add(key)
                    self.stats.timeouts += 1
                continue
            if joint:
                none_better *= 1.0 - p_i
            until = since + self.max_wait
            self._until = until if self._until is None else min(self._until, until)
        if joint and 1.0 - none_better < self.p:
            self._until = None
        if self._until is None:
            return self._release(now)
        if self._hold_since is None:
            self._hold_since = now
            self.stats.holds += 1
        return False

    def wait_left(self, now: float) -> float:
        """Seconds until the current hold ends at the latest (0 when nothing is held)."""
        if self._hold_since is None or self._until is None:
            return 0.0
        return max(0.0, self._until - now)

    @property
    def holding(self) -> bool:
        return self._hold_since is not None

    def _release(self, now: float) -> bool:
        if self._hold_since is not None:
            self.stats.held_seconds += now - self._hold_since
            self._hold_since = None
        self.stats.released += 1
        return True
