"""``scrapy crawl sitefinder`` with ``TOPICCRAWL_STORE=redis``: N workers verify the sites of one crawl.

The unit of sharing is a task (:mod:`topiccrawl.redis.sites`): a search result page or a whole
candidate site. Each worker keeps the memory :class:`~topiccrawl.sitefinder.core.SiteFinderFrontier`
for the tasks it holds; what differs from one process:

* the spider's searches and candidate sites go to Redis instead of the local frontier (each once per
  crawl, whoever offers it first), and ``next_request`` claims a task whenever the local frontier has
  nothing to hand out — so a worker holds about as many sites as it has free download slots;
* a claimed search page is fetched and parsed here; its task ends when its callback has run (the
  sites and the next page it found are in Redis by then);
* a claimed site is verified here from its entry pages (the search hits noted in Redis before the
  site was claimed, its root, ``/sitemap.xml``, the hits of its site-restricted searches, which
  this worker asks itself, and the hits any worker's searches find for it later: read from Redis
  at most every :data:`HIT_POLL_SECONDS` while this worker hands out requests, each requested
  when the site wants it, as one process requests a new hit of an undecided site); the verdict goes to Redis once
  (``HSETNX``) and the spider yields the item only if this worker wrote it;
* leases are renewed every ``TOPICCRAWL_LEASE_SECONDS / 3``; a dead worker's tasks go back to the
  list when their leases expire and are done again from the start (a site restarts its walk);
* ``spider_idle`` waits while tasks wait, or up to ``TOPICCRAWL_IDLE_TIMEOUT`` while other workers
  hold some; when none waits or is leased, a candidate site left without a verdict is offered once
  more (:meth:`RedisSiteTasks.sweep`, logged as a warning); ``close`` gives this worker's
  unfinished tasks back (a restart resumes the crawl);
* ``sites.jsonl`` / ``sites-summary.json`` and the ``topiccrawl/sites/*`` stats cover all workers.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time

from scrapy import signals
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet import task

from topiccrawl.crawl.feeds import keep_feeds
from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.crawl.scheduler import TopicScheduler
from topiccrawl.crawl.settings import strategy_options
from topiccrawl.redis.connection import crawl_keys, redact
from topiccrawl.redis.scheduler import RedisWorker, _guarded
from topiccrawl.redis.sites import RedisSiteTasks
from topiccrawl.sitefinder.frontier import SiteFinderFrontier, make_sitefinder
from topiccrawl.sitefinder.rules import Query
from topiccrawl.sitefinder.verifier import entry_url, site_of

logger = logging.getLogger(__name__)

#: the spider's meta key of a search request (``topiccrawl.spiders.sitefinder.SF_KEY``)
SF_KEY = "sitefinder"
TASK_KEY = "task"
#: how often a worker reads the hits found for the sites it holds since it claimed them
HIT_POLL_SECONDS = 0.5


class SharedSiteFinderFrontier(SiteFinderFrontier):
    """The local frontier of one worker: sites the spider finds are offered to Redis; a site is
    verified here only once claimed (:meth:`take_site`); a verdict counts once crawl-wide."""

    shared: RedisSiteScheduler

    def add_site(self, url: str, query: str = "", hits: list[str] | None = None) -> list[str]:
        host = site_of(url)
        if host:  # verified from its entry pages, as in one process
            alias = self.aliases.get(host)
            # before the offer: the claimer reads it; after the claim, the holder (maybe this worker) polls it
            self.shared.tasks.add_hit(alias or host, url)
            self.shared.tasks.offer_site(host, entry_url(url), query)
            self.shared.forget_pending()
        return []  # the spider requests nothing: the worker that claims the site does

    def landed(self, url: str, final_url: str) -> str | None:
        site = super().landed(url, final_url)
        final = site_of(final_url)
        if site is not None and final and self.aliases.get(final) == site:
            self.shared.tasks.add_alias(final, site)  # other workers file this host under the site too
        return site

    def take_site(self, entry: str, queries: list[str], hits: list[str] | None = None) -> list[str]:
        """Register a claimed site locally; its entry pages ([] if this worker has it already)."""
        if self.site(entry) is not None:
            return []
        site = site_of(entry)
        hits = [h for h in hits or () if site_of(h) == site]
        pages = SiteFinderFrontier.add_site(self, entry, queries[0] if queries else "", hits=hits)
        for q in queries[1:]:
            SiteFinderFrontier.add_site(self, entry, q)
        return pages

    def report(self, url: str, score: float, rules=(), note: str = "", links=(), final=None) -> dict | None:
        result = super().report(url, score, rules, note, links, final)
        return None if result is None else self.shared.site_done(result)

    def site_searched(self, site: str, words: str, hits: list[str]) -> tuple[list[str], dict | None]:
        new, result = super().site_searched(site, words, hits)
        return new, None if result is None else self.shared.site_done(result)

    def count_search(self, query: str, n: int) -> None:
        super().count_search(query, n)
        self.shared.tasks.count_search(query, n)

    # -- all workers ------------------------------------------------------------------------------------
    def global_rows(self) -> list[dict]:
        """A row per candidate site of the crawl: its verdict, or ``undecided`` with no pages."""
        results = self.shared.tasks.results()
        rows = []
        for site, c in self.shared.tasks.candidates().items():
            row = results.get(site) or {"site": site, "entry": c["entry"], "verdict": "undecided",
                                        "reason": "", "good_pages": 0, "pages_fetched": 0, "classes": 0,
                                        "evidence": [], "queries": []}
            row["queries"] = c["found_by"]
            rows.append(self.judge(row))
        return rows

    def results(self) -> list[dict]:
        return self.global_rows()

    def summary(self) -> dict:
        return {**self.summarize(self.global_rows()), "sites/ignored_links": self.ignored}

    def write_report(self, out_dir):
        self.search_counts = self.shared.tasks.search_counts()
        return super().write_report(out_dir)


class RedisSiteScheduler(RedisWorker, TopicScheduler):
    """The TopicScheduler of a site-finder worker on Redis (see the module docstring)."""

    def __init__(self, crawler, client, jobdir, stats, down: Exception | None = None) -> None:
        tc = TopicCrawl.for_crawler(crawler)
        cfg = tc.config
        dupefilter = build_from_crawler(load_object(crawler.settings["DUPEFILTER_CLASS"]), crawler)
        frontier = make_sitefinder(strategy_options(crawler.settings, "sitefinder"), cls=SharedSiteFinderFrontier)
        super().__init__(crawler, dupefilter, jobdir, stats, frontier=frontier)
        frontier.shared = self
        self.r = client
        self.crawl_id = cfg.crawl_id or crawler.spider.name
        self.keys = crawl_keys(self.crawl_id)
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.tasks = RedisSiteTasks(client, self.keys["meta"][: -len("meta")], worker=self.worker,
                                    lease_seconds=cfg.lease_seconds)
        self.held: dict[str, dict] = {}  # task member -> task, this worker's leases
        self.site_task: dict[str, str] = {}  # site -> its task member
        self.hit_offset: dict[str, int] = {}  # held site -> its hits in Redis read so far
        self._hits_checked = 0.0
        self.refused: str | None = None
        self.down = down  # Redis gone before the join: stopped in open()
        self._waiting = 0
        self._checked = 0.0
        self._renewal: task.LoopingCall | None = None
        self._idle_since: float | None = None
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    # -- BaseScheduler ----------------------------------------------------------------------------
    def open(self, spider):
        self._open_or_lost(spider)
        return self.df.open()

    def _open(self) -> None:
        spider = self.spider
        if getattr(spider, "topiccrawl_queue", None) != "sites":
            self.refused = f"TOPICCRAWL_STRATEGY=sitefinder on Redis needs the sitefinder spider, not {spider.name!r}"
            logger.error("%s", self.refused)
            return
        self.refused = self._join(self.frontier.name)
        if self.refused:
            logger.error("%s", self.refused)
            return
        if self.jobdir:
            logger.info("JOBDIR is not used for the site finder's state: TOPICCRAWL_STORE=redis keeps it in Redis")
        s = self.tasks.status()
        self.stats.set_value("topiccrawl/redis/crawl_id", self.crawl_id)
        logger.info("worker %s joined site-finder crawl %r at %s: %d tasks waiting, %d leased, %d sites decided",
                    self.worker, self.crawl_id, redact(self.tc.config.redis_url), s["waiting"], s["leased"],
                    s["results"])
        self.joined = True
        self._start_renewal()

    def close(self, reason: str):
        keep_feeds(self.crawler, reason)
        self._stop_renewal()
        if not self.refused:
            released = self.tasks.release(self.held)
            self.held.clear()
            self.stats.set_value("topiccrawl/redis/released_on_close", released)
            self._global_stats()
            self.publish_stats()
            if self.tc.config.plot_enabled:
                out = self.tc.output_dir
                out.mkdir(parents=True, exist_ok=True)
                self.frontier.write_report(out)
        return self.df.close(reason)

    @_guarded()
    def publish_stats(self) -> None:
        if not self.refused:  # refused or Redis gone: no other crawl's rows, no Redis round trip
            super().publish_stats()

    def forget_pending(self) -> None:
        """The next :meth:`has_pending_requests` asks Redis again (this worker offered a task)."""
        self._checked = 0.0

    @_guarded(0)
    def __len__(self) -> int:
        """Queued requests, as in one process: this worker's, plus those the crawl's waiting tasks
        stand for (a search page each; a site its entry pages, as :meth:`SharedSiteFinderFrontier.take_site`
        lists them for the worker that claims it). Reads every waiting task: for stats, not a hot path."""
        if self.refused:
            return 0
        scratch = SiteFinderFrontier(**self.frontier.params, sitemap=self.frontier.sitemap)
        waiting = sum(1 if t["kind"] != "site" else len(scratch.add_site(t["entry"], hits=hits))
                      for t, hits in self.tasks.waiting())
        return super().__len__() + waiting

    @_guarded(False)
    def has_pending_requests(self) -> bool:
        if self.refused:
            return False
        if len(self.frontier) > 0:
            return True
        now = time.monotonic()
        if now - self._checked > 0.5:  # at most two round trips a second while idle
            self._checked = now
            self._waiting = self.tasks.status()["waiting"]
        return self._waiting > 0

    @_guarded(False)
    def enqueue_request(self, request) -> bool:
        if self.refused:
            return False
        info = request.meta.get(SF_KEY)
        if info is not None and TASK_KEY in info:  # a retry or redirect of a claimed search page
            self.frontier.expect(request.url)
            return super().enqueue_request(request)
        if info is not None and "query" in info:
            # a search page the spider wants: a task for whichever worker claims it
            self.frontier.expected.discard(request.url)
            new = self.tasks.offer_search(info["backend"], info["query"], info["pageno"])
            self.stats.inc_value("topiccrawl/sites/searches_offered" if new else "topiccrawl/sites/searches_known")
            return True
        return super().enqueue_request(request)

    @_guarded()
    def next_request(self):
        if self.refused:
            return None
        now = time.monotonic()
        if self.hit_offset and now - self._hits_checked >= HIT_POLL_SECONDS:
            self._hits_checked = now
            self.read_late_hits()
        request = super().next_request()
        while request is None:
            member, reclaimed = self.tasks.claim()
            if reclaimed:
                self.stats.inc_value("topiccrawl/redis/lease_expired", reclaimed)
                logger.info("%d expired tasks of other workers went back to the list", reclaimed)
            if member is None:
                self._waiting = 0
                return None
            self._idle_since = None  # there was work: an idle wait starts afresh
            self._start(member)
            request = super().next_request()
        return request

    # -- tasks ------------------------------------------------------------------------------------------
    def _start(self, member: str) -> None:
        """Put a claimed task into the local frontier."""
        t = json.loads(member)
        self.held[member] = t
        spider = self.spider
        if t["kind"] == "search":
            backend = next((b for b in spider.backends if b.name == t["backend"]), None)
            if backend is None:  # workers of one crawl must run with the same spider arguments
                logger.error("search task for backend %r, which this worker lacks (start every worker with the "
                             "same -a backend=...): skipped", t["backend"])
                self.search_done(member)
                return
            # dont_filter: Redis already made it unique, and a task given back may come here again
            request = spider._search_request(backend, Query(**t["query"]), t["pageno"]).replace(dont_filter=True)
            request.meta[SF_KEY][TASK_KEY] = member
            lease = _SearchLease(self, member, request.callback, request.errback)
            request.callback, request.errback = lease.callback, lease.errback
            super().enqueue_request(request)
            self.stats.inc_value("topiccrawl/sites/searches_claimed")
            return
        site, entry = t["site"], t["entry"]
        alias = self.tasks.alias_of(site) or self.frontier.aliases.get(site)
        if alias and alias != site:  # pages of another site redirected here: not a candidate of its own
            self.tasks.merge(member, site, alias)
            self.held.pop(member, None)
            self.stats.inc_value("topiccrawl/sites/aliases_merged")
            return
        self.site_task[site] = member
        hits = self.tasks.hits(site)
        self.hit_offset[site] = len(hits)
        pages = self.frontier.take_site(entry, self.tasks.found_by(site), hits)
        if not pages:
            return
        for url in pages:
            super().enqueue_request(spider._page_request(url, 0))
        for request in spider.site_search_requests(entry):  # not a search task: this site's own entry pages
            super().enqueue_request(request)
        self.stats.inc_value("topiccrawl/sites/sites_claimed")

    def read_late_hits(self) -> int:
        """Request the hits found for the sites this worker holds since it read them last (any
        worker's searches, its own included): each an entry page of its site if the site, still
        undecided, wants it (not requested yet, within its budget), as in one process. The number
        of pages requested."""
        requested = 0
        for site, new in self.tasks.hits_since(self.hit_offset).items():
            if site not in self.hit_offset:
                continue
            self.hit_offset[site] += len(new)
            for url in new:
                if self.frontier.site(url) is None:
                    continue
                for page in SiteFinderFrontier.add_site(self.frontier, url):
                    super().enqueue_request(self.spider._page_request(page, 0))
                    requested += 1
        if requested:
            self.stats.inc_value("topiccrawl/sites/late_hits_requested", requested)
        return requested

    def search_done(self, member: str) -> None:
        if self.held.pop(member, None) is not None:
            self.tasks.done(member)

    def site_done(self, result: dict) -> dict | None:
        """Store a verdict (with the queries of every worker's searches that found the site) and
        return it; None when the site had one already (this worker's lease had expired)."""
        site = result["site"]
        member = self.site_task.pop(site, None)
        self.hit_offset.pop(site, None)
        if member is None:
            return None
        self.held.pop(member, None)
        result = {**result, "queries": self.tasks.found_by(site) or result.get("queries", [])}
        if self.tasks.done(member, site, result):
            return result
        self.stats.inc_value("topiccrawl/sites/duplicate_verdicts")
        logger.info("site %s: another worker stored its verdict first (this worker's lease had expired)", site)
        return None

    def _held(self) -> tuple[dict, object]:
        return self.held, self.tasks

    def _global_stats(self) -> None:
        for key, value in self.tasks.counters().items():
            self.stats.set_value(f"topiccrawl/global/sites/{key}", value)

    def _idle(self, spider) -> None:
        if self.refused:
            raise CloseSpider(self.refusal)  # redis_refused, or redis_lost (RedisWorker.lost)
        if self.held and self.read_late_hits():  # hits found meanwhile: the held sites go on
            self._idle_since = None
            raise DontCloseSpider
        if self.held:  # nothing of ours is in flight: these tasks cannot progress here any more
            stuck = [t for t in self.held.values() if t["kind"] == "site"]
            for t in stuck:  # a site that stopped without a verdict (e.g. every page ignored)
                v = self.frontier.sites.get(t["site"])
                if v is not None:
                    self.site_done(v.result())
            # what is left cannot progress: a search page whose request ended without its callback, or a
            # site this worker has no verifier for (left without a verdict: the sweep below offers it again)
            for member in list(self.held):
                t = self.held[member]
                logger.warning("%s task ended without a %s: %s", t["kind"],
                               "verdict" if t["kind"] == "site" else "response", t)
                self.search_done(member)
        s = self.tasks.status()
        if s["reclaimed"]:
            self.stats.inc_value("topiccrawl/redis/lease_expired", s["reclaimed"])
        if s["waiting"]:
            self._idle_since = None
            raise DontCloseSpider
        if s["leased"]:
            self._wait_for_others(s["leased"], "tasks")
            return
        swept = self.tasks.sweep()  # nothing waits or is leased: no candidate may stay without a verdict
        if swept:
            logger.warning("%d candidate sites had neither a verdict nor a task: offered again (%s)",
                           len(swept), ", ".join(swept[:10]))
            self.stats.inc_value("topiccrawl/sites/swept", len(swept))
            self._idle_since = None
            raise DontCloseSpider


class _SearchLease:
    """Ends a search task once its callback has run (its sites and next page are offered by then)
    or its download failed for good."""

    def __init__(self, scheduler: RedisSiteScheduler, member: str, callback, errback) -> None:
        self.scheduler, self.member, self.cb, self.eb = scheduler, member, callback, errback

    def callback(self, response, **kwargs):
        try:
            yield from self.cb(response, **kwargs) or ()
        finally:
            self.scheduler.search_done(self.member)

    def errback(self, failure):
        try:
            return self.eb(failure) if self.eb is not None else failure
        finally:
            self.scheduler.search_done(self.member)
