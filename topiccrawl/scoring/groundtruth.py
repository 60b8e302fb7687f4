"""Ground-truth labels for evaluation: a labels file (``url<TAB>label,label…``) or a corpus.

The crawler's scorers never see these; only the statistics (true harvest rate, target recall) and
the ``oracle`` and ``oracle-path`` benchmark strategies read them (``oracle-path`` also reads the
offline web's whole link graph, :class:`TruthPaths`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra
from w3lib.url import canonicalize_url


class GroundTruthError(ValueError):
    """An unreadable labels file (one-line message)."""


def _key(url: str) -> str:
    return canonicalize_url(url, keep_fragments=False)


class GroundTruth:
    """``labels(url)`` plus the number of pages carrying any of a set of labels."""

    def __init__(self, lookup: Callable[[str], frozenset[str]], urls: Callable[[], object], source: str,
                 identity: Callable[[str], str] | None = None):
        self._lookup = lookup
        #: the page a URL serves (aliases share it): recall counts distinct pages
        self.identity = identity or _key
        self._urls = urls
        self.source = source
        self._totals: dict[frozenset[str], int] = {}

    def labels(self, url: str) -> frozenset[str]:
        return self._lookup(url)

    def is_relevant(self, url: str, relevant: frozenset[str]) -> bool:
        return bool(self._lookup(url) & relevant)

    def total_relevant(self, relevant: frozenset[str]) -> int:
        """How many pages of the corpus carry any of ``relevant`` (computed once per label set)."""
        if relevant not in self._totals:
            self._totals[relevant] = sum(1 for u in self._urls() if self._lookup(u) & relevant)
        return self._totals[relevant]

    def restricted(self, urls: Iterable[str], why: str) -> GroundTruth:
        """The same labels on the pages of ``urls`` only (by :attr:`identity`), none elsewhere: e.g.
        a topic tree's held-out pages, the only ones an evaluation of a node may count."""
        keep = {self.identity(u) for u in urls}
        lookup, identity = self._lookup, self.identity
        return GroundTruth(lambda u: lookup(u) if identity(u) in keep else frozenset(), self._urls,
                           f"{self.source}, {why}", identity)

    @classmethod
    def from_file(cls, path: str | Path) -> GroundTruth:
        path = Path(path)
        table: dict[str, frozenset[str]] = {}
        try:
            with path.open(encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    line = line.rstrip("\n")
                    if not line or line.startswith("#"):
                        continue
                    url, sep, labels = line.partition("\t")
                    if not sep:
                        raise GroundTruthError(f"{path}:{lineno}: expected 'url<TAB>label,label…'")
                    table[_key(url)] = frozenset(x for x in labels.split(",") if x)
        except OSError as exc:
            raise GroundTruthError(f"{path}: cannot read labels file ({exc.strerror})") from None
        return cls(lambda u: table.get(_key(u), frozenset()), lambda: iter(table), str(path))

    @classmethod
    def from_corpus(cls, corpus) -> GroundTruth:
        """Labels straight from an offline-web corpus (works for alias URLs too)."""
        return cls(corpus.labels, corpus.iter_urls, f"corpus {corpus.name}", corpus.canonical)


class TruthPaths:
    """Hops from each page of an offline web to the nearest truly relevant page not fetched yet.

    Built once from the web's pages (``urls``), their out-links (``links(url)``, absolute URLs),
    the page a URL serves (``identity``) and the ground truth (``is_relevant``). :meth:`hops`
    answers from the last :meth:`refresh`: a multi-source breadth-first search over the reversed
    link graph from every relevant page not yet :meth:`fetched`
    (``scipy.sparse.csgraph.dijkstra(..., unweighted=True, min_only=True)``). A URL outside the
    web, or one no relevant page can be reached from, is ``math.inf`` hops away.
    """

    def __init__(self, urls: Iterable[str], links: Callable[[str], Iterable[str]],
                 identity: Callable[[str], str], is_relevant: Callable[[str], bool]):
        self._identity = identity
        urls = list(urls)
        self._index = {identity(u): i for i, u in enumerate(urls)}
        sources, targets = [], []
        for i, url in enumerate(urls):
            for out in links(url):
                j = self._index.get(identity(out))
                if j is not None and j != i:
                    sources.append(i)
                    targets.append(j)
        n = len(urls)
        # reversed: an edge target -> source, so distances from the relevant pages are hops *to* them
        self._reversed = sp.csr_matrix((np.ones(len(sources)), (targets, sources)), shape=(n, n))
        self._relevant = {i for i, u in enumerate(urls) if is_relevant(u)}
        self._fetched: set[int] = set()
        self._hops = np.full(n, math.inf)
        self.refreshes = 0
        self.refresh()

    def __len__(self) -> int:
        return len(self._index)

    @property
    def edges(self) -> int:
        return int(self._reversed.nnz)

    def fetched(self, url: str) -> None:
        """``url`` is fetched (or on its way): no longer a page to reach, from the next refresh."""
        i = self._index.get(self._identity(url))
        if i is not None:
            self._fetched.add(i)

    def refresh(self) -> None:
        """Recompute the hops from the relevant pages not fetched yet."""
        sources = sorted(self._relevant - self._fetched)
        self.refreshes += 1
        if not sources:
            self._hops = np.full(len(self._index), math.inf)
            return
        self._hops = dijkstra(self._reversed, directed=True, indices=sources, unweighted=True, min_only=True)

    def hops(self, url: str) -> float:
        """Links to follow from ``url`` to a relevant page not yet fetched (0: ``url`` is one)."""
        i = self._index.get(self._identity(url))
        return math.inf if i is None else float(self._hops[i])
