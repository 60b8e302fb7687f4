"""Anchor words judged by the fetched pages that contain them (docs/learned.md, "Anchor words
judged by the pages that contain them").

For every term of the fetched pages' texts: n_t, the pages containing it, and s_t, the sum of their
relevance. A term's association is the smoothed mean a_t = (s_t + k·m) / (n_t + k), m the mean
relevance of the fetched pages; a link's shift is max_t a_t − m over its anchor terms (a term never
seen counts as m: no shift).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from topiccrawl.learning.vocabulary import Vocabulary
from topiccrawl.scoring.text import tokenize

#: the term a page an example page links to carries, and so does every link to it: the association
#: judges "linked from an example" like an anchor word (docs/learned.md, "The examples' out-links in
#: the association"); no text yields it (tokens hold no NUL)
EXAMPLE_LINK = "\x00linked-from-example"


def anchor_terms(text: str) -> tuple[str, ...]:
    """The terms of an anchor text that are looked up: its tokens of two or more characters."""
    return tuple(t for t in tokenize(text) if len(t) > 1)


def max_shifts(lengths: np.ndarray, counts: np.ndarray, sums: np.ndarray, mean: float,
               strength: float) -> np.ndarray:
    """max_t a_t − m per list of terms, a_t = (s_t + k·m) / (n_t + k): ``lengths`` the lists'
    sizes, ``counts`` and ``sums`` n_t and s_t of their terms one after the other (0 and 0 for a
    term never seen: a_t = m), ``mean`` m, ``strength`` k; 0 for an empty list."""
    out = np.zeros(len(lengths))
    if not len(counts):
        return out
    v = (sums + strength * mean) / (counts + strength) - mean
    v[counts == 0] = 0.0  # exactly (k·m / k need not round to m)
    some = lengths > 0
    starts = np.cumsum(lengths) - lengths
    out[some] = np.maximum.reduceat(v, starts[some])
    return out


class TermAssociation:
    """Term statistics of the fetched pages; ``strength`` is k, ``max_terms`` bounds the vocabulary
    (terms first seen after it is full are not counted: they count as m). A term is an id of a
    :class:`~topiccrawl.learning.vocabulary.Vocabulary` indexing two arrays (n_t, s_t), so a page's
    update is one vectorised look-up of its distinct terms plus two vectorised additions. The crawl
    shares :attr:`vocabulary` with the page classifier's hashing and hands :meth:`add_page` the
    page's ids, so the look-ups happen once per page for both."""

    def __init__(self, strength: float = 2.0, max_terms: int = 1_000_000) -> None:
        self.strength = strength
        self.max_terms = max_terms
        self.vocabulary = Vocabulary(max_terms)
        self._n = np.zeros(1024, dtype=np.int64)
        self._s = np.zeros(1024, dtype=np.float64)
        self.pages = 0
        self.total = 0.0

    @property
    def _index(self) -> dict[str, int]:
        return self.vocabulary.index

    def __len__(self) -> int:
        return len(self.vocabulary)

    @property
    def mean(self) -> float:
        """m: the mean relevance of the pages added (0 before the first)."""
        return self.total / self.pages if self.pages else 0.0

    def _grow(self) -> None:
        """Arrays as long as the vocabulary (which the page classifier's hashing may have grown)."""
        size = len(self.vocabulary)
        if size > len(self._n):
            grow = max(size, 2 * len(self._n)) - len(self._n)
            self._n = np.concatenate([self._n, np.zeros(grow, dtype=np.int64)])
            self._s = np.concatenate([self._s, np.zeros(grow, dtype=np.float64)])

    def add_page(self, terms: Iterable[str], relevance: float, ids: np.ndarray | None = None) -> None:
        """One fetched page: its terms (repeats count once) and its relevance; ``ids``, when given,
        are its distinct terms' ids in :attr:`vocabulary` (−1 for a term without one), and
        ``terms`` is not read."""
        if ids is None:
            ids = self.vocabulary.ids(list(dict.fromkeys(terms)))
        self._grow()
        at = ids[ids >= 0]  # the vocabulary is full: terms without an id are not counted
        self._n[at] += 1
        self._s[at] += relevance
        self.pages += 1
        self.total += relevance

    def value(self, term: str) -> float:
        """a_t (m for a term never seen)."""
        m = self.mean
        i = self._index.get(term)
        self._grow()
        return m if i is None else (float(self._s[i]) + self.strength * m) / (int(self._n[i]) + self.strength)

    def shift(self, terms: Sequence[str]) -> float:
        """max_t a_t − m over ``terms`` (0 for no terms or before the first page)."""
        if not terms or not self.pages:
            return 0.0
        m, k, index = self.total / self.pages, self.strength, self._index
        self._grow()
        best = None
        for term in terms:
            i = index.get(term)
            v = 0.0 if i is None else (self._s.item(i) + k * m) / (self._n.item(i) + k) - m
            if best is None or v > best:
                best = v
        return best

    def shifts(self, term_lists: Sequence[Sequence[str]]) -> np.ndarray:
        """:meth:`shift` of each of ``term_lists``, vectorised (one look-up per term)."""
        n = len(term_lists)
        if not n or not self.pages:
            return np.zeros(n)
        self._grow()
        flat = list(chain.from_iterable(term_lists))
        at = self.vocabulary.lookup(flat)
        known = at >= 0
        counts, sums = np.zeros(len(flat)), np.zeros(len(flat))
        counts[known], sums[known] = self._n[at[known]], self._s[at[known]]
        return max_shifts(np.fromiter(map(len, term_lists), dtype=np.int64, count=n), counts, sums,
                          self.total / self.pages, self.strength)

    def __getstate__(self) -> dict:
        self._grow()
        size = len(self._index)
        return {"strength": self.strength, "max_terms": self.max_terms, "pages": self.pages, "total": self.total,
                "terms": list(self._index), "n": self._n[:size].copy(), "s": self._s[:size].copy()}

    def __setstate__(self, state: dict) -> None:
        self.strength, self.max_terms = state["strength"], state["max_terms"]
        self.pages, self.total = state["pages"], state["total"]
        self.vocabulary = Vocabulary(self.max_terms)
        self.vocabulary.index.update((t, i) for i, t in enumerate(state["terms"]))
        self._n = np.asarray(state["n"], dtype=np.int64).copy()
        self._s = np.asarray(state["s"], dtype=np.float64).copy()
