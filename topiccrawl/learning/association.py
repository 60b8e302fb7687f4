"""Anchor words judged by the fetched pages that contain them (docs/learned.md, "Anchor words
judged by the pages that contain them").

For every term of the fetched pages' texts: n_t, the pages containing it, and s_t, the sum of their
relevance. A term's association is the smoothed mean a_t = (s_t + k·m) / (n_t + k), m the mean
relevance of the fetched pages; a link's shift is max_t a_t − m over its anchor terms (a term never
seen counts as m: no shift).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from topiccrawl.scoring.text import tokenize


def anchor_terms(text: str) -> tuple[str, ...]:
    """The terms of an anchor text that are looked up: its tokens of two or more characters."""
    return tuple(t for t in tokenize(text) if len(t) > 1)


class TermAssociation:
    """Term statistics of the fetched pages; ``strength`` is k, ``max_terms`` bounds the vocabulary
    (terms first seen after it is full are not counted: they count as m)."""

    def __init__(self, strength: float = 2.0, max_terms: int = 2_000_000) -> None:
        self.strength = strength
        self.max_terms = max_terms
        self._stats: dict[str, list] = {}  # term -> [n_t, s_t]
        self.pages = 0
        self.total = 0.0

    def __len__(self) -> int:
        return len(self._stats)

    @property
    def mean(self) -> float:
        """m: the mean relevance of the pages added (0 before the first)."""
        return self.total / self.pages if self.pages else 0.0

    def add_page(self, terms: Iterable[str], relevance: float) -> None:
        """One fetched page: its terms (repeats count once) and its relevance."""
        stats, room = self._stats, self.max_terms
        for term in set(terms):
            st = stats.get(term)
            if st is not None:
                st[0] += 1
                st[1] += relevance
            elif len(stats) < room:
                stats[term] = [1, relevance]
        self.pages += 1
        self.total += relevance

    def value(self, term: str) -> float:
        """a_t (m for a term never seen)."""
        m = self.mean
        st = self._stats.get(term)
        return m if st is None else (st[1] + self.strength * m) / (st[0] + self.strength)

    def shift(self, terms: Sequence[str]) -> float:
        """max_t a_t − m over ``terms`` (0 for no terms or before the first page)."""
        if not terms or not self.pages:
            return 0.0
        m, k, stats = self.total / self.pages, self.strength, self._stats
        best = None
        for term in terms:
            st = stats.get(term)
            v = 0.0 if st is None else (st[1] + k * m) / (st[0] + k) - m
            if best is None or v > best:
                best = v
        return best

    def __getstate__(self) -> dict:
        return {"strength": self.strength, "max_terms": self.max_terms, "pages": self.pages, "total": self.total,
                "terms": list(self._stats), "n": [st[0] for st in self._stats.values()],
                "s": [st[1] for st in self._stats.values()]}

    def __setstate__(self, state: dict) -> None:
        self.strength, self.max_terms = state["strength"], state["max_terms"]
        self.pages, self.total = state["pages"], state["total"]
        self._stats = {t: [n, s] for t, n, s in zip(state["terms"], state["n"], state["s"], strict=True)}
