"""The anchor association of ``learned`` on Redis: term statistics shared by every worker.

The memory :class:`~topiccrawl.learning.association.TermAssociation` keeps, per term of the fetched
pages' texts, n_t (pages holding it) and s_t (their summed relevance); here they are two Redis
HASHes under the crawl's prefix (``learned:terms:n``, ``learned:terms:s``) and two fields of the
``learned:state`` HASH (pages, summed relevance), updated by each worker for the pages it fetches
and read by all (``lua/learned_terms.lua``: counting a page and reading the terms its out-links
need is one round trip). Relevance is summed in integer millionths, so the sums do not depend on
the order in which workers add their pages. The shift of a list of anchor terms is the memory
formula (:func:`~topiccrawl.learning.association.max_shifts`). Redis memory grows with the
vocabulary (at most ``max_terms`` terms), not with the pages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from topiccrawl.learning.association import max_shifts
from topiccrawl.redis.connection import load_script

#: relevance is summed in these units (integers: exact and order-free)
UNIT = 1_000_000


class RedisTermAssociation:
    """Shared n_t, s_t of a crawl (module docstring); ``keys``: ``n``, ``s`` and ``state`` key
    names; ``strength`` k and ``max_terms`` as in memory."""

    def __init__(self, client, keys: dict[str, str], strength: float = 2.0, max_terms: int = 1_000_000) -> None:
        self.r = client
        self.keys = keys
        self.strength = strength
        self.max_terms = max_terms
        self._script = load_script(client, "learned_terms.lua")
        self._keys = [keys["n"], keys["s"], keys["state"]]

    def exchange(self, terms: Iterable[str] | None, relevance: float,
                 lookup: Iterable[str] = (), once: str = "") -> dict[str, float]:
        """Count a fetched page (its ``terms``, repeats once, and ``relevance``; ``terms`` None:
        count nothing; ``once``: a name of the page, counted only by the first call that gives it),
        then a_t − m of each ``lookup`` term: one script call."""
        page = sorted(set(terms)) if terms is not None else []
        want = list(dict.fromkeys(lookup))
        rel = round(min(max(relevance, 0.0), 1.0) * UNIT) if terms is not None else -1
        res = self._script(keys=self._keys, args=[self.max_terms, rel, f"once:{once}" if once else "", len(page),
                                                  *page, *want])
        return self._values(res, want)

    def _values(self, res: list, want: list[str]) -> dict[str, float]:
        pages, total = int(res[0]), int(res[1])
        if not pages or not want:
            return dict.fromkeys(want, 0.0)
        counts = np.asarray(res[2::2], dtype=np.float64)
        sums = np.asarray(res[3::2], dtype=np.float64) / UNIT
        v = max_shifts(np.ones(len(want), dtype=np.int64), counts, sums, total / UNIT / pages, self.strength)
        return dict(zip(want, v.tolist()))

    def shifts(self, term_lists: Sequence[Sequence[str]]) -> np.ndarray:
        """max_t a_t − m of each list of terms (0 for an empty one), from the shared statistics now."""
        values = self.exchange(None, 0.0, chain.from_iterable(term_lists))
        return np.fromiter((max((values[t] for t in terms), default=0.0) for terms in term_lists),
                           dtype=np.float64, count=len(term_lists))

    @property
    def pages(self) -> int:
        """Pages counted so far by all workers."""
        return int(self.r.hget(self.keys["state"], "assoc_pages") or 0)

    def __len__(self) -> int:
        return int(self.r.hlen(self.keys["n"]))
