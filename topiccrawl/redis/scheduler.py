"""The TopicScheduler over the shared Redis frontier (``TOPICCRAWL_STORE = "redis"``).

The add-on (:mod:`topiccrawl.crawl.addon`) sets ``SCHEDULER`` to :class:`RedisScheduler` when
``TOPICCRAWL_STORE = "redis"`` and the spider's ``topiccrawl_queue`` is ``"frontier"`` (the
focused spiders). What differs from the memory scheduler:

* duplicates: the shared fingerprint SET (:class:`~topiccrawl.redis.dupefilter.RedisDupeFilter`);
  it also makes seeding happen once — a second worker's seeds are duplicates;
* batching: ``enqueue_request`` only buffers; :meth:`RedisScheduler.flush` sends the buffer in ONE
  round trip (one script: per request the fingerprint SADD and, when new, the push), when the
  engine asks for a request or the queue size, when ``BATCH`` requests wait, before any lease is
  settled (so a page's links are in Redis before its lease ends: a kill -9 loses none), on idle and
  on close; the stored request is compact JSON (:mod:`topiccrawl.crawl.codec`);
* ``next_request`` pops a *leased* request; its callback and errback are wrapped so the lease is
  released when the page is counted (HarvestPipeline -> ``TopicCrawl.record`` -> :meth:`count`),
  or the request ends otherwise (no item, download error, ignored, HTTP error); retries and
  redirects of a leased request stay with this worker under the same lease; a loop renews this
  worker's leases every ``TOPICCRAWL_LEASE_SECONDS / 3`` seconds;
* the DP budget is global (the pop script hands out no more than budget − counted − leased);
* ``spider_idle`` waits (DontCloseSpider) while the shared queue has work, or up to
  ``TOPICCRAWL_IDLE_TIMEOUT`` seconds while other workers hold leases; it closes at the budget;
* strategy ``wl`` runs one shared WL sampler (:class:`~topiccrawl.redis.wanglandau.RedisWLFrontier`); its
  ``topiccrawl/wl/*`` stats are the global ones; WL options the store lacks refuse the crawl;
* strategy ``learned`` shares labels and one model version (:mod:`topiccrawl.redis.learned`); at
  ``close`` the frontier's ``leave`` sends its last labels and gives the trainer lease up;
* ``close`` (budget, Ctrl-C, SIGTERM) gives this worker's leases back to the queue, so a restart
  continues where everything stopped; JOBDIR is not used for the frontier;
* start requests are queued with a member that sorts before every link (``bfs``, ``bestfirst``,
  ``oracle``), and ``TOPICCRAWL_DISPATCH = "patient"`` decides on this worker's own leases against
  a peek at the shared queue head (:mod:`topiccrawl.strategies.dispatch`, docs/dispatch.md).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import time
from urllib.parse import urlsplit

import redis
from itemadapter import ItemAdapter
from scrapy import Request, signals
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.job import job_dir
from twisted.internet import task

from topiccrawl.crawl.codec import decode, encode
from topiccrawl.crawl.engine import default_callback, wake_engine
from topiccrawl.crawl.feeds import NO_TOPIC_WORDS, keep_feeds
from topiccrawl.crawl.meta import LOCAL_META, META_KEY
from topiccrawl.crawl.runtime import NO_TRUTH_PAGES, TopicCrawl
from topiccrawl.crawl.scheduler import TopicScheduler
from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig, strategy_options
from topiccrawl.redis.annealing import make_redis_frontier
from topiccrawl.redis.connection import RedisStoreError, client_for, connect, crawl_keys, load_script, redact
from topiccrawl.redis.dupefilter import RedisDupeFilter
from topiccrawl.redis.frontier import RedisFrontier
from topiccrawl.redis.graph import SharedLinkGraph
from topiccrawl.scoring.topic import Topic, judged_by, judged_difference
from topiccrawl.strategies.base import FrontierError
from topiccrawl.strategies.simple import Link

logger = logging.getLogger(__name__)

#: Redis gone (stopped, restarted, unreachable): the worker stops with one line (:meth:`RedisWorker.lost`)
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


def _guarded(default=None):
    """A scheduler method that answers ``default`` once Redis is gone, and stops the worker on the
    first :data:`REDIS_DOWN` error it meets (instead of a traceback every few seconds)."""
    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            if self.lost_redis:
                return default
            try:
                return method(self, *args, **kwargs)
            except REDIS_DOWN as exc:
                self.lost(exc)
                return default
        return guarded
    return wrap


def _topic_tag(topic: Topic) -> str:
    """What a crawl's workers must agree on of their topic, as stored in ``meta``'s ``topic``."""
    return json.dumps(judged_by(topic), ensure_ascii=False, sort_keys=True)


class RedisLostMiddleware:
    """A spider callback that meets a :data:`REDIS_DOWN` error (the learned model's events, the
    shared link graph) tells the scheduler, which stops the worker in one line; the page is not
    counted (no traceback per page)."""

    def __init__(self, crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_spider_exception(self, response, exception):
        lost = getattr(getattr(self.crawler.engine, "scheduler", None), "lost", None)
        if isinstance(exception, REDIS_DOWN) and lost is not None:
            lost(exception)
            return []
        return None


class _Lease:
    """Wraps the callback and errback of a leased request to settle the lease when it ends."""

    def __init__(self, scheduler: RedisScheduler, member: str, callback, errback) -> None:
        self.scheduler, self.member, self.cb, self.eb = scheduler, member, callback, errback

    def callback(self, response, **kwargs):
        self.scheduler.responding[response.url] = self.member
        result = self.cb(response, **kwargs)
        if hasattr(result, "__aiter__"):
            return self._aiter(response, result)
        return self._iter(response, result)

    def _iter(self, response, result):
        items = 0
        try:
            for out in result or ():
                items += not isinstance(out, Request)
                yield out
        finally:
            self._settle(response, items)

    async def _aiter(self, response, result):
        items = 0
        try:
            async for out in result:
                items += not isinstance(out, Request)
                yield out
        finally:
            self._settle(response, items)

    def _settle(self, response, items: int) -> None:
        if not items:  # an item settles the lease when it is counted (or refused at the budget)
            self.scheduler.responding.pop(response.url, None)
            self.scheduler.finish(self.member, "nopage")

    def errback(self, failure):
        self.scheduler.finish(self.member, f"failed:{type(failure.value).__name__}")
        return self.eb(failure) if self.eb is not None else failure


class RedisWorker:
    """What the Redis worker schedulers share (this one and the site finder's): the client from
    the settings, joining a crawl id under one strategy, the lease-renewal loop (``_renew``) and
    the bounded wait for other workers' leases."""

    #: Redis gone before this worker joined (it answered ``scrapy crawl``'s check a moment before:
    #: unreachable, or restarted with another password): said at :meth:`open`, which then stops
    #: the worker as :meth:`lost` does, having asked Redis nothing more
    down: Exception | None = None
    #: set by :meth:`open` once this worker has joined its crawl; a worker that lost Redis before
    #: (``joined`` False) writes no output file (:func:`~topiccrawl.crawl.feeds.writes_nothing`)
    joined = False

    @classmethod
    def from_crawler(cls, crawler):
        cfg = TopicCrawl.for_crawler(crawler).config
        try:
            client, down = connect(cfg.redis_url), None
        except RedisStoreError as exc:
            client, down = client_for(cfg.redis_url), exc
        return cls(crawler, client, job_dir(crawler.settings), crawler.stats, down=down)

    def _open_or_lost(self, spider) -> None:
        """Open as :meth:`_open` does, or stop as :meth:`lost` does when Redis is gone before or
        while this worker joins."""
        self.spider = spider
        try:
            if self.down is not None:
                raise self.down
            self._open()
        except (*REDIS_DOWN, RedisStoreError) as exc:
            self.lost(exc)

    def _open(self) -> None:
        """Join the crawl (``self.spider`` is set), or set ``refused`` and say why."""
        raise NotImplementedError

    def redis_down(self, exc: BaseException) -> bool:
        """Stop as :meth:`lost` does when ``exc`` says Redis is gone (for callers outside the
        scheduler, e.g. the spider's example phase); False for any other error."""
        if isinstance(exc, REDIS_DOWN):
            self.lost(exc)
            return True
        return False

    def _join(self, strategy: str, topic: Topic | None = None) -> str | None:
        """Tag the crawl id with ``strategy`` and ``topic`` (the first worker's win); the refusal
        when the crawl was started with another strategy, or another topic (name, language, words
        and β: one crawl's counts, labels and models cannot judge pages by two topics)."""
        mine = "" if topic is None else _topic_tag(topic)
        joined, started, theirs = load_script(self.r, "crawl_join.lua")(keys=[self.keys["meta"]], args=[strategy, mine])
        if joined:
            return None
        if started != strategy:
            return (f"crawl id {self.crawl_id!r} in Redis was started with strategy {started!r}, "
                    f"not {strategy!r} (set TOPICCRAWL_CRAWL_ID to start another crawl)")
        return (f"crawl id {self.crawl_id!r} in Redis "
                f"{judged_difference(json.loads(theirs), json.loads(mine), 'this worker')}"
                " (set TOPICCRAWL_CRAWL_ID to start another crawl)")

    #: the finish reason of a refused worker (``redis_lost`` once Redis is gone)
    refusal = "redis_refused"
    lost_redis = False

    def lost(self, exc: Exception) -> None:
        """Redis is gone: one error line, nothing more asked of Redis, the worker closes at its
        next idle with finish reason ``redis_lost`` (exit status 1). Its counted pages are in its
        feed; its leases expire and go back to the queue for the workers started when Redis is back."""
        if self.lost_redis:
            return
        self.lost_redis = True
        self.refusal = "redis_lost"
        self.refused = (f"lost Redis at {redact(self.tc.config.redis_url)} ({str(exc).splitlines()[0][:160]}): "
                        "this worker stops; the pages it counted are in its feed, and the crawl goes on when "
                        "workers are started again with Redis back")
        logger.error("%s", self.refused)
        self.stats.set_value("topiccrawl/redis/lost", True)
        self._stop_renewal()
        # requests held here (the example pages, retries) are not handed out any more: their spider
        # hears they were dropped, so a wait for the examples ends and the worker stops when idle
        held, self.local = getattr(self, "local", []), []
        for request in held:
            self.crawler.signals.send_catch_log(signals.request_dropped, request=request, spider=self.spider)
        wake_engine(self.crawler, 0.0)

    def _held(self) -> tuple[dict, object]:
        """This worker's leases (member -> what it leases) and what renews them (``renew(members)``)."""
        raise NotImplementedError

    @_guarded()
    def _renew(self) -> None:
        """Renew this worker's leases (the renewal loop); a lease another worker reclaimed is lost."""
        held, owner = self._held()
        if held:
            kept = owner.renew(held)
            if kept < len(held):
                self.stats.inc_value("topiccrawl/redis/leases_lost", len(held) - kept)
        self._global_stats()

    def _start_renewal(self) -> None:
        self._renewal = task.LoopingCall(self._renew)
        self._renewal.start(max(self.tc.config.lease_seconds / 3, 0.1), now=False)

    def _stop_renewal(self) -> None:
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()

    def _wait_for_others(self, leased: int, what: str) -> None:
        """Idle while other workers hold ``leased`` leases (their pages may add work): raise
        DontCloseSpider for at most ``TOPICCRAWL_IDLE_TIMEOUT`` seconds, then let the worker close."""
        now = time.monotonic()
        self._idle_since = self._idle_since or now
        if now - self._idle_since < self.tc.config.idle_timeout:
            raise DontCloseSpider
        logger.warning("stopped waiting after %g s (TOPICCRAWL_IDLE_TIMEOUT): other workers still hold %d %s",
                       self.tc.config.idle_timeout, leased, what)


class RedisScheduler(RedisWorker, TopicScheduler):
    #: buffered requests that trigger a flush (one push script call of at most this many)
    BATCH = 256

    def __init__(self, crawler, client, jobdir, stats, down: Exception | None = None) -> None:
        tc = TopicCrawl.for_crawler(crawler)
        cfg = tc.config
        self.down = down
        self.crawl_id = cfg.crawl_id or crawler.spider.name
        self.keys = crawl_keys(self.crawl_id)
        df = RedisDupeFilter(client, self.keys["dupefilter"], crawler.request_fingerprinter, stats,
                             crawler.settings.getbool("DUPEFILTER_DEBUG"))
        self.r = client
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.refused: str | None = None
        lease = {"lease_seconds": cfg.lease_seconds, "budget": cfg.max_pages, "worker": self.worker}
        try:
            if down is not None:  # Redis gone already: no claim (stopped in open())
                raise down
            # the page scores fed to the shared model and association: workers must agree on them too
            # and on what the semantic prior's `auto` resolved to (each process resolves it itself)
            shared = {"holder_score": cfg.holder_score, "association_score": cfg.association_score,
                      "semantic": tc.semantic_resolution}
            # the link labels' classifier (absent when off: older crawls join; TOPICCRAWL_CLASSIFIER_REPORT_C
            # makes a second classifier too, the one that reports, each worker's own)
            if tc.steer_focus is not None and cfg.classifier_steer_share:
                shared["classifier_steer_share"] = cfg.classifier_steer_share
            # and its C (absent at the default, so that crawls begun before the setting join)
            if tc.focus is not None and cfg.classifier_c != TopicCrawlConfig.classifier_c:
                shared["classifier_c"] = cfg.classifier_c
            frontier = make_redis_frontier(client, self.keys, cfg.strategy, strategy_options(crawler.settings, cfg.strategy),
                                           tc.is_truly_relevant, shared=shared, **lease)
        except (ConfigError, FrontierError) as exc:  # e.g. a WL option the Redis store lacks: refused in open()
            self.refused = str(exc)
            frontier = RedisFrontier(client, self.keys, "bfs", **lease)
        except (*REDIS_DOWN, RedisStoreError) as exc:  # gone (before, or as `learned` claimed its options)
            self.down = exc
            frontier = RedisFrontier(client, self.keys, "bfs", **lease)
        super().__init__(crawler, df, jobdir, stats, frontier=frontier)
        self.leases: dict[str, Request] = {}  # member -> request, for this worker's leases
        self.local: list[Request] = []  # retries and redirects of leased requests (same lease), LOCAL_META requests
        self.buffer: list[tuple[Request, Link, list]] = []  # (request, link, push entry) to flush
        self.responding: dict[str, str] = {}  # page URL -> member until its item is counted
        self._renewal: task.LoopingCall | None = None
        self._idle_since: float | None = None
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    # -- BaseScheduler ----------------------------------------------------------------------------
    def open(self, spider):
        self._open_or_lost(spider)
        return self.df.open()

    def _open(self) -> None:
        spider = self.spider
        if not self.refused:
            mismatch = self._join(self.frontier.name, self.tc.topic)
            if getattr(spider, "topiccrawl_queue", None) != "frontier":
                self.refused = f"TOPICCRAWL_STORE=redis supports the focused and discovery spiders only, not {spider.name!r}"
            else:
                self.refused = mismatch
        if self.refused:
            logger.error("%s", self.refused)
            self.frontier.unclaim()  # its claim must not keep a lone worker's crawl from a withdraw
            return
        self.tc.use_shared_store(self, SharedLinkGraph(self.r, self.keys["graph"]))
        if self.jobdir:
            logger.info("JOBDIR is not used for the frontier: TOPICCRAWL_STORE=redis keeps it in Redis")
        s = self.frontier.status()
        self.stats.set_value("topiccrawl/redis/crawl_id", self.crawl_id)
        self.stats.set_value("topiccrawl/resumed_queue", s["queued"])
        logger.info("worker %s joined crawl %r at %s: %d queued, %d leased, %d pages counted",
                    self.worker, self.crawl_id, redact(self.tc.config.redis_url), s["queued"], s["leased"], s["dp"])
        self.joined = True
        self._start_renewal()

    @_guarded()
    def publish_stats(self) -> None:
        if not self.refused:
            super().publish_stats()

    def close(self, reason: str):
        keep_feeds(self.crawler, reason)
        self._stop_renewal()
        try:
            self._close(reason)
        except REDIS_DOWN as exc:  # gone during the close: said once, the rest skipped
            self.lost(exc)
        return self.df.close(reason)

    def _close(self, reason: str) -> None:
        # stopped before its examples' verdict (no words from them, or Ctrl-C while they were fetched):
        # a lone worker's claimed options would refuse the next worker's, though nothing was crawled
        early = reason in (NO_TOPIC_WORDS, NO_TRUTH_PAGES) or getattr(self.spider, "stopped_in_examples", False)
        if early and self.joined and not self.refused and self.frontier.withdraw():
            logger.info("crawl %r withdrawn from Redis: it stopped before its examples' verdict, counted no page "
                        "and had no other worker, so the next worker starts it afresh", self.crawl_id)
            return
        if not self.refused:
            self.flush()
            released = self.frontier.release(self.leases)
            self.leases.clear()
            self.frontier.leave()
            self.stats.set_value("topiccrawl/redis/released_on_close", released)
            s = self.frontier.status()
            self._global_stats()
            self.stats.set_value("topiccrawl/frontier_size", s["queued"])
            if reason == "finished" and not self.budget_spent and not s["queued"] and not s["leased"]:
                self.stats.set_value("topiccrawl/frontier_exhausted", True)
                logger.warning("frontier ran dry after %d pages (all workers; budget %s): no queued link is left",
                               s["dp"], self.tc.config.max_pages or "unlimited")

    @_guarded(False)
    def has_pending_requests(self) -> bool:
        self.flush()
        last = self.frontier.last
        return not self.refused and (bool(self.local) or (last["queued"] > 0 and not last["blocked"]))

    @_guarded(False)
    def enqueue_request(self, request) -> bool:
        """Buffer ``request`` for the next :meth:`flush` and return True, with no round trip.

        The duplicate check happens at the flush, so a duplicate is also answered True here; the
        flush logs and counts it like an immediate check (``dupefilter/filtered``,
        DUPEFILTER_DEBUG) but Scrapy's ``request_dropped`` signal is NOT sent for it (the engine
        sends that signal only for a False answer, which would cost a round trip per request).
        Retries and redirects of a request this worker leases are checked at once (they are
        rare, and a redirect to a page already seen settles the lease)."""
        if self.refused:
            return False
        if request.meta.get(LOCAL_META):  # this worker's example pages: never another worker's
            self.local.append(request)
            return True
        meta = request.meta.get(META_KEY) or {}
        lease = meta.get("lease")
        if lease in self.leases:  # a retry or redirect of a leased request keeps its lease
            if not request.dont_filter and self.df.request_seen(request):
                self.df.log(request, self.spider)
                self.finish(lease, "duplicate")  # a redirect to a page already seen: this lease is done
                return False
            self.local.append(request)
            return True
        if lease is not None:  # a stale copy of a settled request: a new entry
            request.meta[META_KEY] = {k: v for k, v in meta.items() if k not in ("lease", "seq")}
        link = self._link(request)
        link.payload = encode(request, self.spider, link)
        fingerprint = "" if request.dont_filter else self.df.fingerprint(request)
        if request.meta.get("is_start_request") and self.frontier.ordered:
            entry = self.frontier.first_entry(link, fingerprint)  # seeds first, whenever yielded
        else:
            entry = self.frontier.entry(link, fingerprint)
            if self.dispatch is not None:
                self.dispatch.child(meta.get("parent"), self.frontier.value(link))
        self.buffer.append((request, link, entry))
        if len(self.buffer) >= self.BATCH:
            self.flush()
        return True

    def flush(self) -> None:
        """Push the buffered requests in one round trip; log the duplicates found there."""
        if not self.buffer:
            return
        batch, self.buffer = self.buffer, []
        answers = self.frontier.push_many([(link, entry) for _, link, entry in batch])
        for (request, _, _), answer in zip(batch, answers):
            if answer is None:
                self.df.log(request, self.spider)
        self.stats.inc_value("scheduler/enqueued", sum(answer is not None for answer in answers))

    @_guarded(None)
    def next_request(self):
        if self.refused:
            return None
        if self.local:
            self.stats.inc_value("scheduler/dequeued")
            return self.local.pop(0)
        if getattr(self.spider, "awaiting_examples", False):  # no shared page before the examples' verdict
            return None
        self.flush()
        if self.dispatch is not None and self.frontier.ordered and self._patient_now() and not self._patient_release():
            return None
        link = self.frontier.pop()
        self._reclaimed(self.frontier.last["reclaimed"])
        if link is None:
            return None
        member = self.frontier.popped if self.frontier.ordered else self.frontier.member(link)
        if self.dispatch is not None:
            self.dispatch.started(link.url, self.frontier.member_value(member), urlsplit(link.url).hostname or "",
                                  time.monotonic())
        request = decode(link.payload, self.spider, link)
        request.meta[META_KEY] = {**(request.meta.get(META_KEY) or {}), "seq": link.seq, "lease": member}
        lease = _Lease(self, member, request.callback or default_callback(self.spider), request.errback)
        request.callback, request.errback = lease.callback, lease.errback
        self.leases[member] = request
        self.stats.inc_value("scheduler/dequeued")
        self.stats.set_value("topiccrawl/frontier_size", self.frontier.last["queued"])
        return request

    @_guarded(0)
    def __len__(self) -> int:
        self.flush()
        return len(self.local) + self.frontier.last["queued"]

    def _patient_release(self) -> bool:
        """Patient dispatch against this worker's leased pages (one peek at the shared head)."""
        if not self.dispatch.inflight:
            return True
        head = self.frontier.peek_head()
        if head is None:
            return True
        now = time.monotonic()
        if self.dispatch.decide(head[0], urlsplit(head[1]).hostname or "", now):
            return True
        self._wake(self.dispatch.wait_left(now) + 0.001)
        return False

    def _settled(self, member: str) -> Request | None:
        """Forget this worker's lease of ``member``: the request it leased, or None."""
        request = self.leases.pop(member, None)
        if request is not None and self.dispatch is not None:
            self.dispatch.finished(request.url)
        return request

    @_guarded(None)
    def requeue(self, request) -> None:
        """A page fetched after the global budget was spent: back to the queue (for a resume)."""
        member = (request.meta.get(META_KEY) or {}).get("lease")
        if self._settled(member) is not None:
            self.flush()
            self.frontier.release([member])
            self.stats.inc_value("topiccrawl/requeued_over_budget")

    # -- leases -----------------------------------------------------------------------------------
    @property
    def budget_spent(self) -> bool:
        """The global DP budget (all workers) is spent, as of the last Redis answer."""
        budget = self.tc.config.max_pages
        return bool(budget) and self.frontier.last["dp"] >= budget

    @property
    def not_counted(self) -> str | None:
        """Why the last page :meth:`count` answered False for was not counted (None: the budget)."""
        return "not counted: Redis was lost (this worker stops)" if self.lost_redis else self._not_counted

    _not_counted: str | None = None

    @_guarded(False)
    def count(self, item) -> bool:
        """Count a page in the global DP and settle its lease (``TopicCrawl.record``); False when
        the budget is spent (the lease goes back to the queue) or another worker counted it
        (:attr:`not_counted` says which)."""
        adapter = ItemAdapter(item)
        url = adapter["url"]
        member = self.responding.pop(url, None)
        if member not in self.leases:
            self._not_counted = "not counted: this worker no longer holds its lease (it expired, or went back to the queue)"
            return False
        lp = adapter["relevance"] >= self.tc.topic.beta
        self.flush()  # the page's links reach Redis before its lease ends
        dp = self.frontier.count(member, lp, self.tc.is_truly_relevant(url))
        if dp == -1:
            self._not_counted = None
            self.requeue(self.leases[member])
            return False
        self._settled(member)
        if dp == -2:  # a re-delivered lease that another worker counted first
            self._not_counted = "not counted: another worker counted this page first"
            self.stats.inc_value("topiccrawl/redis/duplicate_fetch")
            return False
        return True

    @_guarded(None)
    def finish(self, member: str, outcome: str) -> None:
        if self._settled(member) is not None:
            self.flush()
            if self.frontier.finish(member, outcome) == -2:
                self.stats.inc_value("topiccrawl/redis/duplicate_fetch")

    def _held(self) -> tuple[dict, object]:
        return self.leases, self.frontier

    def _reclaimed(self, n: int) -> None:
        if n:
            self.stats.inc_value("topiccrawl/redis/lease_expired", n)
            logger.info("%d expired leases of other workers returned to the queue", n)

    def _global_stats(self) -> None:
        for key, value in self.frontier.counters().items():
            self.stats.set_value(f"topiccrawl/global/{key}", value)
        for key, value in self.frontier.stats().items():  # e.g. wl/lnf of the shared sampler
            self.stats.set_value(f"topiccrawl/{key}", value)
        self._publish_dispatch()  # this worker's own holds

    def _idle(self, spider) -> None:
        if self.refused:
            raise CloseSpider(self.refusal)
        try:
            self._idle_checks()
        except REDIS_DOWN as exc:
            self.lost(exc)
            raise CloseSpider(self.refusal) from None

    def _idle_checks(self) -> None:
        self.flush()
        if self.leases:  # nothing of ours is in flight any more: these can never settle
            logger.warning("%d leases ended without an outcome (e.g. %s); marked done", len(self.leases),
                           ", ".join(r.url for r in list(self.leases.values())[:3]))
            for member in list(self.leases):
                self.finish(member, "lost")
        self.responding.clear()
        s = self.frontier.status()
        self._reclaimed(s["reclaimed"])
        budget = self.tc.config.max_pages
        if budget and s["dp"] >= budget:
            raise CloseSpider("topiccrawl_max_pages")
        if s["queued"] and not (budget and s["dp"] + s["leased"] >= budget):
            self._idle_since = None
            raise DontCloseSpider
        if s["leased"]:
            self._wait_for_others(s["leased"], "leases")
