"""Site finder crawl frontier: :class:`SiteFinderFrontier` runs many site verifiers in one crawl
(the ``sitefinder`` strategy). Scrapy-free: the spider :mod:`topiccrawl.spiders.sitefinder` drives it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from topiccrawl.sitefinder.verifier import (
    SiteVerifier,
    canonical_url,
    entry_pages,
    entry_url,
    site_of,
    site_query_texts,
)
from topiccrawl.strategies.base import Link, OptionError, StrategyOptions, option_field, setting_name
from topiccrawl.strategies.simple import _Base

# ---------------------------------------------------------------------------------------------
# The crawl frontier: many sites interleaved


class SiteFinderFrontier(_Base):
    """The ``sitefinder`` strategy: candidate sites verified side by side in one crawl.

    * ``expect(url)`` announces a non-site request (a search query); it is served first, FIFO.
    * ``plan_site_queries(url, queries)`` reserves, once per site, up to ``site_queries`` pages of
      its budget for site-restricted searches (``site:HOST words``) and returns their words;
      ``site_searched(site, words, hits)`` takes the answer and returns the new hits to request
      (entry pages, expanded first) and the verdict if the answer decided it.
    * ``add_site(url, query)`` registers the site of a search hit and returns the URLs the spider
      requests: the first time the site's entry pages (the hit, the root, ``/sitemap.xml``:
      :func:`~topiccrawl.sitefinder.verifier.entry_pages`), later a new hit of an undecided site
      (a site is checked once, however many queries found it).
    * ``push`` files a link into its site's :class:`SiteVerifier`; links to unknown sites and to
      decided sites are ignored. A pushed link that carries the ``seq`` of a handed-out link is
      the redirect of that page: it is served next, bypassing the verifier.
    * ``pop`` goes round robin over the sites in order of discovery, each site choosing its page
      by H(A_k) (:meth:`SiteVerifier.next`); a site with a page in flight waits for its score.
    * ``landed(url, final_url)`` maps the host a page redirected to onto its site;
      ``report(url, F, rules, final=URL)`` records the score of the page that landed on ``URL``
      and returns the site verdict once decided.
    * Ground truth (statistics only, :meth:`set_truth`): a site is truly relevant when at least
      ``truth_pages`` of its pages carry the rules' label (:class:`~topiccrawl.sitefinder.truth.SiteTruth`).
    """

    name = "sitefinder"
    #: its state is more than its queue (sites, reports, verdicts), which a journal of pushes and
    #: pops cannot replay: a JOBDIR holds a snapshot written when the crawl stops (docs/sitefinder.md)
    journaled = False

    def __init__(self, *, page_threshold: float = 0.7, num_rel_pages: int = 3,
                 num_exp_pages: int = 50, prior: float = 0.5, digits: bool = False,
                 max_inflight: int = 1, truth_pages: int = 3, sitemap: bool = True, site_queries: int = 2) -> None:
        super().__init__()
        self.params = dict(page_threshold=page_threshold, num_rel_pages=num_rel_pages,
                           num_exp_pages=num_exp_pages, prior=prior, digits=digits,
                           max_inflight=max_inflight)
        self.truth_pages, self.sitemap, self.site_queries = truth_pages, sitemap, site_queries
        self.planned: set[str] = set()  # sites whose site-restricted searches were planned
        self.sites: dict[str, SiteVerifier] = {}
        self.aliases: dict[str, str] = {}
        self.expected: set[str] = set()
        self.searches: set[str] = set()  # every search URL announced: a retry comes back with the same URL
        self.control: deque[Link] = deque()
        self.handed: dict[int, str] = {}  # seq -> URL of the links handed out, not yet reported
        self._handed_seq: dict[str, int] = {}
        self.ignored = 0
        self._rr = 0
        self.is_true_site: Callable[[str], bool] | None = None
        self.count_true_sites: Callable[[], int] | None = None
        self.is_true_page: Callable[[str], bool] | None = None
        self._true_total: int | None = None
        self.search_counts: dict[str, int] = {}  # query -> search results

    def set_truth(self, is_true_site: Callable[[str], bool], count_true_sites: Callable[[], int] | None = None,
                  is_true_page: Callable[[str], bool] | None = None) -> None:
        """Ground truth for the statistics: is the site of this entry URL truly relevant, how
        many true sites the corpus has (for recall), does a page carry the label (page-level
        figures). Never used to choose pages."""
        self.is_true_site, self.count_true_sites, self.is_true_page = is_true_site, count_true_sites, is_true_page

    # -- sites ------------------------------------------------------------------------------------
    def site(self, url: str) -> str | None:
        host = site_of(url)
        host = self.aliases.get(host, host)
        return host if host in self.sites else None

    def add_site(self, url: str, query: str = "", hits: list[str] | None = None) -> list[str]:
        """Register the site of ``url`` (a search hit, or a URL the user named) found by ``query``;
        the URLs to request: the site's entry pages the first time (``hits``: more hits known for
        it, before ``url``), ``[url]`` for a new hit of a site still undecided, else ``[]``."""
        host = site_of(url)
        known = self.site(url)
        if known is not None:
            v = self.sites[known]
            if query and query not in v.found_by:
                v.found_by.append(query)
            return [url] if self._new_hit(v, url) else []
        if not host:
            return []
        v = self.sites[host] = SiteVerifier(host, **self.params)
        v.entry = entry_url(url)
        if query:
            v.found_by.append(query)
        for hit in [*(hits or ()), url]:
            if site_of(hit) == host:
                self._new_hit(v, hit)
        return entry_pages(v.entry, v.hits, self.sitemap)

    def _new_hit(self, v: SiteVerifier, url: str) -> bool:
        """A hit of a known site not requested yet (the site undecided): an entry page too."""
        key = canonical_url(url)
        if not v.wants(url) or key == canonical_url(v.entry) or any(canonical_url(h) == key for h in v.hits):
            return False
        v.hits.append(url)
        return True

    def plan_site_queries(self, url: str, queries: list[str]) -> list[str]:
        """The words of the site-restricted searches of the site of ``url`` (once per site, up to
        ``site_queries``, each reserving a page of its budget: :func:`site_query_texts`); []
        for an unknown, decided or already planned site."""
        site = self.site(url)
        if site is None or site in self.planned or self.site_queries <= 0:
            return []
        self.planned.add(site)
        v = self.sites[site]
        return [w for w in site_query_texts(v.found_by, queries, self.site_queries) if v.start_search(w)]

    def site_searched(self, site: str, words: str, hits: list[str]) -> tuple[list[str], dict | None]:
        """The answer to the site-restricted search ``words`` of ``site`` (``hits`` = [] when it
        failed): (the new hits of the site to request, the site's result if this decided it)."""
        v = self.sites.get(self.aliases.get(site, site))
        if v is None:
            return [], None
        new, decided = v.searched(words, hits)
        return new, self._result(v) if decided else None

    def expect(self, url: str) -> None:
        self.expected.add(url)
        self.searches.add(url)

    def wants(self, url: str) -> bool:
        site = self.site(url)
        return site is not None and self.sites[site].wants(url)

    def landed(self, url: str, final_url: str) -> str | None:
        """The site of a page requested as ``url`` that arrived from ``final_url``."""
        site = self.site(url)
        final = site_of(final_url)
        if site is not None and final and final not in self.sites:
            self.aliases.setdefault(final, site)
        return site

    def report(self, url: str, score: float, rules: Iterable[str] = (), note: str = "",
               links: Iterable[str] = (), final: str | None = None) -> dict | None:
        """Record F of the page requested as ``url`` that landed on ``final`` (after redirects)
        and announce the same-site ``links`` the spider queues next (:meth:`SiteVerifier.record`);
        the site's result if this decided it."""
        site = self.site(url)
        if site is None:
            return None
        self.handed.pop(self._handed_seq.pop(url, -1), None)
        v = self.sites[site]
        links = [u for u in links if self.site(u) == site]  # only this site's links can arrive here
        return self._result(v) if v.record(url, score, rules, note, links, final) else None

    def _result(self, v: SiteVerifier) -> dict:
        return self.judge(v.result())

    def judge(self, row: dict) -> dict:
        """``row`` (a :meth:`SiteVerifier.result`) with ground truth added when known:
        ``truly_relevant`` (the k-pages rule) and ``labelled`` on each evidence page."""
        if self.is_true_site is not None:
            row["truly_relevant"] = bool(self.is_true_site(row["entry"]))
        if self.is_true_page is not None:
            for page in row.get("evidence", ()):
                page["labelled"] = bool(self.is_true_page(page["url"]))
        return row

    def results(self) -> list[dict]:
        return [self._result(v) for v in self.sites.values()]

    # -- Frontier protocol ------------------------------------------------------------------------
    def push(self, link: Link) -> None:
        if link.seq in self.handed:  # a redirect of a page in flight: continue it at once
            self.control.appendleft(link)
            return
        self._stamp(link)
        if link.url in self.expected or link.url in self.searches:  # a search page (or its retry)
            self.expected.discard(link.url)
            self.control.append(link)
            return
        site = self.site(link.url)
        if site is None or not self.sites[site].add(link.url, link):
            self.ignored += 1

    def pop(self) -> Link | None:
        if self.control:
            return self.control.popleft()
        order = list(self.sites.values())
        for i in range(len(order)):
            v = order[(self._rr + i) % len(order)]
            picked = v.next()
            if picked is not None:
                self._rr = (self._rr + i + 1) % len(order)
                link = picked[1]
                self.handed[link.seq] = link.url
                self._handed_seq[link.url] = link.seq
                return link
        return None

    def __len__(self) -> int:
        return len(self.control) + sum(v.queued for v in self.sites.values())

    def _links(self) -> list[Link]:
        queued = [item for v in self.sites.values() if v.verdict is None
                  for c in v.classes.values() for _, _, item in c.queue]
        return [*self.control, *queued]

    def state(self) -> dict:
        return {**super().state(), "sites": {k: v.state() for k, v in self.sites.items()},
                "aliases": self.aliases, "expected": sorted(self.expected), "searches": sorted(self.searches),
                "planned": sorted(self.planned),
                "search_counts": self.search_counts,
                # pages handed out and not scored: a resumed crawl fetches them first (the scheduler's
                # in-flight requests), their sites wait for those scores as before the stop
                "inflight": {k: v.inflight for k, v in self.sites.items() if v.inflight},
                "handed": sorted(self.handed.items())}

    def load_state(self, state: dict) -> None:
        for host, vs in state.get("sites", {}).items():
            self.sites[host] = SiteVerifier(host, **self.params)
            self.sites[host].load_state(vs)
        self.aliases.update(state.get("aliases", {}))
        self.expected.update(state.get("expected", ()))
        self.searches.update(state.get("searches", ()))
        self.planned.update(state.get("planned", ()))
        self.search_counts.update(state.get("search_counts", {}))
        for host, pages in state.get("inflight", {}).items():
            self.sites[host].inflight.update(pages)
        for seq, url in state.get("handed", ()):
            self.handed[seq] = url
            self._handed_seq[url] = seq
        super().load_state(state)

    def forget_inflight(self, urls) -> None:
        """Stop waiting for the scores of pages handed out before a crash that will not be
        fetched again (their sites go on with their other pages)."""
        urls = set(urls)
        for v in self.sites.values():
            for url in urls & v.inflight.keys():
                del v.inflight[url]
        for url in urls & self._handed_seq.keys():
            self.handed.pop(self._handed_seq.pop(url), None)

    # -- statistics -------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Site statistics; precision, recall and per-query relevance need ground truth."""
        rows = [self.judge(v.result()) for v in self.sites.values()]
        return {**self.summarize(rows), "sites/ignored_links": self.ignored}

    def summarize(self, rows: list[dict]) -> dict:
        """The site statistics of ``rows``, one :meth:`SiteVerifier.result` per candidate site
        (also the rows of every worker of a Redis crawl, :mod:`topiccrawl.redis.sitefinder`)."""
        decided = [r for r in rows if r["verdict"] != "undecided"]
        judged = [r for r in decided if r["verdict"] == "relevant"]
        out = {
            "sites/candidates": len(rows), "sites/checked": len(decided),
            "sites/judged_relevant": len(judged),
            "sites/pages_fetched": sum(r["pages_fetched"] for r in rows),
            "sites/pages_per_site": round(sum(r["pages_fetched"] for r in decided) / len(decided), 3) if decided else 0.0,
            "sites/site_searches": sum(r.get("searches", 0) for r in rows),
        }
        good = [e for r in rows for e in r.get("evidence", ()) if e["score"] >= self.params["page_threshold"]]
        out["sites/good_pages"] = len(good)
        if self.is_true_page is not None:  # page level, next to the site level
            labelled = sum(bool(self.is_true_page(e["url"])) for e in good)
            out["sites/good_pages_labelled"] = labelled
            out["sites/page_precision"] = round(labelled / len(good), 4) if good else None
        if self.is_true_site is None:
            return out
        truth = {r["site"]: bool(self.is_true_site(r["entry"])) for r in rows}
        hits = sum(truth[r["site"]] for r in judged)
        true_candidates = sum(truth.values())
        out["sites/truth_pages"] = self.truth_pages
        out["sites/truly_relevant_candidates"] = true_candidates
        out["sites/precision"] = round(hits / len(judged), 4) if judged else None
        out["sites/recall_candidates"] = round(hits / true_candidates, 4) if true_candidates else None
        if self.count_true_sites is not None:
            if self._true_total is None:
                self._true_total = self.count_true_sites()
            out["sites/true_sites"] = self._true_total
            out["sites/recall"] = round(hits / self._true_total, 4) if self._true_total else None
        rates = {}
        for r in rows:
            for q in r["queries"]:
                n, t = rates.get(q, (0, 0))
                rates[q] = (n + 1, t + truth[r["site"]])
        out["sites/query_relevance"] = {q: round(t / n, 4) for q, (n, t) in rates.items()}
        return out

    def count_search(self, query: str, n: int) -> None:
        """``n`` results of ``query`` (one result page)."""
        self.search_counts[query] = self.search_counts.get(query, 0) + n

    def stats(self) -> dict:
        return self.summary()

    def write_report(self, out_dir: Path) -> Path:
        """``sites.jsonl`` (one verdict per candidate site) and ``sites-summary.json``."""
        out_dir = Path(out_dir)
        with (out_dir / "sites.jsonl").open("w", encoding="utf-8") as fh:
            for row in self.results():
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        path = out_dir / "sites-summary.json"
        summary = {**self.summary(), "params": self.params, "search_results": self.search_counts}
        path.write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
        return path


@dataclass(frozen=True)
class SiteFinderOptions(StrategyOptions):
    """Options of ``sitefinder`` (docs/sitefinder.md); each field is read from the setting of its name."""

    sites_page_threshold: float = option_field(0.7, low=0.0, high=1.0)
    sites_num_rel_pages: int = option_field(3, low=1)
    sites_num_exp_pages: int = option_field(50, low=1)
    sites_prior: float = option_field(0.5, low=0.0, high=1.0)
    sites_abstract_digits: bool = False
    sites_inflight: int = option_field(1, low=1)
    #: ground truth (statistics only): a site is truly relevant when >= this many of its pages carry the label
    sites_truth_pages: int = option_field(3, low=1)
    #: try ``/sitemap.xml`` as an entry page of every site
    sites_sitemap: bool = True
    #: site-restricted searches (``site:HOST words``) per site, each one page of its budget; 0 = off
    sites_site_queries: int = option_field(2, low=0)

    def validate(self) -> None:
        super().validate()
        if self.sites_num_exp_pages < self.sites_num_rel_pages:  # no site could be judged relevant
            raise OptionError("sites_num_exp_pages", self.sites_num_exp_pages,
                              f" is below {setting_name('sites_num_rel_pages')}={self.sites_num_rel_pages}: no site could "
                              "find that many good pages in fewer fetches, so none would be judged relevant")

    def kwargs(self) -> dict:
        """The :class:`SiteFinderFrontier` arguments."""
        return {"page_threshold": self.sites_page_threshold, "num_rel_pages": self.sites_num_rel_pages,
                "num_exp_pages": self.sites_num_exp_pages, "prior": self.sites_prior,
                "digits": self.sites_abstract_digits, "max_inflight": self.sites_inflight,
                "truth_pages": self.sites_truth_pages, "sitemap": self.sites_sitemap,
                "site_queries": self.sites_site_queries}


def make_sitefinder(options: SiteFinderOptions | Mapping | None = None, is_relevant: Callable[[str], bool] | None = None,
                    cls: type[SiteFinderFrontier] | None = None) -> SiteFinderFrontier:
    """Factory of ``sitefinder`` (:class:`SiteFinderOptions`, or a settings mapping);
    ``cls``: a subclass to build instead (the Redis store's)."""
    return (cls or SiteFinderFrontier)(**SiteFinderOptions.coerce(options).kwargs())
