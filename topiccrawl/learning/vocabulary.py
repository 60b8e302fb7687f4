"""Terms as integer ids, looked up once per page for the page classifier and the anchor association.

A crawl reads each fetched page's distinct terms into both the page classifier (hashed columns,
:mod:`topiccrawl.learning.classifier`) and the anchor association (counts per term,
:mod:`topiccrawl.learning.association`). Looking a term up in a large dictionary costs a few cache
misses, so one :class:`Vocabulary` gives each term an id once and both read arrays indexed by it
(docs/learned.md, "One vocabulary for a page's terms"). Pure (no Scrapy).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.utils import murmurhash3_32


def hashed_column(term: str, n_features: int) -> int:
    """scikit-learn's column of a term (``HashingVectorizer``, ``FeatureHasher``, both without
    alternating signs): |signed murmur3 of its UTF-8, seed 0| mod ``n_features``, as their hashing
    computes it for −2³¹ too."""
    h = murmurhash3_32(term, seed=0)
    return (2147483647 - (n_features - 1)) % n_features if h == -2147483648 else abs(h) % n_features


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
    asked for.

    :attr:`index` (a dictionary) holds the terms. A page's terms are looked up in a table of their
    Python hashes instead (open addressing, linear probing, at most half full; numpy arrays): the
    hashes are in the strings already (counting a page's terms computed them) and the probes are
    vectorised, where a dictionary look-up per term waits on its cache misses one after the other.
    Two terms whose 64-bit hashes are equal would share an id (docs/learned.md, "One vocabulary for
    a page's terms"). Python salts string hashes per process, so the table is not pickled: it is
    rebuilt from :attr:`index` when first needed, and after :attr:`index` is changed directly.
    """

    def __init__(self, max_terms: int = 1_000_000) -> None:
        self.max_terms = max_terms
        self.index: dict[str, int] = {}
        self._columns: dict[int, np.ndarray] = {}
        self._drop_table()

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in ("_keys", "_slots", "_tabled"):
            del state[name]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._drop_table()

    def _drop_table(self) -> None:
        self._new_table(0)
        self._tabled = 0  # ids 0 .. _tabled − 1 are in the table

    def _new_table(self, capacity: int) -> None:
        """An empty table: per slot a term hash and an id (−1: empty), side by side in memory so
        that a probe reads one cache line."""
        table = np.zeros((capacity, 2), dtype=np.int64)
        table[:, 1] = -1
        self._keys, self._slots = table[:, 0], table[:, 1]

    def _sync(self, room: int = 0) -> None:
        """The table holding every id of :attr:`index`, with room for ``room`` more at most half full."""
        size = len(self.index)
        if size < self._tabled:  # index was replaced or cleared directly
            self._drop_table()
        if not len(self._slots) or 2 * (size + room) > len(self._slots):  # grow: held hashes move to a larger table
            held = self._slots >= 0
            hashes, ids = self._keys[held], self._slots[held]
            self._new_table(max(1024, 1 << (2 * (size + room) - 1).bit_length()))
            self._place(hashes, ids)
        if self._tabled < size:  # terms put in index directly
            terms = list(self.index)[self._tabled:]
            self._place(np.fromiter(map(hash, terms), dtype=np.int64, count=len(terms)),
                        np.arange(self._tabled, size, dtype=np.int64))
            self._tabled = size

    def _place(self, hashes: np.ndarray, ids: np.ndarray) -> None:
        """Put ``ids`` in the table at their hashes' first free slots (vectorised, in rounds: of the
        ids wanting one free slot, one takes it and the others move on one slot)."""
        keys, slots, mask = self._keys, self._slots, len(self._slots) - 1
        pos = hashes & mask
        while len(ids):
            free = slots[pos] < 0
            slots[pos[free]] = ids[free]  # contested slots: one of the writes stays
            placed = free & (slots[pos] == ids)
            keys[pos[placed]] = hashes[placed]
            moving = ~placed
            hashes, ids, pos = hashes[moving], ids[moving], (pos[moving] + 1) & mask

    def _probe(self, hashes: np.ndarray) -> np.ndarray:
        """The ids of terms with these hashes, −1 where none is in the table."""
        keys, slots, mask = self._keys, self._slots, len(self._slots) - 1
        pos = hashes & mask
        found = slots[pos]
        on = np.flatnonzero((found >= 0) & (keys[pos] != hashes))  # slot held by another term: probe on
        while len(on):
            at = pos[on] = (pos[on] + 1) & mask
            found[on] = slot = slots[at]
            on = on[(slot >= 0) & (keys[at] != hashes[on])]
        return found

    def lookup(self, terms: Sequence[str]) -> np.ndarray:
        """The ids of ``terms`` (−1 for a term without one); adds nothing."""
        self._sync()
        return self._probe(np.fromiter(map(hash, terms), dtype=np.int64, count=len(terms)))

    def ids(self, distinct: Sequence[str]) -> np.ndarray:
        """The ids of ``distinct`` terms, adding the new ones while there is room (in the order
        given; a term given twice gets one id); −1 for a term that finds the vocabulary full."""
        index = self.index
        self._sync(room=min(len(distinct), max(self.max_terms - len(index), 0)))
        hashes = np.fromiter(map(hash, distinct), dtype=np.int64, count=len(distinct))
        at = self._probe(hashes)
        new = np.flatnonzero(at < 0)
        if len(new):
            unique, first, inverse = np.unique(hashes[new], return_index=True, return_inverse=True)
            added = np.argsort(first, kind="stable")[: max(self.max_terms - len(index), 0)]  # in order seen
            start = len(index)
            given = np.full(len(unique), -1, dtype=np.int64)
            given[added] = np.arange(start, start + len(added), dtype=np.int64)
            at[new] = given[inverse]
            index.update(zip([distinct[i] for i in new[first[added]].tolist()], range(start, start + len(added))))
            self._place(unique[added], given[added])
            self._tabled = len(index)
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
