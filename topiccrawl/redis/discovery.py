"""Discovery spiders (``dwdbrm``, ``keyword_search``, ...) on Redis: N workers, one discovery crawl.

The add-on (:mod:`topiccrawl.crawl.addon`) sets ``SCHEDULER`` to :class:`RedisDiscoveryScheduler`
for a spider whose ``topiccrawl_queue`` is ``"discovery"`` when ``TOPICCRAWL_STORE = "redis"``.

Every worker runs its own DWDBRM iterations (its own DiscoveryController: seeds, background,
results, ranking, planner): its requests carry callbacks and meta of that controller, so they stay
in the worker's in-memory queue, not in the shared leased frontier. What the workers share:

* duplicates: the crawl's fingerprint SET (:class:`~topiccrawl.redis.dupefilter.RedisDupeFilter`),
  so no page planned by an operator is fetched by two workers; seeds, background pages and
  search-API calls are ``dont_filter`` requests and every worker fetches its own (its rankers are
  fitted on them; they are not results);
* the UCB1 bandit (:class:`WorkerBandit` on :class:`~topiccrawl.redis.bandit.RedisBandit`): all
  workers choose operators by eq. 11 over the shared plays and rewards, as parallel players of
  one bandit; iterations.jsonl and discovery.json of a worker list its own plays;
* the page limit (``-a pages=N``): the results of all workers, ``HINCRBY`` on the field
  ``discovery_results`` of the crawl's ``stats`` hash. Once it reaches N no worker plans a new
  request; requests already planned finish, so the results of all workers stay below
  N + Σ_workers (pages found in the worker's last iteration) — the memory controller's overshoot,
  per worker.

The crawl is tagged ``strategy = discovery`` in its ``meta`` hash, so a focused worker cannot join
it by mistake and the other way round (one error line, finish reason ``redis_refused``).

Pause/resume: the shared state (bandit, page-limit counter, duplicates) stays in Redis; what is a
worker's own — its queue of planned requests, its controller (iteration, results, ranking) and its
own plays — is saved in its ``JOBDIR`` on close, as in one process. A worker restarted with the
same JOBDIR continues its iteration where it stopped and plays it as pending again
(:meth:`WorkerBandit.resume`); each worker needs its own JOBDIR.
"""

from __future__ import annotations

import logging

from scrapy import signals
from scrapy.exceptions import CloseSpider

from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.crawl.scheduler import TopicScheduler
from topiccrawl.crawl.settings import ConfigError
from topiccrawl.discovery.bandit import IterationRecord, UCB1Bandit
from topiccrawl.redis.bandit import RedisBandit
from topiccrawl.redis.connection import crawl_keys, redact
from topiccrawl.redis.dupefilter import RedisDupeFilter
from topiccrawl.redis.scheduler import RedisWorker, _guarded

logger = logging.getLogger(__name__)

#: the ``strategy`` a discovery crawl records in its ``meta`` hash
DISCOVERY = "discovery"
#: the field of the crawl's ``stats`` hash counting all workers' results
RESULTS_FIELD = "discovery_results"


class SharedCount:
    """A counter of all workers: one field of a Redis hash (``HINCRBY``). ``offline`` (Redis gone):
    the last value read, plus this worker's additions since."""

    def __init__(self, client, key: str, field: str) -> None:
        self.r, self.key, self.field = client, key, field
        self.offline = False
        self.last = 0

    def add(self, n: int = 1) -> int:
        self.last = self.last + n if self.offline else int(self.r.hincrby(self.key, self.field, n))
        return self.last

    def total(self) -> int:
        if not self.offline:
            self.last = int(self.r.hget(self.key, self.field) or 0)
        return self.last


class WorkerBandit(RedisBandit):
    """The crawl's shared UCB1 bandit as one worker plays it. ``select``, ``scores``, ``update``,
    ``active`` and ``dropped`` are the shared ones (all workers' plays and rewards); ``log``,
    ``plays``, ``totals`` and ``mean`` are this worker's own plays (its iterations.jsonl and
    discovery.json). A record's ``iteration`` is the shared play number.

    Pending plays: an operator a worker has chosen and not yet rewarded is counted in the bandit
    hash (``pending:<op>``); :meth:`select` counts pending plays as plays with the operator's
    mean reward. Without this, workers with the same statistics choose the same operator at the
    same time (at the start every worker would play KS first and fetch the same search answers).
    """

    def __init__(self, client, prefix: str, operators) -> None:
        super().__init__(client, prefix, operators)
        self.mine: list[IterationRecord] = []
        self.playing: str | None = None
        self._dropped: dict[str, str] = {}
        #: Redis gone (set by the scheduler): the worker's report and JOBDIR state at its close use
        #: what it knows (its own plays, the dropped operators last read), asking Redis nothing
        self.offline = False

    @property
    def dropped(self) -> dict[str, str]:
        """The shared dropped operators (the last ones read once offline)."""
        if not self.offline:
            self._dropped = super().dropped
        return dict(self._dropped)

    def state(self) -> dict:
        """As :meth:`RedisBandit.state`; offline, this worker's own plays (a JOBDIR resume reads
        only its records, and the play it was in, from the state)."""
        if not self.offline:
            return super().state()
        own = UCB1Bandit.from_state({"operators": list(self.operators), "log": [], "plays": self.plays,
                                     "totals": self.totals, "dropped": self.dropped})
        own.log = self.log
        return own.state()

    def select(self) -> str:
        """UCB1 (eq. 11) on the shared statistics plus the pending plays; choosing and counting
        the choice as pending is one optimistic transaction (WATCH/MULTI, retried on a race)."""
        from redis import WatchError

        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(self.key)
                    op = self._with_pending(pipe.hgetall(self.key)).select()
                    pipe.multi()
                    pipe.hincrby(self.key, f"pending:{op}", 1)
                    pipe.execute()
                    break
                except WatchError:
                    continue
        self.release()
        self.playing = op
        return op

    def _with_pending(self, h: dict[str, str]) -> UCB1Bandit:
        bandit = UCB1Bandit(self.operators)
        for op in self.operators:
            plays, total = int(h.get(f"plays:{op}", 0)), float(h.get(f"totals:{op}", 0.0))
            pending = int(h.get(f"pending:{op}", 0))
            bandit.plays[op] = plays + pending
            bandit.totals[op] = total + (total / plays * pending if plays else 0.0)
        bandit.dropped.update({op: h[f"dropped:{op}"] for op in self.operators if f"dropped:{op}" in h})
        return bandit

    def resume(self, log, playing: str | None) -> None:
        """Continue after a JOBDIR restart: this worker's own records back, and the play it was
        in the middle of (``playing``) pending again until its reward."""
        self.mine = list(log)
        if playing is not None and self.playing is None:
            self.r.hincrby(self.key, f"pending:{playing}", 1)
            self.playing = playing

    def release(self) -> None:
        """This worker's pending play is over (rewarded, or the worker stops)."""
        if self.playing is not None:
            self.r.hincrby(self.key, f"pending:{self.playing}", -1)
            self.playing = None

    def update(self, op, reward, seeds=(), new_pages=()) -> IterationRecord:
        record = super().update(op, reward, seeds, new_pages)
        self.mine.append(record)
        if op == self.playing:
            self.release()
        return record

    @property
    def log(self) -> list[IterationRecord]:
        return list(self.mine)

    @property
    def plays(self) -> dict[str, int]:
        return {op: sum(r.operator == op for r in self.mine) for op in self.operators}

    @property
    def totals(self) -> dict[str, float]:
        return {op: sum(r.reward for r in self.mine if r.operator == op) for op in self.operators}

    def mean(self, op: str) -> float:
        self._known(op)
        plays = self.plays[op]
        return self.totals[op] / plays if plays else 0.0


class RedisDiscoveryScheduler(RedisWorker, TopicScheduler):
    """The TopicScheduler of a discovery worker: its own in-memory queue, the crawl's shared
    dupefilter; the controller a spider hands it (``scheduler.discovery = ctl``) is switched to
    the shared bandit and the shared page-limit counter. Redis gone stops the worker as it stops
    a focused one (:meth:`RedisWorker.lost`: one error line, finish reason ``redis_lost``)."""

    def __init__(self, crawler, client, jobdir, stats, down: Exception | None = None) -> None:
        cfg = TopicCrawl.for_crawler(crawler).config
        self.crawl_id = cfg.crawl_id or crawler.spider.name
        self.keys = crawl_keys(self.crawl_id)
        self._ctl = None
        df = RedisDupeFilter(client, self.keys["dupefilter"], crawler.request_fingerprinter, stats,
                             crawler.settings.getbool("DUPEFILTER_DEBUG"))
        super().__init__(crawler, df, jobdir, stats)
        self.r = client
        self.down = down
        self.bandit: WorkerBandit | None = None
        self.results = SharedCount(client, self.keys["stats"], RESULTS_FIELD)
        self.refused: str | None = None
        self._renewal = None  # a discovery worker leases nothing
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    @property
    def discovery(self):
        return self._ctl

    @discovery.setter
    def discovery(self, ctl) -> None:
        self._ctl = ctl
        if ctl is None or self.bandit is None:
            return
        for op, why in ctl.bandit.dropped.items():  # the backend's limits, as the memory bandit has them
            self.bandit.drop(op, why)
        ctl.share(self.bandit, self.results)

    def open(self, spider):
        self._open_or_lost(spider)
        return super().open(spider)

    def _open(self) -> None:
        spider = self.spider
        self.r.hsetnx(self.keys["meta"], "strategy", DISCOVERY)
        started = self.r.hget(self.keys["meta"], "strategy")
        if started != DISCOVERY:
            self.refused = (f"crawl id {self.crawl_id!r} in Redis was started with strategy {started!r}, not as a "
                            f"discovery crawl (set TOPICCRAWL_CRAWL_ID to start another crawl)")
        else:
            try:
                self.bandit = WorkerBandit(self.r, f"topiccrawl:{self.crawl_id}:", spider.operators)
            except ConfigError as exc:  # e.g. `forward` joining a dwdbrm crawl
                self.refused = f"{exc} (spider {spider.name!r}; set TOPICCRAWL_CRAWL_ID to start another crawl)"
        if self.refused:
            logger.error("%s", self.refused)
        else:
            self.stats.set_value("topiccrawl/redis/crawl_id", self.crawl_id)
            logger.info("discovery worker joined crawl %r at %s: %d results, %d bandit plays so far",
                        self.crawl_id, redact(self.tc.config.redis_url), self.results.total(), self.bandit.n)
            self.joined = True

    def close(self, reason: str):
        if self.bandit is not None:
            self._shared_stats()
        return super().close(reason)

    @_guarded()
    def _shared_stats(self) -> None:
        """The shared bandit's figures and result count in this worker's stats at its close (left
        out once Redis is gone)."""
        self.bandit.release()
        shared = self.bandit.snapshot()
        for op in shared.operators:
            self.stats.set_value(f"topiccrawl/dwdbrm/shared/{op}/pulls", shared.plays[op])
            self.stats.set_value(f"topiccrawl/dwdbrm/shared/{op}/reward_mean", shared.mean(op))
        self.stats.set_value("topiccrawl/dwdbrm/shared/results", self.results.total())

    def _save(self, final: bool = True) -> None:
        if not self.joined:  # refused, or Redis lost before the join: a JOBDIR it resumed stays as it was
            return
        super()._save(final)

    def lost(self, exc: Exception) -> None:
        super().lost(exc)
        self.results.offline = True  # the worker's close and its last pages ask Redis nothing more
        if self.bandit is not None:
            self.bandit.offline = True

    def next_request(self):
        # refused, or Redis gone: its planned requests stay queued (saved in its JOBDIR)
        return None if self.refused else super().next_request()

    def has_pending_requests(self) -> bool:
        return not self.refused and super().has_pending_requests()

    @_guarded(False)
    def enqueue_request(self, request) -> bool:  # the shared duplicate filter asks Redis
        return not self.refused and super().enqueue_request(request)

    def _idle(self, spider) -> None:
        if self.refused:
            raise CloseSpider(self.refusal)
