"""Page importance: PageRank over the crawl's link graph, in the WL paper's unnormalised form.

    PR(u) = (1 − d) + d · ( Σ_{v → u} PR(v) / |C_v|  +  Σ_{w dangling} PR(w) / n )

with d = 0.85, C_v the outlinks of v and n the number of nodes. The first two terms are the
paper's formula; the last spreads the rank of dangling nodes (pages not downloaded yet, or
without outlinks) evenly over all nodes, as networkx does. Without it rank leaks away through
the frontier; with it Σ PR = n, so the mean is exactly 1, PR = n · networkx.pagerank, and the
paper's "potential value" test PR >= 2 means "twice the average importance".

Nodes are integer ids; edges live in two int64 arrays and the iteration is a scipy sparse
matrix–vector product (about a second per refresh at 10^6 nodes, docs/scoring.md). Scrapy-free.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping

import numpy as np
from scipy import sparse

#: default convergence tolerance: mean absolute change per node, on the mean-1 scale
TOL = 1e-6


class LinkGraph:
    """The directed link graph of a crawl, grown one downloaded page at a time.

    Nodes are downloaded pages and every URL they link to. Self-links and repeated links are
    dropped; the outlinks of a page are recorded once (a second :meth:`add_page` for the same
    URL is ignored).
    """

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._urls: list[str] = []
        self._src = array("q")
        self._dst = array("q")
        self._pages: set[int] = set()
        self._matrix: tuple[int, sparse.csr_matrix, np.ndarray] | None = None

    def _node(self, url: str) -> int:
        node = self._index.get(url)
        if node is None:
            node = self._index[url] = len(self._urls)
            self._urls.append(url)
        return node

    def add_page(self, url: str, outlinks: Iterable[str]) -> None:
        """Add a downloaded page and its outlinks (absolute URLs)."""
        page = self._node(url)
        if page in self._pages:
            return
        self._pages.add(page)
        targets = dict.fromkeys(self._node(link) for link in outlinks)
        targets.pop(page, None)
        self._src.extend([page] * len(targets))
        self._dst.extend(targets)

    def __len__(self) -> int:
        return len(self._urls)

    @property
    def n_pages(self) -> int:
        """Downloaded pages (calls of :meth:`add_page` with a new URL)."""
        return len(self._pages)

    @property
    def n_edges(self) -> int:
        return len(self._src)

    def index(self, url: str) -> int | None:
        """Node id of ``url`` (position in :meth:`pagerank_array`), or None if unknown."""
        return self._index.get(url)

    def _transition(self) -> tuple[sparse.csr_matrix, np.ndarray]:
        """Column-stochastic matrix M[u, v] = 1/|C_v| for v → u, and the dangling-node mask."""
        n, m = len(self._urls), len(self._src)
        if self._matrix is None or self._matrix[0] != (n, m):
            src = np.frombuffer(self._src, dtype=np.int64)
            dst = np.frombuffer(self._dst, dtype=np.int64)
            outdeg = np.bincount(src, minlength=n)
            matrix = sparse.csr_matrix((1.0 / outdeg[src], (dst, src)), shape=(n, n))
            self._matrix = ((n, m), matrix, outdeg == 0)
        return self._matrix[1], self._matrix[2]

    def pagerank_array(self, d: float = 0.85, tol: float | None = None, max_iter: int = 100,
                       start: np.ndarray | None = None) -> np.ndarray:
        """PageRank of every node by id (mean 1), by power iteration.

        Stops when the mean absolute change per node is below ``tol`` (default :data:`TOL`),
        i.e. the L1 change is below n·tol, or after ``max_iter`` iterations (then the last
        iterate is returned). ``start`` (e.g. the previous result; shorter arrays are padded
        with 1.0) speeds up refreshes.
        """
        n = len(self._urls)
        if not n:
            return np.zeros(0)
        if not 0.0 <= d < 1.0:
            raise ValueError(f"damping factor d must be in [0, 1), got {d!r}")
        matrix, dangling = self._transition()
        x = np.ones(n)
        if start is not None:
            x[: min(n, len(start))] = start[:n]
        limit = n * (TOL if tol is None else tol)
        for _ in range(max_iter):
            new = d * (matrix @ x) + (d * x[dangling].sum() / n + (1.0 - d))
            err = np.abs(new - x).sum()
            x = new
            if err < limit:
                break
        return x

    def pagerank(self, d: float = 0.85, tol: float | None = None,
                 max_iter: int = 100) -> dict[str, float]:
        """PageRank as ``{url: PR}``, mean 1 (see :meth:`pagerank_array`)."""
        return dict(zip(self._urls, self.pagerank_array(d, tol, max_iter).tolist()))

    def state(self) -> dict:
        return {"urls": list(self._urls), "src": array("q", self._src),
                "dst": array("q", self._dst), "pages": sorted(self._pages)}

    @classmethod
    def from_state(cls, state: Mapping) -> LinkGraph:
        new = cls()
        new._urls = list(state["urls"])
        new._index = {url: i for i, url in enumerate(new._urls)}
        new._src = array("q", state["src"])
        new._dst = array("q", state["dst"])
        new._pages = set(state["pages"])
        return new


class PageRankCache:
    """PageRank of a growing graph, recomputed every ``every`` downloaded pages (not per page)."""

    def __init__(self, graph: LinkGraph, every: int = 500, d: float = 0.85):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every!r}")
        self.graph = graph
        self.every = every
        self.d = d
        self._scores = np.zeros(0)
        self._pages_at_refresh: int | None = None

    def maybe_refresh(self) -> bool:
        """Recompute if ``every`` pages were added since the last time (or never computed)."""
        last = self._pages_at_refresh
        if last is not None and self.graph.n_pages - last < self.every:
            return False
        if not len(self.graph):
            return False
        self.refresh()
        return True

    def refresh(self) -> None:
        """Recompute now, starting from the previous scores."""
        self._scores = self.graph.pagerank_array(self.d, start=self._scores)
        self._pages_at_refresh = self.graph.n_pages

    def score(self, url: str) -> float:
        """PR of ``url`` at the last refresh; 1.0 (the mean) for URLs unknown then."""
        node = self.graph.index(url)
        return float(self._scores[node]) if node is not None and node < len(self._scores) else 1.0

    def potential(self, url: str, threshold: float = 2.0) -> bool:
        """The WL paper's "potential value" test: PR >= ``threshold`` (2 = twice the mean)."""
        return self.score(url) >= threshold

    def state(self) -> dict:
        return {"every": self.every, "d": self.d, "scores": self._scores.copy(),
                "pages_at_refresh": self._pages_at_refresh}

    @classmethod
    def from_state(cls, state: Mapping, graph: LinkGraph) -> PageRankCache:
        """The cache as saved, over ``graph`` (restored separately), so a resumed crawl refreshes
        at the same pages as an uninterrupted one."""
        new = cls(graph, state["every"], state["d"])
        new._scores = np.asarray(state["scores"], dtype=float)
        new._pages_at_refresh = state["pages_at_refresh"]
        return new
