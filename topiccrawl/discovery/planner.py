"""DWDBRM operator planning: the four discovery operators — keyword search (KS), related search
(RS), forward crawl (FC) and backward crawl (BC) — as request URLs tagged with their role
(:class:`PlannedRequest`), and the KS queries (:class:`KeywordQueries`). Method and defaults:
``docs/dwdbrm.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from topiccrawl.discovery.pages import OPERATORS, DiscoveredPage, DWDBRMError
from topiccrawl.discovery.search import SearchBackend, SearchResult
from topiccrawl.scoring.text import tokenize

# ---------------------------------------------------------------------------------------------
# operator planning


def description_terms(description: str, exclude: Iterable[str] = ()) -> list[str]:
    """Distinct terms of a domain description (``房地产 产品 物业 沈阳 售卖``), minus ``exclude``."""
    skip = set(exclude)
    return [t for t in dict.fromkeys(tokenize(description)) if t not in skip]


class KeywordQueries:
    """Keyword-search (KS) queries, never the same query twice.

    The first call gives the topic words, by decreasing weight, one per query. Later calls take
    the ``top_terms`` most frequent meta keywords and meta description terms of the current
    top-k pages (in most pages first, then first seen), each combined with every domain description
    term (``房地产 物业``); then the unused topic words; then topic word + description term.
    At most ``per_call`` queries per call.
    """

    def __init__(self, topic_words: Mapping[str, float] | Sequence[str],
                 description: Sequence[str] | str = (), per_call: int = 5, top_terms: int = 10):
        if isinstance(topic_words, Mapping):
            topic_words = sorted(topic_words, key=lambda w: -topic_words[w])
        self.topic_words = list(dict.fromkeys(topic_words))
        self.description = (description_terms(description) if isinstance(description, str)
                            else list(dict.fromkeys(description)))
        self.per_call = per_call
        self.top_terms = top_terms
        self.used: list[str] = []
        self._used: set[str] = set()

    def _combined(self, terms: Iterable[str]) -> Iterable[str]:
        for t in terms:
            if not self.description:
                yield t
            for d in self.description:
                if d != t:
                    yield f"{t} {d}"

    def _meta_terms(self, pages: Iterable[DiscoveredPage]) -> list[str]:
        """Meta keywords (whole entries, lower-cased) and description terms of the pages, by the
        number of pages they occur in."""
        counts: Counter[str] = Counter()
        for p in pages:
            keywords = [k.strip().lower() for k in p.keywords if k.strip()]
            counts.update(list(dict.fromkeys(keywords + tokenize(p.description))))
        skip = set(self.description)
        return [t for t, _ in counts.most_common() if t not in skip][:self.top_terms]

    def next(self, top_pages: Iterable[DiscoveredPage] = ()) -> list[str]:
        """The next queries (possibly none when all were used)."""
        if not self.used:
            candidates: Iterable[str] = self.topic_words
        else:
            candidates = (*self._combined(self._meta_terms(top_pages)), *self.topic_words,
                          *self._combined(self.topic_words))
        out = []
        for q in candidates:
            if q not in self._used and len(out) < self.per_call:
                out.append(q)
                self._used.add(q)
        self.used += out
        return out

    def state(self) -> dict:
        return {"used": list(self.used)}

    def restore(self, state: Mapping) -> None:
        self.used = list(state["used"])
        self._used = set(self.used)


#: roles of planned requests: a search-API URL (parse, then :meth:`DiscoveryPlanner.follow`),
#: a candidate page (fetch and rank), a backlink hub (fetch, then
#: :meth:`DiscoveryPlanner.expand_hub`)
ROLES = ("search", "page", "hub")


@dataclass(frozen=True)
class PlannedRequest:
    """A URL to request for ``operator``; ``source`` is the query of a search request, else the
    page or search request it came from."""

    url: str
    role: str
    operator: str
    source: str = ""


@dataclass
class DiscoveryPlanner:
    """Turns an operator and the current top-k pages into requests (Algorithm 3's operators).

    * KS: one search request per query of :class:`KeywordQueries` (``result_pages`` result pages
      each);
    * RS: ``related:URL`` and BC: ``link:URL`` for each top-k page; the backlink pages BC finds
      are hubs whose outlinks are forward-crawled (:meth:`expand_hub`);
    * FC: outlinks of the top-k pages, at most ``links_per_page`` per page and ``links_per_host``
      per target host per call.

    URLs in ``known`` (already fetched or queued) and search URLs already issued are skipped.
    """

    backend: SearchBackend
    queries: KeywordQueries
    result_pages: int = 1
    links_per_page: int = 20
    links_per_host: int = 10
    searched: set[str] = field(default_factory=set)

    def plan(self, operator: str, top_pages: Sequence[DiscoveredPage],
             known: Container[str] = ()) -> list[PlannedRequest]:
        if operator not in OPERATORS:
            raise DWDBRMError(f"unknown operator {operator!r} (known: {', '.join(OPERATORS)})")
        if operator == "FC":
            return self._forward(top_pages, "FC", known)
        if operator not in self.backend.capabilities:
            raise DWDBRMError(f"the {self.backend.name} search backend cannot serve {operator}")
        args = self.queries.next(top_pages) if operator == "KS" else [p.url for p in top_pages]
        out = []
        for arg in args:
            query = self.backend.query(operator, arg)
            for pageno in range(1, self.result_pages + 1):
                url = self.backend.search_url(query, pageno)
                if url not in self.searched:
                    self.searched.add(url)
                    out.append(PlannedRequest(url, "search", operator, query))
        return out

    def follow(self, request: PlannedRequest, results: Sequence[SearchResult],
               known: Container[str] = ()) -> list[PlannedRequest]:
        """Requests for the results of a search request: candidate pages (KS, RS) or hubs (BC)."""
        role = "hub" if request.operator == "BC" else "page"
        urls = dict.fromkeys(r.url for r in results if r.url not in known)
        return [PlannedRequest(u, role, request.operator, request.url) for u in urls]

    def expand_hub(self, hub: DiscoveredPage, known: Container[str] = ()) -> list[PlannedRequest]:
        """BC's second step: forward-crawl the outlinks of a fetched backlink hub."""
        return self._forward([hub], "BC", known)

    def _forward(self, pages: Sequence[DiscoveredPage], operator: str,
                 known: Container[str]) -> list[PlannedRequest]:
        per_host: Counter[str] = Counter()
        out: dict[str, PlannedRequest] = {}
        for page in pages:
            taken = 0
            for url in page.outlinks:
                if taken >= self.links_per_page:
                    break
                host = urlsplit(url).hostname
                if (url == page.url or url in out or url in known or not host
                        or urlsplit(url).scheme not in ("http", "https")
                        or per_host[host] >= self.links_per_host):
                    continue
                per_host[host] += 1
                taken += 1
                out[url] = PlannedRequest(url, "page", operator, page.url)
        return list(out.values())

    def state(self) -> dict:
        return {"queries": self.queries.state(), "searched": sorted(self.searched)}

    def restore(self, state: Mapping) -> None:
        self.queries.restore(state["queries"])
        self.searched = set(state["searched"])
