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

from scrapy import Request
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.job import job_dir
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import request_from_dict

from topiccrawl.strategies.simple import Frontier, Link, make_frontier
from topiccrawl.crawl.middlewares import TRAP_META
from topiccrawl.crawl.runtime import TopicCrawl, registered_domain

logger = logging.getLogger(__name__)

STATE_FILE = "topiccrawl.state"
META_KEY = "topiccrawl"

#: keys of ``meta[META_KEY]`` a packed request keeps; score, depth and potential live in its Link
_PACKED_KEYS = ("score", "depth", "potential", "parent", "anchor")
#: other meta keys a packed request may carry: Scrapy's depth and the trap guard's chain length
_PACKED_META = ("depth", TRAP_META)
_ABSENT = object()
_META_OK = frozenset({META_KEY, *_PACKED_META})
_PLAIN_META = frozenset({META_KEY, "depth"})
_TOPIC_OK = frozenset({*_PACKED_KEYS, "seq"})
_BITS = {key: 1 << i for i, key in enumerate(_PACKED_KEYS)}


#: the shape of packed requests — (callback name, meta extras, keys present, Referer flag): a
#: crawl has few, so one tuple per shape is shared by every queued request of that shape
_SHAPES: dict[tuple, tuple] = {}
_MAX_SHAPES = 4096


def pack(request: Request, spider) -> tuple | Request:
    """A queued request in a fraction of its memory: a Scrapy Request with its meta dicts and
    Headers costs ~1.2–1.6 kB, this ``(shape, parent, anchor)`` tuple 64 bytes (+ the anchor as
    UTF-8 bytes; a whole queued URL, strings and fingerprint included, is measured in
    docs/benchmarks.md, "Scale"). Only the shape the project's spiders yield is packed — a GET to a
    spider method, meta holding only ``topiccrawl`` (the keys above, a text anchor) and the keys of
    ``_PACKED_META``, at most a Referer header; anything else stays a Request. :func:`unpack`
    rebuilds an equal request."""
    if (type(request) is not Request or request.method != "GET" or request.body or request.cookies
            or request.cb_kwargs or request.flags or request.priority or request.dont_filter
            or request.errback is not None or request.encoding != "utf-8"):
        return request
    callback = request.callback
    name = getattr(callback, "__name__", None)
    if callback is not None and (name is None or getattr(spider, name, None) != callback):
        return request
    headers = request.headers
    referer = dict.get(headers, b"Referer")  # Headers keeps normalised keys: skip its normalisation
    if len(headers) > (referer is not None) or (referer is not None and len(referer) != 1):
        return request
    meta = request.meta
    topic = meta.get(META_KEY)
    if not meta.keys() <= _META_OK or not isinstance(topic, dict) or not topic.keys() <= _TOPIC_OK:
        return request
    anchor = topic.get("anchor", _ABSENT)
    if type(anchor) is str:
        anchor = anchor.encode()
    elif anchor is not _ABSENT:
        return request
    parent = topic.get("parent", _ABSENT)
    if referer is not None:
        referer = referer[0]
        if isinstance(parent, str) and referer == parent.encode():
            referer = True  # the usual case: the Referer is the parent page (shared string)
    present = 0
    for key in topic:
        present |= _BITS.get(key, 0)
    plain = meta.keys() <= _PLAIN_META  # the common case: one value, no tuple
    extra = meta.get("depth", _ABSENT) if plain else tuple(meta.get(k, _ABSENT) for k in _PACKED_META)
    shape = (name, extra, present, referer)
    if referer is True or referer is None:  # hashable, and the shapes are few
        shape = _SHAPES.get(shape) or (_SHAPES.setdefault(shape, shape) if len(_SHAPES) < _MAX_SHAPES else shape)
    return (shape, parent, anchor)


def unpack(link: Link, spider) -> Request:
    """The Request of a link whose payload :func:`pack` packed (a Request is returned as is)."""
    payload = link.payload
    if not isinstance(payload, tuple):
        return payload
    (name, extra, present, referer), parent, anchor = payload
    if anchor is not _ABSENT:
        anchor = anchor.decode()
    values = (link.score, link.depth, link.potential, parent, anchor)
    meta = {META_KEY: {key: values[i] for i, key in enumerate(_PACKED_KEYS) if present >> i & 1}}
    for key, value in zip(_PACKED_META, extra if isinstance(extra, tuple) else (extra,)):
        if value is not _ABSENT:
            meta[key] = value
    request = Request(link.url, callback=getattr(spider, name) if name else None, meta=meta)
    if referer is not None:  # Headers is a dict of normalised keys -> value lists: what pack() read
        dict.__setitem__(request.headers, b"Referer", [parent.encode() if referer is True else referer])
    return request


class TopicScheduler(BaseScheduler):
    def __init__(self, crawler, dupefilter, jobdir: str | None, stats) -> None:
        self.crawler = crawler
        self.df = dupefilter
        self.jobdir = jobdir
        self.stats = stats
        self.tc = TopicCrawl.for_crawler(crawler)
        self.tc.scheduler = self
        options = {k[len("TOPICCRAWL_"):].lower(): v for k, v in crawler.settings.items() if k.startswith("TOPICCRAWL_")}
        options.update(vars(self.tc.config))
        self.frontier: Frontier = make_frontier(self.tc.config.strategy, self.tc.is_truly_relevant, options)
        self.spider = None
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
        if crawler.settings.get("TOPICCRAWL_STORE") == "redis" and cls is TopicScheduler:
            from topiccrawl.redis.discovery import redis_scheduler  # TOPICCRAWL_STORE=redis

            return redis_scheduler(crawler)
        dupefilter = build_from_crawler(load_object(crawler.settings["DUPEFILTER_CLASS"]), crawler)
        return cls(crawler, dupefilter, job_dir(crawler.settings), crawler.stats)

    # -- BaseScheduler ----------------------------------------------------------------------------
    def open(self, spider):
        self.spider = spider
        self._restore()
        return self.df.open()

    def close(self, reason: str):
        self.publish_stats()
        report = getattr(self.frontier, "write_report", None)
        if report is not None and self.tc.config.plot_enabled:
            out = self.tc.output_dir
            out.mkdir(parents=True, exist_ok=True)
            report(out)
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
        link = self._link(request, getattr(self.frontier, "link_type", Link))
        link.payload = pack(request, self.spider)
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
        link.payload = request = unpack(link, self.spider)
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
        stats = getattr(self.frontier, "stats", None)
        if stats is not None:
            for key, value in stats().items():
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
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy 2.19 raises before the engine exists (benchmarks, tests)
            return
        if engine is None:
            return
        live = engine.downloader.active
        scraping = engine.scraper.slot.active if engine.scraper.slot is not None else set()
        self.inflight = {r: l for r, l in self.inflight.items() if r in live or r in scraping}

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
            link.payload = unpack(link, self.spider).to_dict(spider=self.spider)
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
            link.payload = pack(request_from_dict(link.payload, spider=self.spider), self.spider)
        self.frontier.load_state(data["frontier"])
        self.chosen = data["chosen"]
        self.discovery_state = data.get("discovery")
        self.tc.load_state(data["crawl"])
        self.stats.set_value("topiccrawl/resumed_queue", len(self.frontier))
        logger.info("resumed %d queued requests and the crawl state from %s", len(self.frontier), path)
