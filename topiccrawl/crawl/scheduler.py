"""TopicScheduler: Scrapy's scheduler interface in front of a pluggable frontier strategy.

``SCHEDULER = "topiccrawl.crawl.scheduler.TopicScheduler"``. The scheduler filters duplicates with
Scrapy's configured ``DUPEFILTER_CLASS`` (which persists its fingerprints in JOBDIR), turns each
request into a :class:`~topiccrawl.strategies.simple.Link` scored by R(l) (``request.meta["topiccrawl"]``,
set by the spiders), and asks the strategy for the next one. Politeness (per-slot concurrency,
DOWNLOAD_DELAY, AutoThrottle) stays with Scrapy's downloader, as with the default scheduler.

JOBDIR: on close the queued requests (``request_to_dict``), the strategy's order and the
:class:`~topiccrawl.crawl.runtime.TopicCrawl` state (document frequencies, link graph, metrics) are
written to ``JOBDIR/topiccrawl.state``; ``open`` restores them, so a resumed crawl continues with
the identical frontier and scores.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.job import job_dir
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import request_from_dict

from topiccrawl.crawl.codec import RequestPacker
from topiccrawl.crawl.engine import live_requests
from topiccrawl.crawl.meta import META_KEY
from topiccrawl.crawl.runtime import TopicCrawl, registered_domain
from topiccrawl.crawl.settings import build_frontier
from topiccrawl.strategies.base import Frontier, Link

logger = logging.getLogger(__name__)

STATE_FILE = "topiccrawl.state"

class TopicScheduler(BaseScheduler):
    """The memory scheduler; the Redis schedulers (``topiccrawl.redis``) subclass it with their own
    frontier and duplicate filter, chosen by the add-on (:mod:`topiccrawl.crawl.addon`)."""

    def __init__(self, crawler, dupefilter, jobdir: str | None, stats, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        self.df = dupefilter
        self.jobdir = jobdir
        self.stats = stats
        self.tc = TopicCrawl.for_crawler(crawler)
        if frontier is None:
            frontier = build_frontier(crawler.settings, self.tc.config.strategy, self.tc.is_truly_relevant)
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

    @classmethod
    def from_crawler(cls, crawler):
        dupefilter = build_from_crawler(load_object(crawler.settings["DUPEFILTER_CLASS"]), crawler)
        return cls(crawler, dupefilter, job_dir(crawler.settings), crawler.stats)

    # -- BaseScheduler ----------------------------------------------------------------------------
    def open(self, spider):
        self.spider = spider
        self.packer.spider = spider
        self._restore()
        return self.df.open()

    def close(self, reason: str):
        self.publish_stats()
        if self.tc.config.plot_enabled:
            out = self.tc.output_dir
            out.mkdir(parents=True, exist_ok=True)
            self.frontier.write_report(out)
        if self.jobdir:
            self._save()
        if reason == "finished" and not self.tc.budget_spent:
            self.stats.set_value("topiccrawl/frontier_exhausted", True)
            logger.warning(
                "frontier ran dry after %d pages (budget %s): no queued link is left%s",
                self.tc.metrics.dp,
                self.tc.config.max_pages or "unlimited",
                f" with R(l) >= {self.tc.config.link_threshold}" if self.tc.config.link_threshold else "",
            )
        return self.df.close(reason)

    def has_pending_requests(self) -> bool:
        return len(self) > 0 and not self.tc.budget_spent

    def enqueue_request(self, request) -> bool:
        if not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        link = self._link(request, self.frontier.link_type)
        link.payload = self.packer.pack(request)
        self.frontier.push(link)
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
        link = self.chosen.pop(0) if self.chosen else self.frontier.pop()
        if link is None:
            return None
        link.payload = request = self.packer.unpack(link)
        self.inflight[request] = link
        request.meta.setdefault(META_KEY, {})["seq"] = link.seq  # for requeue()
        self._dequeued += 1
        self._pops += 1
        if self._pops % 100 == 0:
            self.publish_stats()
            self._prune_inflight()
        return link.payload

    def publish_stats(self) -> None:
        """The frontier size and strategy-specific statistics (e.g. ``wl/lnf``) into the Scrapy
        stats; every 100 requests handed out, at each progress line and on close. The counts of
        enqueued and dequeued requests go in here too (``scheduler/enqueued``, ``/dequeued``)."""
        if self._enqueued or self._dequeued:
            self.stats.inc_value("scheduler/enqueued", self._enqueued)
            self.stats.inc_value("scheduler/dequeued", self._dequeued)
            self._enqueued = self._dequeued = 0
        self.stats.set_value("topiccrawl/frontier_size", len(self))
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
            self.inflight = {r: l for r, l in self.inflight.items() if r in live}

    def __len__(self) -> int:
        return len(self.frontier) + len(self.chosen)

    # -- JOBDIR ---------------------------------------------------------------------------------
    def _state_path(self) -> Path | None:
        return Path(self.jobdir) / STATE_FILE if self.jobdir else None

    def _save(self) -> None:
        self._prune_inflight()
        self.stats.set_value("topiccrawl/requeued_inflight", len(self.inflight))
        chosen = sorted([*self.chosen, *self.inflight.values()], key=lambda l: l.seq)
        state = self.frontier.state()
        for link in [*state["links"], *chosen]:
            link.payload = self.packer.unpack(link).to_dict(spider=self.spider)
        data = {"strategy": self.frontier.name, "frontier": state, "chosen": chosen, "crawl": self.tc.state(),
                "discovery": self.discovery.state() if self.discovery is not None else None}
        path = self._state_path()
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        logger.info("saved %d queued requests and the crawl state to %s", len(state["links"]) + len(chosen), path)

    def _restore(self) -> None:
        path = self._state_path()
        if path is None or not path.exists():
            return
        with path.open("rb") as fh:
            data = pickle.load(fh)
        if data["strategy"] != self.frontier.name:
            logger.warning(
                "JOBDIR state was written by strategy %r, resuming with %r: queued links re-ordered",
                data["strategy"], self.frontier.name,
            )
        for link in data["chosen"]:
            link.payload = request_from_dict(link.payload, spider=self.spider)
        for link in data["frontier"]["links"]:
            link.payload = self.packer.pack(request_from_dict(link.payload, spider=self.spider))
        self.frontier.load_state(data["frontier"])
        self.chosen = data["chosen"]
        self.discovery_state = data.get("discovery")
        self.tc.load_state(data["crawl"])
        self.stats.set_value("topiccrawl/resumed_queue", len(self.frontier))
        logger.info("resumed %d queued requests and the crawl state from %s", len(self.frontier), path)
