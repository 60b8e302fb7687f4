"""TopicScheduler: Scrapy's scheduler interface in front of a pluggable frontier strategy.

``SCHEDULER = "topiccrawl.crawl.scheduler.TopicScheduler"``. The scheduler filters duplicates with
Scrapy's configured ``DUPEFILTER_CLASS`` (which persists its fingerprints in JOBDIR), turns each
request into a :class:`~topiccrawl.strategies.simple.Link` scored by R(l) (``request.meta["topiccrawl"]``,
set by the spiders), and asks the strategy for the next one. Politeness (per-slot concurrency,
DOWNLOAD_DELAY, AutoThrottle) stays with Scrapy's downloader, as with the default scheduler.

JOBDIR (:mod:`topiccrawl.crawl.jobdir`): the queued requests, the strategy's order, the
:class:`~topiccrawl.crawl.runtime.TopicCrawl` state (document frequencies, link graph, metrics) and
the duplicate filter's fingerprints are snapshotted atomically to ``JOBDIR/topiccrawl.state`` at
start, every ``TOPICCRAWL_CHECKPOINT_INTERVAL`` seconds (30) and on close; in between, a journal
records each link queued, request handed out, page counted and request finished. ``open`` restores
the snapshot and replays the journal: after a clean stop the crawl continues with the identical
frontier and scores; after a kill -9 no queued link is lost and at most the requests that were in
flight are fetched again (the learning state is the snapshot's, at most one interval old). The
frontier and the chosen list are wrapped to journal their pushes and pops
(:class:`~topiccrawl.crawl.jobdir.JournaledFrontier`). ``JOBDIR/topiccrawl.job`` names the spider,
topic and web: a JOBDIR of another crawl is refused.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from urllib.parse import urlsplit

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.job import job_dir
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet import task

from topiccrawl.crawl import jobdir as jd
from topiccrawl.crawl.codec import RequestPacker
from topiccrawl.crawl.engine import live_requests, start_pending, wake_engine
from topiccrawl.crawl.feeds import NO_PAGES, keep_feeds, writes_nothing
from topiccrawl.crawl.meta import EXAMPLE_META, META_KEY
from topiccrawl.crawl.runtime import TopicCrawl, checks_sites, registered_domain
from topiccrawl.crawl.settings import build_frontier, page_links_mode
from topiccrawl.strategies.base import Frontier, Link
from topiccrawl.strategies.dispatch import PatientDispatch

logger = logging.getLogger(__name__)

STATE_FILE = jd.STATE_FILE

#: pages of patient dispatch at the start of a ``learned`` crawl with words only, under ``auto``
#: (a choice, not the default: docs/learned.md, "The LibreOffice help, and a check on its development set")
AUTO_PATIENT_PAGES = 100


def dispatch_mode(config, has_examples: bool) -> tuple[str, int]:
    """``TOPICCRAWL_DISPATCH`` resolved: ``("eager", 0)`` or ``("patient", pages)``, patient until
    ``pages`` pages are counted (0: the whole crawl). ``auto`` is patient for the first
    :data:`AUTO_PATIENT_PAGES` pages (or ``TOPICCRAWL_DISPATCH_PATIENT_PAGES``) of a ``learned``
    crawl whose topic has no example pages on the memory store, eager otherwise (docs/learned.md,
    "Patient only at the start"; the Redis store's learned queue cannot hold back yet)."""
    if config.dispatch == "auto":
        if config.strategy == "learned" and not has_examples and config.store != "redis":
            return "patient", config.dispatch_patient_pages or AUTO_PATIENT_PAGES
        return "eager", 0
    return config.dispatch, config.dispatch_patient_pages if config.dispatch == "patient" else 0


def make_dispatch(config, mode: str = "patient") -> PatientDispatch | None:
    """The dispatch policy of a crawl's settings for a resolved ``mode``: None for ``eager``."""
    if mode != "patient":
        return None
    return PatientDispatch(config.dispatch_margin, config.dispatch_max_wait, config.dispatch_scope_resolved,
                           rule=config.dispatch_rule, p=config.dispatch_p)


#: a page's count record waits for its item at most this long (seconds) before it is written anyway
PENDING_SECONDS = 5.0


class TopicScheduler(BaseScheduler):
    """The memory scheduler; the Redis schedulers (``topiccrawl.redis``) subclass it with their own
    frontier and duplicate filter, chosen by the add-on (:mod:`topiccrawl.crawl.addon`)."""

    #: the JOBDIR write that failed (:meth:`_jobdir_failed`); the crawl stops
    _jobdir_error: OSError | None = None
    _closing = False

    def __init__(self, crawler, dupefilter, jobdir: str | None, stats, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        self.df = dupefilter
        self.jobdir = jobdir
        self.stats = stats
        self.tc = TopicCrawl.for_crawler(crawler)
        if frontier is None:
            frontier = build_frontier(crawler.settings, self.tc.config.strategy, self.tc.is_truly_relevant,
                                      self.tc.truth_paths)
        self.frontier: Frontier = frontier
        self.spider = None
        self.packer = RequestPacker()
        #: requests handed to the engine and not yet through the downloader and the spider: they
        #: count against the DP budget, and are re-queued on close so a resume loses none of them
        self.inflight: dict[object, Link] = {}
        #: requests already chosen by the strategy but not counted when the crawl stopped; a
        #: resumed crawl fetches them first, exactly where the uninterrupted crawl fetched them
        self.chosen: list[Link] = []
        self._pops = 0
        #: ``scheduler/enqueued`` and ``scheduler/dequeued`` not yet in the stats: Scrapy 2.19's
        #: ``inc_value`` costs ~1.7 µs (a deprecation wrapper), so they go in with publish_stats
        self._enqueued = self._dequeued = 0
        #: the DWDBRM controller of a discovery crawl (set by the discovery spiders); its state is
        #: saved with JOBDIR, and ``discovery_state`` holds a restored one until a spider takes it
        self.discovery = None
        self.discovery_state: dict | None = None
        #: harvest-aware dispatch (``TOPICCRAWL_DISPATCH``, resolved), None when eager; patient
        #: only until ``patient_pages`` pages are counted (0: the whole crawl)
        has_examples = self.tc.has_examples()
        mode, self.patient_pages = dispatch_mode(self.tc.config, has_examples)
        #: how a page's links are queued (TOPICCRAWL_DISPATCH_PAGE_LINKS resolved): fixed for the crawl
        self.tc.page_links = page_links_mode(self.tc.config, has_examples, self.tc.topic.language)
        self.stats.set_value("topiccrawl/dispatch/page_links", self.tc.page_links)
        self.dispatch: PatientDispatch | None = make_dispatch(self.tc.config, mode)
        #: start requests go before every queued link (focused spiders; set in ``open``)
        self.seeds_first = False
        self._last_start = 0.0
        #: ``TOPICCRAWL_DISPATCH_SEEDS = "answered"``: links wait for the start requests handed out
        self._await_seeds = self.tc.config.dispatch_seeds == "answered"
        self._last_start_out = 0.0  # when the last start request was handed out (monotonic seconds)
        self._wake_due = 0.0  # when the engine is already asked to come back (monotonic seconds)

    @classmethod
    def from_crawler(cls, crawler):
        dupefilter = build_from_crawler(load_object(crawler.settings["DUPEFILTER_CLASS"]), crawler)
        return cls(crawler, dupefilter, job_dir(crawler.settings), crawler.stats)

    # -- BaseScheduler ----------------------------------------------------------------------------
    def open(self, spider):
        self.spider = spider
        self.packer.spider = spider
        self.seeds_first = getattr(spider, "topiccrawl_queue", "frontier") == "frontier"
        self._restore()
        if self._journal is not None:  # connected after the feed exporter and FeedFlush (extensions)
            for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
                self.crawler.signals.connect(self._item_through, signal=signal)
        return self.df.open()

    def _item_through(self, item) -> None:
        """An item left the pipelines (exported and flushed, dropped, or failed): the journal
        writes its page's ``count`` record now (:mod:`topiccrawl.crawl.jobdir`)."""
        if self._journal is not None and self._journal.pending:
            url = ItemAdapter(item).get("url")
            if isinstance(url, str):
                self._journal.through(url)

    def close(self, reason: str):
        keep_feeds(self.crawler, reason)
        self.publish_stats()
        if self.tc.config.plot_enabled and not writes_nothing(self.crawler, reason):
            out = self.tc.output_dir
            out.mkdir(parents=True, exist_ok=True)
            self.frontier.write_report(out)
        self._closing = True
        if self.jobdir and reason != NO_PAGES:
            try:
                self._save()
            except OSError as exc:  # the state of the last checkpoint and its journal stand
                self._jobdir_failed(exc)
        # the site finder has no DP budget: its queue's end is its end
        if reason == "finished" and not self.tc.budget_spent and not checks_sites(self.spider):
            self.stats.set_value("topiccrawl/frontier_exhausted", True)
            logger.warning(
                "frontier ran dry after %d pages (budget %s): no queued link is left%s",
                self.tc.metrics.dp,
                self.tc.config.max_pages or "unlimited",
                f" with R(l) >= {self.tc.config.link_threshold}" if self.tc.config.link_threshold else "",
            )
        closed = self.df.close(reason)
        if self.jobdir and reason == NO_PAGES and getattr(self, "_jobdir_ok", False):
            self._forget_jobdir()
        return closed

    def _forget_jobdir(self) -> None:
        """A crawl that counted no page (``no_pages``) keeps nothing to resume: its seeds' fingerprints
        would filter them out of the next run, which then stopped the same way whatever the network
        did. The next run with this JOBDIR starts from its seeds again."""
        self._stop_checkpoints()
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        for name in (STATE_FILE, jd.JOURNAL_FILE, "requests.seen"):
            Path(self.jobdir, name).unlink(missing_ok=True)
        logger.info("JOBDIR %s: no page to resume from; the next run with it starts from the seeds again", self.jobdir)

    def has_pending_requests(self) -> bool:
        return len(self) > 0 and not self.tc.budget_spent

    def enqueue_request(self, request) -> bool:
        queued = self._enqueue(request)
        if self.tc.links_open:  # a page's links held (DISPATCH_PAGE_LINKS together, after-seeds): its last?
            meta = request.meta.get(META_KEY)
            if meta and meta.get("ends_page"):
                self.tc.close_links(meta.get("parent"))
        return queued

    def _enqueue(self, request) -> bool:
        if not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        if self.seeds_first and (request.meta.get("is_start_request") or EXAMPLE_META in request.meta):
            # a start request goes before every queued link, whenever start() yields it (an example
            # page's too, however it came: the hold before the examples' verdict looks for it there)
            self.chosen.append(self._link(request))
            self._last_start = time.monotonic()
            self._enqueued += 1
            return True
        link = self._link(request, self.frontier.link_type)
        link.payload = self.packer.pack(request)
        self.frontier.push(link)
        if self.dispatch is not None:
            self.dispatch.child((request.meta.get(META_KEY) or {}).get("parent"), self.frontier.value(link))
        self._enqueued += 1
        return True

    @staticmethod
    def _link(request, link_type: type[Link] = Link) -> Link:
        """The frontier entry of a request, a ``link_type`` (a frontier's own subclass of Link, such
        as WL's, which carries its queue position). A re-queued request keeps its insertion number, and
        so does a redirect (its meta is copied from the request it replaces): it takes the place
        of a request that already left the frontier, and the site finder recognises it by it."""
        meta = request.meta.get(META_KEY) or {}
        return link_type(
            url=request.url,
            score=float(meta.get("score", 0.0)),
            depth=int(meta.get("depth", request.meta.get("depth", 0))),
            domain=registered_domain(request.url),
            potential=bool(meta.get("potential", False)),
            payload=request,
            seq=int(meta.get("seq", -1)),
        )

    def requeue(self, request) -> None:
        """Keep a request that was fetched but not counted (the DP budget was spent while it was
        in flight): a resumed crawl fetches it first, as the uninterrupted crawl would have."""
        self.chosen.append(self._link(request))
        self.stats.inc_value("topiccrawl/requeued_over_budget")

    def next_request(self):
        # hand out no more requests than the DP budget can still count
        budget = self.tc.config.max_pages
        if budget and self.tc.metrics.dp + len(self.inflight) >= budget:
            self._prune_inflight()
            if self.tc.metrics.dp + len(self.inflight) >= budget:
                return None
        value = None
        if self._jobdir_error is not None:  # the crawl stops: nothing more that no journal would hold
            return None
        if getattr(self.spider, "awaiting_examples", False):
            # no page before the examples' verdict (the topic's words may come from them): a
            # resume's restored requests in flight and queued links wait, the examples go
            i = next((i for i, l in enumerate(self.chosen) if EXAMPLE_META in getattr(l.payload, "meta", ())), None)
            if i is None:
                return None
            link = self.chosen.pop(i)
            self._last_start_out = time.monotonic()
        elif self.chosen:
            link = self.chosen.pop(0)
            self._last_start_out = time.monotonic()
        elif self._links_held() or self._seeds_awaited() or self._page_links_held():
            return None
        else:
            if self.dispatch is not None and self._patient_now():
                head = self.frontier.peek()
                if head is not None:
                    value = head[0]
                    if not self._patient_release(value, head[1].url):
                        return None
            link = self.frontier.pop()
        if link is None:
            return None
        link.payload = request = self.packer.unpack(link)
        if self.dispatch is not None:
            self.dispatch.started(request.url, value, urlsplit(request.url).hostname or "", time.monotonic())
        self._dequeued += 1
        self._pops += 1
        if self._pops % 100 == 0:
            self.publish_stats()
            self._prune_inflight()  # before this request joins: the engine's sets do not hold it yet
        self.inflight[request] = link
        request.meta.setdefault(META_KEY, {})["seq"] = link.seq  # for requeue()
        return link.payload

    def _links_held(self) -> bool:
        """Seeds first: while ``start()`` is still being read, queued links wait (at most
        ``TOPICCRAWL_DISPATCH_MAX_WAIT`` seconds after the last start request, so a slow start()
        cannot starve the crawl)."""
        if not (self.seeds_first and start_pending(self.crawler) and self._last_start):
            return False
        return self._within_wait(self._last_start)

    def _seeds_awaited(self) -> bool:
        """``TOPICCRAWL_DISPATCH_SEEDS = "answered"``: queued links wait while a start request handed
        out is not answered yet (its response parsed, or it failed), at most
        ``TOPICCRAWL_DISPATCH_MAX_WAIT`` seconds after the last one was handed out; once none is
        left, never again (docs/learned.md, "The seeds' answers before any link")."""
        if not (self._await_seeds and self.seeds_first and self._last_start_out):
            return False
        self._prune_inflight()
        if any(r.meta.get("is_start_request") for r in self.inflight) and self._within_wait(self._last_start_out):
            return True
        self._await_seeds = False
        return False

    def _page_links_held(self) -> bool:
        """``TOPICCRAWL_DISPATCH_PAGE_LINKS = "together"`` or ``"after-seeds"``: queued links wait while a parsed page's
        links are still reaching the scheduler (:meth:`TopicCrawl.open_links`), each page at most
        ``TOPICCRAWL_DISPATCH_MAX_WAIT`` seconds; a page given up on is counted in
        ``topiccrawl/dispatch/page_link_timeouts``."""
        pages = self.tc.links_open
        if not pages:
            return False
        now, wait = time.monotonic(), self.tc.config.dispatch_max_wait
        for url in [u for u, since in pages.items() if now - since >= wait]:
            del pages[url]
            self.stats.inc_value("topiccrawl/dispatch/page_link_timeouts")
        return bool(pages) and self._within_wait(min(pages.values()))

    def _within_wait(self, since: float) -> bool:
        """True while ``since`` (monotonic seconds) is less than ``TOPICCRAWL_DISPATCH_MAX_WAIT``
        seconds ago; the engine is then asked to come back when that wait ends."""
        left = self.tc.config.dispatch_max_wait - (time.monotonic() - since)
        if left <= 0:
            return False
        self._wake(left)
        return True

    def _patient_now(self) -> bool:
        """Patient dispatch decides (``TOPICCRAWL_DISPATCH_PATIENT_PAGES``: only until that many pages
        are counted, by this process). Once they are, its record goes into the stats a last time
        and its bookkeeping stops: the crawl is eager from then on."""
        if not self.patient_pages or self.tc.metrics.dp < self.patient_pages:
            return True
        self._publish_dispatch()
        self.dispatch = None
        return False

    def _publish_dispatch(self) -> None:
        """Patient dispatch's record (holds, seconds held, timeouts) into the stats."""
        if self.dispatch is not None:
            for key, value in self.dispatch.stats.as_dict().items():
                self.stats.set_value(f"topiccrawl/{key}", value)

    def _patient_release(self, value: float, url: str) -> bool:
        """Patient dispatch: forget the pages done since the last call, then decide on the queue
        head (``value``, ``url``); a hold asks the engine to come back when it times out."""
        dispatch = self.dispatch
        if dispatch.inflight:
            self._prune_inflight()
        now = time.monotonic()
        if dispatch.decide(value, urlsplit(url).hostname or "", now):
            return True
        self._wake(dispatch.wait_left(now) + 0.001)
        return False

    def _wake(self, delay: float) -> None:
        """Ask the engine to come back in ``delay`` seconds, unless it is asked already by then
        (a hold answers many calls: one timer, not one per call)."""
        now = time.monotonic()
        if now < self._wake_due <= now + delay:
            return
        self._wake_due = now + delay
        wake_engine(self.crawler, delay)

    def publish_stats(self) -> None:
        """The frontier size and strategy-specific statistics (e.g. ``wl/lnf``) into the Scrapy
        stats; every 100 requests handed out, at each progress line and on close. The counts of
        enqueued and dequeued requests go in here too (``scheduler/enqueued``, ``/dequeued``)."""
        if self._enqueued or self._dequeued:
            self.stats.inc_value("scheduler/enqueued", self._enqueued)
            self.stats.inc_value("scheduler/dequeued", self._dequeued)
            self._enqueued = self._dequeued = 0
        self.stats.set_value("topiccrawl/frontier_size", len(self))
        self._publish_dispatch()
        for key, value in self.frontier.stats().items():
            self.stats.set_value(f"topiccrawl/{key}", value)

    def _prune_inflight(self) -> None:
        """Forget handed-out requests the engine is done with. A request is live while it is in
        the downloader (middlewares included) or its response is in the scraper (the sets that
        ``scrapy.utils.engine.get_engine_status`` reports). No signal covers every end: a request
        a downloader middleware ignores (robots.txt, a host outside the offline web, a private
        address) never sends ``request_left_downloader``, and counting it for ever would stop the
        crawl short of its budget with requests still queued."""
        if not self.inflight:
            return
        live = live_requests(self.crawler)
        if live is not None:
            if self.dispatch is not None:
                for request in self.inflight:
                    if request not in live:
                        self.dispatch.finished(request.url)
            self.inflight = {r: l for r, l in self.inflight.items() if r in live}

    def __len__(self) -> int:
        return len(self.frontier) + len(self.chosen)

    # -- JOBDIR (crash-safe: topiccrawl/crawl/jobdir.py) -----------------------------------------
    def _state_path(self) -> Path | None:
        return Path(self.jobdir) / STATE_FILE if self.jobdir else None

    def _journaling(self) -> bool:
        """A snapshot plus a journal: JOBDIR set, ``TOPICCRAWL_CHECKPOINT_INTERVAL`` > 0, a
        duplicate filter whose fingerprints the snapshot can hold (the project's) and a strategy
        whose state is its queue (not ``journaled = False``: the site finder's verdicts)."""
        return (bool(self.jobdir) and self.tc.config.checkpoint_interval > 0 and hasattr(self.df, "load_keys")
                and getattr(self.frontier, "journaled", True))

    def _save(self, final: bool = True) -> None:
        """Write the snapshot atomically (on close, ``final``, and every checkpoint interval), then
        start its journal. The links in flight are stored with the chosen ones: fetched first on
        resume unless the journal says they were done."""
        if not getattr(self, "_jobdir_ok", False):  # JOBDIR of another crawl (refused in open): untouched
            return
        started = time.monotonic()
        if self._journal is not None:
            if final:  # the items are through (or never will be): their pages are counted
                self._journal.through_all()
            self._journal.settle()
        self.publish_stats()
        self._prune_inflight()
        if final:
            self._stop_checkpoints()
            self.stats.set_value("topiccrawl/requeued_inflight", len(self.inflight))
        # a page counted while its request is still in the engine is done: never fetched again
        counted = self._journal.counted if self._journal is not None else ()
        inflight = [link for link in self.inflight.values() if jd.key(link) not in counted]
        shapes: dict = {}
        chosen = [jd.link_tuple(l, shapes, self.spider) for l in sorted([*self.chosen, *inflight], key=lambda l: l.seq)]
        state = dict(self.frontier.state())
        state["links"] = [jd.link_tuple(l, shapes, self.spider) for l in state["links"]]
        journaling = self._journaling()
        epoch = jd.new_epoch()
        data = {"format": 2, "epoch": epoch if journaling else None, "strategy": self.frontier.name,
                "frontier": state, "chosen": chosen, "inflight": [jd.key(l) for l in inflight],
                "skip": sorted(getattr(self.frontier, "skip", ())), "crawl": self.tc.state(),
                "discovery": self.discovery.state() if self.discovery is not None else None,
                "seen": self.df.keys() if hasattr(self.df, "keys") else None, "stats": jd.counters(self.stats),
                "resumes": self._resumes}
        path = self._state_path()
        jd.write_atomic(path, data)
        self._saved_at = time.monotonic()
        self._save_cost = self._saved_at - started
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        journal_path = Path(self.jobdir) / jd.JOURNAL_FILE
        if journaling and not final:
            self._journal = jd.Journal(journal_path, epoch, {jd.key(l) for l in inflight}, self.spider,
                                       lambda: live_requests(self.crawler), self._jobdir_failed)
            self.frontier.journal = self.chosen.journal = self._journal
            self.df.stop_file()
            Path(self.jobdir, "requests.seen").write_bytes(b"")  # the snapshot holds the fingerprints
        else:
            journal_path.unlink(missing_ok=True)
            for journaled in (self.frontier, self.chosen):
                if isinstance(journaled, (jd.JournaledFrontier, jd.JournaledChosen)):
                    journaled.journal = None
        if final:
            logger.info("saved %d queued requests and the crawl state to %s", len(state["links"]) + len(chosen), path)

    def _restore(self) -> None:
        """Check that JOBDIR belongs to this crawl, load its snapshot and replay its journal, then
        (crash-safe JOBDIR) write a fresh snapshot and start journaling."""
        self._journal = None
        self._jobdir_ok = False
        self._resumes = 0
        self._saved_at = time.monotonic()
        self._save_cost = 0.0
        self._checkpoints: task.LoopingCall | None = None
        if not self.jobdir:
            return
        identity = jd.check_jobdir(self.jobdir, self.spider.name, self.tc.config)
        path = self._state_path()
        skip: set = set()
        # read before the JOBDIR is taken as this crawl's: a snapshot that cannot be read is never
        # saved over at close (the command refuses it before the crawl; this is its second line)
        data = jd.read_state(path) if path.exists() else None
        jd.record_jobdir(self.jobdir, identity)
        self._jobdir_ok = True
        if data is not None:
            skip = self._load_snapshot(data, path)
        if not self._journaling():
            return
        self.frontier = jd.JournaledFrontier(self.frontier, skip=skip)
        self.chosen = jd.JournaledChosen(self.chosen)
        self._save(final=False)
        interval = self.tc.config.checkpoint_interval
        self._checkpoints = task.LoopingCall(self._checkpoint)
        self._checkpoints.start(min(interval, 0.5), now=False)

    def _load_snapshot(self, data: dict, path: Path) -> set:
        """Restore the snapshot ``data`` with its journal replayed; return the keys of the
        frontier's links to drop when the strategy reaches them."""
        if data["strategy"] != self.frontier.name:
            logger.warning(
                "JOBDIR state was written by strategy %r, resuming with %r: queued links re-ordered",
                data["strategy"], self.frontier.name,
            )
        records = jd.read_journal(Path(self.jobdir) / jd.JOURNAL_FILE, data["epoch"]) if data.get("epoch") else None
        replay = jd.Replay(records or [], data.get("inflight", ()))
        shapes: dict = {}

        def request(link):
            out = copy.copy(link)
            out.payload = jd.to_request(link, self.packer, self.spider, shapes)
            return out

        skip = set(map(tuple, data.get("skip", ())))
        inflight = replay.inflight()
        data["chosen"] = [jd.tuple_link(l) for l in data["chosen"]]
        data["frontier"]["links"] = [jd.tuple_link(l, self.frontier.link_type) for l in data["frontier"]["links"]]
        first = [request(l) for l in data["chosen"] if jd.key(l) not in replay.gone]
        chosen_keys = {jd.key(l) for l in data["chosen"]}
        for link in data["frontier"]["links"]:
            k = jd.key(link)
            if k in skip or k in chosen_keys:  # a pop of this key was the chosen copy's
                pass
            elif k in replay.gone:
                skip.add(k)
            elif k in inflight and inflight[k] is None:  # handed out from the frontier, not done
                skip.add(k)
                first.append(request(link))
            link.payload = jd.to_packed(link, self.packer, self.spider, shapes)
        first += [request(l) for l in inflight.values() if l is not None]
        first += [request(l) for l in replay.chosen.values()]
        first = list({jd.key(l): l for l in first}.values())  # each key once
        # the example phase of a crawl stopped before its examples' verdict: the spider asks for them
        # again, so these would be fetched twice and settle a wait that is not theirs
        first = [l for l in first if EXAMPLE_META not in l.payload.meta]
        pushed = sorted(replay.pushed.values(), key=lambda l: l.seq)
        seqs = [l.seq for l in (*pushed, *first)]
        if seqs and "next_seq" in data["frontier"]:
            data["frontier"]["next_seq"] = max(data["frontier"]["next_seq"], max(seqs) + 1)
        self.frontier.load_state(data["frontier"])
        self.frontier.forget_inflight([url for _, url in replay.gone])  # done after the snapshot
        for link in pushed:
            link.payload = jd.to_packed(link, self.packer, self.spider, shapes)
            self.frontier.push(link)
        self.chosen = sorted(first, key=lambda l: l.seq)
        self.discovery_state = data.get("discovery")
        self.tc.load_state(data["crawl"])
        counted = {row["url"] for row in self.tc.harvest_rows}
        for url, relevance in replay.counted:
            if url not in counted:  # a count the snapshot already holds
                counted.add(url)
                self.tc.replay_count(url, relevance)
        if data.get("seen") is not None:
            self.df.load_keys(data["seen"])
        for link in replay.requests:
            req = jd.to_request(link, self.packer, self.spider, shapes)
            if not req.dont_filter:
                self.df.request_seen(req)
        for name, value in (data.get("stats") or {}).items():
            if isinstance(value, str):
                self.stats.set_value(name, value)
            else:
                self.stats.inc_value(name, value)
        self._resumes = data.get("resumes", 0) + 1
        self.stats.set_value("topiccrawl/resumes", self._resumes)
        self.stats.set_value("topiccrawl/resumed_queue", len(self.frontier) - len(skip))
        self.stats.set_value("topiccrawl/resumed_inflight", len(inflight))
        logger.info("resumed %d queued requests and the crawl state from %s (%d pages counted; journal: %d links "
                    "queued, %d pages counted, %d requests in flight fetched again)",
                    len(self.frontier) - len(skip) + len(self.chosen), path, self.tc.metrics.dp, len(replay.pushed),
                    len(replay.counted), len(inflight))
        budget = self.tc.config.max_pages
        if budget and self.tc.metrics.dp >= budget:  # e.g. resumed with a smaller max_pages by mistake
            logger.warning("JOBDIR: %d pages are counted already, so the page budget (max_pages=%d) is spent and "
                           "the crawl stops at once; resume with a larger max_pages to go on",
                           self.tc.metrics.dp, budget)
        return skip

    def _checkpoint(self) -> None:
        """Every 0.5 s: write ``done`` for requests through the engine; a snapshot every
        ``TOPICCRAWL_CHECKPOINT_INTERVAL`` seconds, and at least ten times as long as the last one
        took (a large frontier: snapshots take at most a tenth of the crawl's time)."""
        if self._journal is None:
            return
        try:
            self._journal.settle()
            self._journal.through_all(older_than=PENDING_SECONDS)
            if self._journal.pending:  # a counted page's feed line is not written yet: next time
                return
            if time.monotonic() - self._saved_at >= max(self.tc.config.checkpoint_interval, 10 * self._save_cost):
                self._save(final=False)
        except OSError as exc:  # a full disk: the last snapshot and journal stay valid; the crawl stops
            self._saved_at = time.monotonic()
            self._jobdir_failed(exc)

    def _jobdir_failed(self, exc: OSError) -> None:
        """JOBDIR could not be written (a full disk): one line, and the crawl stops (finish reason
        ``jobdir_failed``, exit status 1) before any page goes unrecorded; what was written before
        stays a valid state to resume from once there is room. It went on, a checkpoint error every
        half second, and the requests handed out meanwhile were in no journal."""
        if self._jobdir_error is not None:
            return
        self._jobdir_error = exc
        logger.error("JOBDIR %s cannot be written (%s): the crawl stops; make room and run the same command to "
                     "resume from what it wrote before", self.jobdir, exc.strerror or exc)
        self.stats.set_value("topiccrawl/jobdir_error", str(exc))
        engine = self.crawler.engine
        if not self._closing and engine is not None and engine.spider is not None:
            deferred_from_coro(engine.close_spider_async(reason="jobdir_failed"))

    def _stop_checkpoints(self) -> None:
        if self._checkpoints is not None and self._checkpoints.running:
            self._checkpoints.stop()
        self._checkpoints = None
