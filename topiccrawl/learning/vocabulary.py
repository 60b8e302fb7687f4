"""Terms as integer ids, looked up once per page for the page classifier and the anchor association.

A crawl reads each fetched page's distinct terms into both the page classifier (hashed columns,
:mod:`topiccrawl.learning.classifier`) and the anchor association (counts per term,
:mod:`topiccrawl.learning.association`). Looking a term up in a large dictionary costs a few cache
misses, so one :class:`Vocabulary` gives each term an id once and both read arrays indexed by it
(docs/learned.md, "One vocabulary for a page's terms"). Pure (no Scrapy).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import numpy as np
from sklearn.utils import murmurhash3_32


def hashed_column(term: str, n_features: int) -> int:
    """``HashingVectorizer``'s column of a term: |signed murmur3 of its UTF-8| mod ``n_features``."""
    return abs(murmurhash3_32(term, seed=0)) % n_features


def merge_columns(columns: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted columns and their summed counts (terms that hash to one column add up)."""
    order = np.argsort(columns, kind="stable")
    columns, counts = columns[order], counts[order]
    if len(columns) > 1 and not (columns[1:] != columns[:-1]).all():
        columns, start = np.unique(columns, return_index=True)
        counts = np.add.reduceat(counts, start)
    return columns, counts


class Vocabulary:
    """Term -> id (0, 1, 2, ... in the order first seen), at most ``max_terms`` of them (a term
    first seen after that has no id, −1), and per id its hashed column for each ``n_features``
    asked for."""

    def __init__(self, max_terms: int = 1_000_000) -> None:
        self.max_terms = max_terms
        self.index: dict[str, int] = {}
        self._columns: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.index)

    def ids(self, distinct: Sequence[str]) -> np.ndarray:
        """The ids of ``distinct`` terms (one dictionary look-up each), adding the new ones while
        there is room; −1 for a term that finds the vocabulary full."""
        index = self.index
        at = np.fromiter(map(index.get, distinct, repeat(-1)), dtype=np.int64, count=len(distinct))
        for i in np.flatnonzero(at < 0).tolist():
            term = distinct[i]
            j = index.get(term)  # a repeat of a term added just before
            if j is None and len(index) < self.max_terms:
                j = index[term] = len(index)
            at[i] = -1 if j is None else j
        return at

    def columns(self, ids: np.ndarray, distinct: Sequence[str], n_features: int) -> np.ndarray:
        """The hashed columns of ``distinct`` terms whose ids are ``ids`` (from :meth:`ids`)."""
        table = self._columns.get(n_features)
        size = len(self.index)
        if table is None or len(table) < size:
            grown = np.full(max(size, 2 * len(table) if table is not None else 1024), -1, dtype=np.int64)
            if table is not None:
                grown[:len(table)] = table
            table = self._columns[n_features] = grown
        cols = table[ids]
        cols[ids < 0] = -1
        for i in np.flatnonzero(cols < 0).tolist():
            col = cols[i] = hashed_column(distinct[i], n_features)
            if ids[i] >= 0:
                table[ids[i]] = col
        return cols
