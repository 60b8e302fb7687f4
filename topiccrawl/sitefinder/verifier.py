"""Site finder verification: sites, AbstractURL and the minimum-cost verification of one site.

After Li, Zhou, Guo, Lin (Tsinghua), "Website crawling for specific topics".

* **AbstractURL** (:func:`abstract_url`) = [Path][File][names of the Query attributes]; the pages
  of a site with one AbstractURL form an equivalence class A_k = E_k (expanded) ∪ Q_k (queued).
* **Minimum-cost verification** (:class:`SiteVerifier`): expand one queued page of the class of
  highest H(A_k) = mean F over E_k (a prior for classes with nothing expanded yet); a page is good
  when F ≥ PageThreshold; the site is relevant once NumRelPages good pages are found, and judged
  irrelevant after NumExpPages expansions or when no page is left.
* **Entry pages** (:func:`entry_pages`): verification starts from the search hits that named the
  site, then its root and ``/sitemap.xml`` (:func:`sitemap_links`), all within NumExpPages.
* **Site-restricted queries** (an extension): ``site:HOST words`` asked of the search engine for
  the site (:func:`site_query_texts` picks the words); each request costs one page of NumExpPages,
  its hits are entry pages too, expanded before queued links of equal H(A_k).
* **Pages are identified by the URL the response landed on** (after redirects, canonicalised with
  ``w3lib.url.canonicalize_url``): a page reached under several URLs counts once per site.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html import unescape
from urllib.parse import parse_qsl, unquote, urljoin, urlsplit

from w3lib.url import canonicalize_url

# ---------------------------------------------------------------------------------------------
# Sites and AbstractURL

_DIGITS = re.compile(r"\d+")
_SITEMAP = re.compile(rb"<(?:[\w-]+:)?(?:urlset|sitemapindex)\b", re.I)
_LOC = re.compile(rb"<(?:[\w-]+:)?loc>\s*([^<]+?)\s*</(?:[\w-]+:)?loc>", re.I)
#: the path of a site's sitemap tried as an entry page (the sitemaps.org default location)
SITEMAP_PATH = "sitemap.xml"
#: at most this many URLs of one sitemap are queued
SITEMAP_LIMIT = 1000


def site_of(url: str) -> str:
    """The site of a URL: its host name, lower-case, without port or trailing dot ('' if none)."""
    try:
        return (urlsplit(url.strip()).hostname or "").rstrip(".")
    except ValueError:
        return ""


def entry_url(url: str) -> str:
    """The entry page of the site of ``url``: ``scheme://host[:port]/``."""
    parts = urlsplit(url.strip())
    port = f":{parts.port}" if parts.port and parts.port != {"http": 80, "https": 443}.get(parts.scheme) else ""
    return f"{parts.scheme or 'http'}://{site_of(url)}{port}/"


def abstract_url(url: str, digits: bool = False) -> str:
    """AbstractURL(p) = [Path][File][names of the Query attributes] (Li et al.).

    ``http://x.com/computers/result.asp?typeid=3`` -> ``/computers/result.asp?typeid``. Choices:
    scheme, host, port, values and the fragment are dropped; an empty path is ``/``; the path is
    percent-decoded (``/%E4%B8%AD`` = ``/中``), case kept; attribute names are decoded, de-duplicated
    and sorted (``?b=1&a=&a=2`` -> ``?a&b``); attributes with an empty name are ignored. With
    ``digits`` (an extension, off by default) every digit run of the path becomes ``*``, so
    ``/12345.html`` and ``/678.html`` share the class ``/*.html``.
    """
    parts = urlsplit(url.strip())
    path = unquote(parts.path) or "/"
    if digits:
        path = _DIGITS.sub("*", path)
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if name})
    return path + ("?" + "&".join(names) if names else "")


def canonical_url(url: str) -> str:
    """The identity of a page: ``w3lib.url.canonicalize_url`` without the fragment."""
    return canonicalize_url(url, keep_fragments=False)


_canonical = canonical_url


def entry_pages(root: str, hits: Iterable[str] = (), sitemap: bool = True) -> list[str]:
    """The pages a site's verification starts from, in this order: the search ``hits`` that named
    the site (those on the root's host, in the order found), the ``root`` page (what it links to
    follows from there), then ``/sitemap.xml``. Each page once (canonical URL)."""
    site = site_of(root)
    urls = [h for h in hits if site_of(h) == site] + [root]
    if sitemap:
        urls.append(urljoin(root, "/" + SITEMAP_PATH))
    seen: set[str] = set()
    out = []
    for url in urls:
        key = canonical_url(url)
        if key not in seen:
            seen.add(key)
            out.append(url)
    return out


def site_query_texts(found_by: Iterable[str], queries: Iterable[str], n: int) -> list[str]:
    """The words of a site's ``n`` site-restricted queries: the queries that found the site (in
    the order they did), then the other ``queries`` in their order; each once. Only texts among
    ``queries`` count (``found_by`` may name other sources, e.g. a URL the user gave)."""
    allowed = list(dict.fromkeys(q.strip() for q in queries if q.strip()))
    order = [q for q in found_by if q in allowed] + allowed
    return list(dict.fromkeys(order))[:max(n, 0)]


def sitemap_links(body: bytes, base: str) -> list[str] | None:
    """The ``<loc>`` URLs of a sitemaps.org sitemap or sitemap index (absolute, in file order, at
    most :data:`SITEMAP_LIMIT`); None when ``body`` is not a sitemap."""
    if not _SITEMAP.search(body[:4096]):
        return None
    out = []
    for m in _LOC.finditer(body):
        out.append(urljoin(base, unescape(m.group(1).decode("utf-8", "replace")).strip()))
        if len(out) >= SITEMAP_LIMIT:
            break
    return out


# ---------------------------------------------------------------------------------------------
# Minimum-cost verification of one site


@dataclass
class _Class:
    """An equivalence class A_k: the F of its expanded pages E_k and its queue Q_k."""

    key: str
    scores: list[float] = field(default_factory=list)
    queue: deque = field(default_factory=deque)  # (order, url, item)


class SiteVerifier:
    """Minimum-cost verification of one site (Li et al.): a pure state machine.

    ``add(url, item)`` files a page of the site into its class; ``next()`` picks the page to expand
    (the oldest queued page of the class with the highest H(A_k), ties: the class whose oldest
    queued page is oldest); ``record(url, F)`` reports its score and decides the verdict:

    * ``relevant`` as soon as ``num_rel_pages`` expanded pages have F ≥ ``page_threshold``;
    * ``irrelevant`` (reason ``budget``) after ``num_exp_pages`` expansions, or (reason
      ``exhausted``) when nothing is queued or in flight.

    H(A_k) = (1/|E_k|) Σ_{p ∈ E_k} F(p, R); a class with E_k empty has H = ``prior``. A failed
    fetch (HTTP error, non-HTML) is an expansion with F = 0. At most ``max_inflight`` pages are
    handed out before their scores come back (1 = the paper's strictly sequential algorithm).
    A page is the URL its response landed on (``record(..., final=URL)``, canonicalised): a fetch
    that lands on a page expanded before costs a fetch but is not scored again (note ``duplicate``).
    A site-restricted search request (:meth:`start_search`, :meth:`searched`) costs one page of
    the budget; its hits are announced and queued ahead of other pages (``priority``; a hit queued
    already as a link is moved ahead).
    """

    def __init__(self, site: str, *, page_threshold: float = 0.7, num_rel_pages: int = 3,
                 num_exp_pages: int = 50, prior: float = 0.5, digits: bool = False,
                 max_inflight: int = 1) -> None:
        self.site = site
        self.entry = f"http://{site}/"  # the entry page (ground truth is read there)
        self.page_threshold, self.num_rel_pages, self.num_exp_pages = page_threshold, num_rel_pages, num_exp_pages
        self.prior, self.digits, self.max_inflight = prior, digits, max_inflight
        self.classes: dict[str, _Class] = {}
        self.seen: set[str] = set()
        self.inflight: dict[str, str] = {}  # url -> class key
        self.announced: set[str] = set()  # links of expanded pages not pushed yet
        self.landed: set[str] = set()  # canonical URLs the expanded pages landed on
        self.hits: list[str] = []  # search hits that named the site (entry pages)
        self.expansions: list[dict] = []  # {"url", "score", "rules", "class"} in expansion order
        self.good: list[dict] = []
        self.queued = 0
        self.verdict: str | None = None
        self.reason = ""
        self.found_by: list[str] = []
        self.searches: list[dict] = []  # site-restricted search requests done: {"query", "hits"}
        self.searching: set[str] = set()  # their words, requested and not answered yet
        self.priority: set[str] = set()  # canonical URLs of their hits: queued ahead of links
        self._order = itertools.count()

    # -- queue ------------------------------------------------------------------------------------
    def add(self, url: str, item=None) -> bool:
        """File a page of this site into its class; False if decided or the page is known."""
        key = _canonical(url)
        if self.verdict is not None or key in self.seen:
            return False
        self.seen.add(key)
        self.announced.discard(key)
        cls = abstract_url(url, self.digits)
        queue = self.classes.setdefault(cls, _Class(cls)).queue
        order = next(self._order)
        if key in self.priority:  # ahead of every page queued without priority, FIFO among themselves
            order -= 1 << 40
            at = next((i for i, (o, _, _) in enumerate(queue) if o > order), len(queue))
            queue.insert(at, (order, url, item))
        else:
            queue.append((order, url, item))
        self.queued += 1
        return True

    def _promote(self, key: str) -> bool:
        """Move the queued page ``key`` ahead of the pages queued without priority."""
        for cls in self.classes.values():
            for i, (_, url, item) in enumerate(cls.queue):
                if _canonical(url) == key:
                    del cls.queue[i]
                    order = next(self._order) - (1 << 40)
                    at = next((j for j, (o, _, _) in enumerate(cls.queue) if o > order), len(cls.queue))
                    cls.queue.insert(at, (order, url, item))
                    return True
        return False

    def spent(self) -> int:
        """Fetches charged to the site: expanded pages and site-restricted search requests."""
        return len(self.expansions) + len(self.searches)

    def start_search(self, words: str) -> bool:
        """Reserve one page of the budget for the search request ``site:HOST words``; False when the
        site is decided, the same words were asked already, or the budget would not leave room for
        ``num_rel_pages`` pages after it."""
        room = self.num_exp_pages - self.spent() - len(self.inflight) - len(self.searching) - 1
        if (self.verdict is not None or words in self.searching or any(s["query"] == words for s in self.searches)
                or room < self.num_rel_pages):
            return False
        self.searching.add(words)
        return True

    def searched(self, words: str, hits: Iterable[str]) -> tuple[list[str], bool]:
        """The answer to :meth:`start_search` (``hits`` = [] for a failed request): (the hits of
        this site not seen before, announced and given priority, for the caller to ``add``;
        True when this answer decided the verdict)."""
        self.searching.discard(words)
        new = []
        for url in hits:
            key = _canonical(url)
            if site_of(url) != self.site or key in self.priority:
                continue
            if key not in self.seen:
                self.priority.add(key)
                new.append(url)
            elif self._promote(key):  # queued already (a link): moved ahead, not requested twice
                self.priority.add(key)
        self.searches.append({"query": words, "hits": len(new)})
        if self.verdict is not None:
            return [], False
        self.announced.update(map(_canonical, new))
        return new, self._check_end()

    def wants(self, url: str) -> bool:
        return self.verdict is None and _canonical(url) not in self.seen

    def h(self, cls: _Class) -> float:
        """H(A_k): mean F of the expanded pages of the class, or the prior if none."""
        return sum(cls.scores) / len(cls.scores) if cls.scores else self.prior

    def ready(self) -> bool:
        return (self.verdict is None and len(self.inflight) < self.max_inflight
                and self.spent() + len(self.inflight) + len(self.searching) < self.num_exp_pages)

    def next(self) -> tuple[str, object] | None:
        """The next page to expand as (url, item), or None (decided, busy or nothing queued)."""
        if not self.ready():
            return None
        best = max((c for c in self.classes.values() if c.queue),
                   key=lambda c: (self.h(c), -c.queue[0][0]), default=None)
        if best is None:
            return None
        _, url, item = best.queue.popleft()
        self.queued -= 1
        self.inflight[url] = best.key
        return url, item

    # -- results ----------------------------------------------------------------------------------
    def record(self, url: str, score: float, rules: Iterable[str] = (), note: str = "",
               links: Iterable[str] = (), final: str | None = None) -> bool:
        """Report F of an expanded page; True when this report decided the verdict.

        ``url`` is the page handed out, ``final`` the URL its response landed on after redirects
        (default ``url``): the page is recorded under ``final``, and a page that landed where an
        earlier one did is a ``duplicate`` (a fetch, not a second page: neither scored nor good).
        ``links`` announces same-site links that will be ``add``-ed later (a crawler queues them
        after the report): the site is not "exhausted" while announced links are on their way.
        Reports for pages that were not handed out (a resumed crawl) are accepted too."""
        cls = self.inflight.pop(url, None) or abstract_url(url, self.digits)
        landed = final or url
        key = _canonical(landed)
        self.seen.update((_canonical(url), key))
        self.announced.discard(key)
        self.announced.update(k for k in map(_canonical, links) if k not in self.seen)
        duplicate = key in self.landed
        self.landed.add(key)
        row = {"url": landed, "score": round(score, 6), "rules": list(rules), "class": cls}
        if key != _canonical(url):
            row["requested"] = url
        if note or duplicate:
            row["note"] = "; ".join(filter(None, [note, "duplicate" if duplicate else ""]))
        self.expansions.append(row)
        if self.verdict is not None:  # in flight when the site was decided: counted, not judged
            return False
        if duplicate:  # the same page again under another URL: a fetch, not a second page
            return self._check_end()
        self.classes.setdefault(cls, _Class(cls)).scores.append(score)
        if score >= self.page_threshold:
            self.good.append(row)
        if len(self.good) >= self.num_rel_pages:
            return self._decide("relevant", f"{len(self.good)} pages with F >= {self.page_threshold}")
        return self._check_end()

    def _check_end(self) -> bool:
        if self.spent() >= self.num_exp_pages:
            return self._decide("irrelevant", "budget")
        if not self.inflight and not self.queued and not self.announced and not self.searching:
            return self._decide("irrelevant", "exhausted")
        return False

    def _decide(self, verdict: str, reason: str) -> bool:
        self.verdict, self.reason = verdict, reason
        for cls in self.classes.values():
            cls.queue.clear()
        self.queued = 0
        self.announced.clear()
        return True

    def result(self) -> dict:
        """The site verdict: verdict, reason, good pages, pages fetched, evidence, queries."""
        # an undecided or irrelevant site: its good pages (the summary counts them from here) and its
        # best other pages up to three; a page reached under several URLs is one page
        good = {row["url"] for row in self.good}
        others: dict[str, dict] = {}
        for row in sorted(self.expansions, key=lambda r: -r["score"]):
            if row["url"] not in good:
                others.setdefault(row["url"], row)
        top = [*self.good, *others.values()][:max(3, len(self.good))]
        return {
            "site": self.site, "entry": self.entry, "verdict": self.verdict or "undecided", "reason": self.reason,
            "good_pages": len(self.good), "pages_fetched": self.spent(), "searches": len(self.searches),
            "classes": len(self.classes), "evidence": self.good if self.verdict == "relevant" else top,
            "queries": list(self.found_by),
        }

    # -- persistence --------------------------------------------------------------------------
    def state(self) -> dict:
        """Everything but the queued pages (re-added by the frontier on load)."""
        queued = {_canonical(u) for c in self.classes.values() for _, u, _ in c.queue}
        return {"site": self.site, "entry": self.entry, "seen": sorted(self.seen - queued),
                "landed": sorted(self.landed), "hits": self.hits,
                "scores": {k: c.scores for k, c in self.classes.items() if c.scores},
                "expansions": self.expansions, "good": self.good, "verdict": self.verdict,
                "reason": self.reason, "found_by": self.found_by, "searches": self.searches,
                "searching": sorted(self.searching), "priority": sorted(self.priority)}

    def load_state(self, state: dict) -> None:
        self.entry, self.seen = state["entry"], set(state["seen"])
        self.landed, self.hits = set(state.get("landed", ())), list(state.get("hits", ()))
        for key, scores in state["scores"].items():
            self.classes.setdefault(key, _Class(key)).scores = list(scores)
        self.expansions, self.good = state["expansions"], state["good"]
        self.verdict, self.reason, self.found_by = state["verdict"], state["reason"], state["found_by"]
        self.searches = list(state.get("searches", ()))
        self.searching, self.priority = set(state.get("searching", ())), set(state.get("priority", ()))


Fetch = Callable[[str], "tuple[str, float, list[str], list[str]] | None"]


def verify_site(url: str, fetch: Fetch, hits: Iterable[str] = (), sitemap: bool = False,
                search: Callable[[str], list[str]] | None = None, site_queries: Iterable[str] = (),
                **params) -> SiteVerifier:
    """Run the verification of the site of ``url`` sequentially (benchmarks, tests), from its
    :func:`entry_pages`: the ``hits``, the root and, with ``sitemap``, ``/sitemap.xml``; then, with
    ``search`` (query string -> hit URLs), one request ``site:HOST words`` per ``site_queries``
    entry (one page of the budget each), its new hits queued ahead of the others.

    ``fetch(url)`` returns (final URL after redirects, F, matched rules, outlinks) or None for a
    failed fetch; outlinks of other sites are ignored (a sitemap is fetched like a page: F = 0,
    its ``<loc>`` URLs as outlinks). ``params`` go to :class:`SiteVerifier`."""
    site = site_of(url)
    v = SiteVerifier(site, **params)
    v.entry = entry_url(url)
    v.hits = [h for h in hits if site_of(h) == site]
    for page in entry_pages(v.entry, v.hits, sitemap):
        v.add(page)
    for words in site_queries if search is not None else ():
        if v.start_search(words):
            for hit in v.searched(words, search(f"site:{site} {words}".strip()))[0]:
                v.add(hit)
    while (picked := v.next()) is not None:
        page_url, _ = picked
        got = fetch(page_url)
        if got is None:
            v.record(page_url, 0.0, note="failed")
            continue
        final, score, rules, links = got
        hosts = {site, site_of(final)}
        for link in links:
            if site_of(link) in hosts:
                v.add(link)
        v.record(page_url, score, rules, final=final)
    return v
