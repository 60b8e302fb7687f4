"""The site finder: ``scrapy crawl sitefinder -a rules=bookstore-zh [-a queries=FILE] [-a backend=local]``.

Meta-search, then minimum-cost verification of every candidate site (Li, Zhou, Guo, Lin;
:mod:`topiccrawl.sitefinder`, docs/sitefinder.md). ``start()`` sends every query to every backend
(through Scrapy, so the offline web lab's proxy applies); each search hit's host becomes a
candidate site, verified once from its entry pages: the hits that named it, its root,
``/sitemap.xml`` and the hits of ``TOPICCRAWL_SITES_SITE_QUERIES`` site-restricted searches
(``site:HOST words``, words from the rules' queries, one page of the site's budget each; asked of
the first backend). The ``sitefinder`` frontier interleaves the sites; this spider scores each page
F(P, R), passes its same-site links and reports F under the URL the response landed on. One
item per checked site: site, verdict, good_pages, pages_fetched, evidence, queries (JSON lines).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict

import scrapy
from scrapy.http import TextResponse

from topiccrawl.crawl.meta import META_KEY
from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.discovery.search import SEARCH_CALL, SearchBackendError, make_backend
from topiccrawl.scoring.text import extract
from topiccrawl.sitefinder.frontier import SiteFinderFrontier
from topiccrawl.sitefinder.rules import Query, SiteFinderError, load_queries, load_rules
from topiccrawl.sitefinder.truth import SiteTruth
from topiccrawl.sitefinder.verifier import SITEMAP_PATH, sitemap_links

SF_KEY = "sitefinder"


class SiteFinderSpider(scrapy.Spider):
    """Spider arguments: ``rules`` (a shipped rule set name or a .toml path; default
    bookstore-zh), ``queries`` (a .toml or text file; default: the rules file's queries),
    ``backend`` (comma-separated: local, searxng), ``search_url`` (base URL of the backend,
    required for searxng; ``backend_url`` is a deprecated alias), ``search_pages`` (result pages
    per query), ``sites`` (extra candidate URLs, comma-separated, verified from that URL as from a
    search hit). Verification settings: ``TOPICCRAWL_SITES_PAGE_THRESHOLD``, ``_NUM_REL_PAGES``,
    ``_NUM_EXP_PAGES``, ``_PRIOR``, ``_ABSTRACT_DIGITS``, ``_INFLIGHT``, ``_SITEMAP``, ``_SITE_QUERIES``; ground
    truth of the statistics: ``_TRUTH_PAGES``.
    """

    name = "sitefinder"
    #: which queue the crawl needs; the add-on (topiccrawl.crawl.addon) picks the scheduler by it
    topiccrawl_queue = "sites"
    custom_settings = {
        "TOPICCRAWL_STRATEGY": "sitefinder",
        "TOPICCRAWL_WEB": "generated:zh-bookstores",
        "TOPICCRAWL_MAX_PAGES": 0,  # no DP budget: the verification settings bound the crawl
    }

    def __init__(self, *args, rules: str = "bookstore-zh", queries: str | None = None,
                 backend: str = "local", search_url: str | None = None,
                 search_pages: str | None = None, sites: str = "", backend_url: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if backend_url is not None:
            warnings.warn("spider argument backend_url is deprecated: use search_url", DeprecationWarning, stacklevel=2)
            self.logger.warning("spider argument backend_url is deprecated: use -a search_url=URL")
        (self.rules, self.queries, self.pages, self.backends,
         self.extra_sites) = self.check_arguments(rules, queries, backend, search_url, search_pages, sites,
                                                  backend_url=backend_url)

    @classmethod
    def searches(cls, spargs: dict, settings) -> bool:
        """Whether the crawl calls the search backend: queries to send (the rules file's or
        ``-a queries``), or site-restricted searches of the candidate sites
        (``TOPICCRAWL_SITES_SITE_QUERIES`` > 0). A crawl of ``-a sites`` alone may not search."""
        from topiccrawl.crawl.settings import strategy_options

        queries = cls.check_arguments(**spargs)[1]
        return bool(queries) or strategy_options(settings, "sitefinder").sites_site_queries > 0

    @staticmethod
    def check_arguments(rules: str = "bookstore-zh", queries: str | None = None, backend: str = "local",
                        search_url: str | None = None, search_pages: str | None = None,
                        sites: str = "", backend_url: str | None = None, **_ignored) -> tuple:
        """Parse the spider arguments; raise SiteFinderError or SearchBackendError (one line).
        ``backend_url``: the deprecated name of ``search_url``."""
        if backend_url is not None and search_url is not None and backend_url != search_url:
            raise SiteFinderError("give the search backend's URL once: -a search_url=URL "
                                  "(backend_url is its deprecated alias)")
        search_url = search_url if search_url is not None else backend_url
        ruleset = load_rules(rules)
        if queries:
            query_list, pages = load_queries(queries)
        else:
            query_list, pages = ruleset.queries, 0
        try:
            pages = int(search_pages) if search_pages else (pages or ruleset.search_pages or 1)
        except ValueError:
            pages = 0
        if pages < 1:
            raise SiteFinderError(f"spider argument search_pages={search_pages!r} must be an integer >= 1")
        backends = [make_backend(b.strip(), search_url) for b in backend.split(",") if b.strip()]
        extra = [s.strip() for s in sites.split(",") if s.strip()]
        if not query_list and not extra:
            raise SiteFinderError(f"{ruleset.path}: no queries: pass -a queries=FILE or -a sites=URL,…")
        if query_list and not backends:
            raise SiteFinderError("spider argument backend is empty (expected e.g. local or searxng)")
        return ruleset, query_list, pages, backends, extra

    @property
    def tc(self) -> TopicCrawl:
        return TopicCrawl.for_crawler(self.crawler)

    @property
    def frontier(self) -> SiteFinderFrontier | None:
        """The scheduler's site-finder strategy (None before the engine exists: Scrapy's
        ``Request.to_dict`` reads every spider attribute when a scheduler saves its queue)."""
        try:
            return getattr(self.crawler.engine.scheduler, "frontier", None)
        except RuntimeError:  # no engine yet
            return None

    # -- start: the meta-search --------------------------------------------------------------
    async def start(self):
        frontier = self.frontier
        if not isinstance(frontier, SiteFinderFrontier):
            self.logger.error("the sitefinder spider needs TOPICCRAWL_STRATEGY=sitefinder and "
                              "SCHEDULER=topiccrawl.crawl.scheduler.TopicScheduler")
            return
        if getattr(self.crawler.engine.scheduler, "refused", None):  # a Redis worker refused, or that lost
            return  # Redis before it joined: it adds no site, fetches nothing and stops when idle
        self._set_truth(frontier)
        for url in self.extra_sites:  # verified from that URL, as from a search hit
            for entry in frontier.add_site(url, "sites argument"):
                yield self._page_request(entry, 0)
            for request in self.site_search_requests(url):
                yield request
        for backend in self.backends:
            for query in self.queries:
                yield self._search_request(backend, query, 1)

    def _set_truth(self, frontier: SiteFinderFrontier) -> None:
        """The k-pages rule (:class:`SiteTruth`) over the corpus or the labels file, built on first use."""
        gt, label = self.tc.ground_truth, self.rules.label
        if gt is None or not label:
            return
        corpus = self.tc.corpus
        # the pages that carry labels: the corpus's, or those of TOPICCRAWL_GROUND_TRUTH's file
        urls = corpus.iter_urls if corpus is not None else gt._urls
        built: list[SiteTruth] = []

        def truth() -> SiteTruth:
            if not built:
                built.append(SiteTruth.from_pages(urls(), gt.labels, label, frontier.truth_pages, gt.identity))
            return built[0]

        frontier.set_truth(lambda url: truth().is_true(url), lambda: len(truth()),
                           lambda url: label in gt.labels(url))

    def _search_request(self, backend, query, pageno: int) -> scrapy.Request:
        url = backend.search_url(query.text, pageno)
        self.frontier.expect(url)
        return scrapy.Request(url, callback=self.parse_search, errback=self.search_failed,
                              meta={META_KEY: {"score": 1.0, "depth": 0}, **SEARCH_CALL,
                                    SF_KEY: {"query": asdict(query), "pageno": pageno,
                                             "backend": backend.name}},
                              cb_kwargs={"backend": backend})

    def parse_search(self, response, backend):
        info = response.meta[SF_KEY]
        query = info["query"]["text"]
        stats = self.crawler.stats
        try:
            results = backend.parse(response.body)
        except SearchBackendError as exc:
            self.logger.error("query %r page %d: %s", query, info["pageno"], exc)
            stats.inc_value("topiccrawl/sites/search_errors")
            return
        stats.inc_value("topiccrawl/sites/search_results", len(results))
        self.frontier.count_search(query, len(results))
        for hit in results:
            for entry in self.frontier.add_site(hit.url, query):
                yield self._page_request(entry, 0)
            yield from self.site_search_requests(hit.url)
        if results and info["pageno"] < self.pages:
            yield self._search_request(backend, Query(**info["query"]), info["pageno"] + 1)

    # -- site-restricted searches: entry pages of one site ---------------------------------------
    def site_search_requests(self, url: str) -> list[scrapy.Request]:
        """The site-restricted searches of the site of ``url`` (``site:HOST words``), planned once
        per site by the frontier ([] when the site is known already, decided or the setting is 0)."""
        frontier = self.frontier
        if not self.backends or frontier is None:
            return []
        site = frontier.site(url)
        backend = self.backends[0]
        try:
            backend.site_query(site or "", "")
        except SearchBackendError:  # no site, or a host the operator cannot name (an IPv6 literal)
            return []
        out = []
        for words in frontier.plan_site_queries(url, [q.text for q in self.queries]):
            search = backend.search_url(backend.site_query(site, words))
            frontier.expect(search)
            # dont_filter: a site claimed again (Redis lease expired) asks again
            out.append(scrapy.Request(search, callback=self.parse_site_search, errback=self.site_search_failed,
                                      dont_filter=True, cb_kwargs={"backend": backend},
                                      meta={META_KEY: {"score": 1.0, "depth": 0}, **SEARCH_CALL,
                                            SF_KEY: {"site": site, "site_query": words, "backend": backend.name}}))
        return out

    def parse_site_search(self, response, backend):
        info = response.meta[SF_KEY]
        try:
            hits = [r.url for r in backend.parse(response.body)]
        except SearchBackendError as exc:
            self.logger.error("site query %r of %s: %s", info["site_query"], info["site"], exc)
            self.crawler.stats.inc_value("topiccrawl/sites/search_errors")
            hits = []
        yield from self._site_searched(info, hits)

    def site_search_failed(self, failure):
        info = failure.request.meta[SF_KEY]
        self.logger.error("site search request failed: %s (%s)", failure.request.url, failure.value)
        self.crawler.stats.inc_value("topiccrawl/sites/search_errors")
        yield from self._site_searched(info, [])

    def _site_searched(self, info: dict, hits: list[str]):
        new, verdict = self.frontier.site_searched(info["site"], info["site_query"], hits)
        self.crawler.stats.inc_value("topiccrawl/sites/site_search_hits", len(new))
        for url in new:
            yield self._page_request(url, 0)
        if verdict:
            yield self._item(verdict)

    def search_failed(self, failure):
        self.logger.error("search request failed: %s (%s)", failure.request.url, failure.value)
        self.crawler.stats.inc_value("topiccrawl/sites/search_errors")

    # -- verification ------------------------------------------------------------------------
    def _page_request(self, url: str, depth: int, parent: str | None = None, anchor: str = "") -> scrapy.Request:
        # dont_filter: the frontier de-duplicates per site, so a redirect to a page seen before
        # still comes back to the spider (and the site's expansion is accounted for)
        return scrapy.Request(url, callback=self.parse_page, errback=self.page_failed, dont_filter=True,
                              meta={META_KEY: {"score": 1.0, "depth": depth, "parent": parent,
                                               "anchor": anchor}})

    def parse_page(self, response):
        requested = response.meta.get("redirect_urls", [response.url])[0]
        frontier = self.frontier
        site = frontier.landed(requested, response.url)
        if site is None:
            return

        def same_site(url: str) -> bool:  # links to other sites are ignored (and never announced)
            return frontier.site(url) == site and frontier.wants(url)

        ctype = response.headers.get("Content-Type", b"").decode("latin-1")
        locs = sitemap_links(response.body, response.url) if self._maybe_sitemap(response, ctype) else None
        if locs is not None:  # a sitemap: its URLs are the site's pages (F = 0 for the file itself)
            links = {u: "" for u in locs if same_site(u)}
            score, matched, note = 0.0, [], "sitemap"
        elif not isinstance(response, TextResponse) or ("xml" in ctype.lower() and "html" not in ctype.lower()):
            verdict = frontier.report(requested, 0.0, note="non-html", final=response.url)
            if verdict:
                yield self._item(verdict)
            return
        else:
            ex = extract(response.body, response.url, ctype)
            score, matched = self.rules.score(f"{ex.title}\n{ex.text}")
            links, note = {a.url: a.text for a in ex.anchors if same_site(a.url)}, ""
        # Scrapy may queue the requests of a callback after it has run: the links are announced with
        # the report so that the site does not look exhausted meanwhile
        verdict = frontier.report(requested, score, matched, note=note, links=links, final=response.url)
        if verdict:
            yield self._item(verdict)
            return
        depth = int((response.meta.get(META_KEY) or {}).get("depth", 0))
        for url, anchor in links.items():
            yield self._page_request(url, depth + 1, response.url, anchor.strip()[:200])

    @staticmethod
    def _maybe_sitemap(response, ctype: str) -> bool:
        ctype = ctype.lower()
        return ("xml" in ctype and "html" not in ctype) or response.url.rstrip("/").endswith("/" + SITEMAP_PATH)

    def page_failed(self, failure):
        request = failure.request
        requested = request.meta.get("redirect_urls", [request.url])[0]
        verdict = self.frontier.report(requested, 0.0, note=f"failed: {failure.type.__name__}")
        if verdict:
            yield self._item(verdict)

    def _item(self, verdict: dict) -> dict:
        self.logger.info("site %s: %s (%s; %d good of %d pages)", verdict["site"], verdict["verdict"],
                         verdict["reason"], verdict["good_pages"], verdict["pages_fetched"])
        return verdict
