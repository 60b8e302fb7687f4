"""DWDBRM discovery spiders: ``scrapy crawl dwdbrm`` and one spider per discovery operator.

``dwdbrm`` plays all four operators — keyword search (KS), related search (RS), forward crawl
(FC), backward crawl (BC) — as arms of a UCB1 bandit; ``keyword_search``, ``related_search``,
``forward`` and ``backward`` run one operator alone. All share the TopicScheduler, which keeps
the :class:`~topiccrawl.discovery.controller.DiscoveryController` (and saves it with JOBDIR). An iteration
ends when its requests are drained (``spider_idle``); the controller then ranks the results,
rewards the operator and plans the next iteration. Search-API calls are ordinary Scrapy requests
(retries, politeness, stats, the offline web's proxy).

Spider arguments: ``topic``, ``seeds`` (comma-separated URLs, or ``truth:N`` on an offline web:
N truly relevant pages standing in for the user's representative examples), ``background`` (a
file of URLs for the rankers' negatives; offline default: 200 pages sampled from the served web),
``backend`` (``local`` or ``searxng``), ``search_url`` (the backend's base URL, as for the
``sitefinder`` spider; ``backend_url`` is its deprecated alias), ``k`` (top-k, default 10), ``pages``
(pageNumberCondition, default 5000), ``reward`` (``paper`` or ``disco``), ``alpha`` (eq. 8,
default 0.2), ``rankers`` (comma-separated, default ``nb,lr,ocsvm,cosine,jaccard``; ``bsets`` =
DISCO's Bayesian Sets), ``combination`` (``position`` = eq. 8, or ``score``: normalised scores).
"""

from __future__ import annotations

import json
import random
import warnings
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.defer import deferred_from_coro

from topiccrawl.crawl.feeds import writes_nothing
from topiccrawl.crawl.runtime import TopicCrawl, html_page
from topiccrawl.discovery.bandit import REWARDS
from topiccrawl.discovery.controller import DiscoveryController
from topiccrawl.discovery.pages import OPERATORS, DiscoveredPage, DWDBRMError
from topiccrawl.discovery.planner import PlannedRequest
from topiccrawl.discovery.rankers import DEFAULT_RANKERS, CombinedFunctionRank
from topiccrawl.discovery.search import SEARCH_CALL, SearchBackendError, make_backend

BACKGROUND_SAMPLE = 200


def _search_url(search_url: str | None, backend_url: str | None) -> str | None:
    """The search backend's URL from ``search_url`` or its deprecated alias ``backend_url``."""
    if search_url is not None and backend_url is not None and search_url != backend_url:
        raise DWDBRMError("give the search backend's URL once: -a search_url=URL (backend_url is its deprecated alias)")
    return search_url if search_url is not None else backend_url


def _float(value, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise DWDBRMError(f"spider argument {name}={value!r} must be a number") from None


@dataclass
class DiscoveryItem:
    """One discovered page, emitted when its iteration ends (so its rank is known)."""

    url: str
    title: str = ""
    operator: str = ""
    iteration: int = 0
    rank: int = 0
    score: float = 0.0
    relevance: float = 0.0
    language: str = ""
    fetched_at: str = ""


class DiscoverySpider(scrapy.Spider):
    name = "dwdbrm"
    #: which queue the crawl needs; the add-on (topiccrawl.crawl.addon) picks the scheduler by it
    topiccrawl_queue = "discovery"
    #: -a seeds or the topic's seeds are required (``scrapy crawl`` refuses a crawl without, exit 2)
    topiccrawl_seeds = "required"
    operators: tuple[str, ...] = OPERATORS
    custom_settings = {
        "TOPICCRAWL_TOPIC": "房产",
        "TOPICCRAWL_WEB": "generated:zh-realestate",
        "TOPICCRAWL_STRATEGY": "bfs",
        "TOPICCRAWL_MAX_PAGES": 0,  # the discovery loop stops itself at `pages`
    }

    def __init__(self, *args, seeds: str | None = None, background: str | None = None,
                 backend: str = "local", search_url: str | None = None, k: int | str = 10,
                 pages: int | str = 5000, reward: str = "paper", alpha: float | str = 0.2,
                 rankers: str = ",".join(DEFAULT_RANKERS), combination: str = "position",
                 backend_url: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if backend_url is not None:
            warnings.warn("spider argument backend_url is deprecated: use search_url", DeprecationWarning, stacklevel=2)
            self.logger.warning("spider argument backend_url is deprecated: use -a search_url=URL")
        self.seed_arg = seeds
        self.background_arg = background
        self._flushed = False  # the pages of the iteration running when Redis went are out
        self.backend_name = backend
        self.backend_url = _search_url(search_url, backend_url)
        self.k = int(k)
        self.page_limit = int(pages)
        self.reward = reward
        self.alpha = float(alpha)
        self.rankers = tuple(r.strip() for r in rankers.split(",") if r.strip())
        self.combination = combination
        self._meta: dict[str, dict] = {}  # url -> relevance, title, language, fetched_at

    @classmethod
    def searches(cls, spargs: dict, settings) -> bool:
        """Whether the crawl calls the search backend: an operator that searches (KS, RS, BC; not FC)."""
        return any(op in ("KS", "RS", "BC") for op in cls.operators)

    @staticmethod
    def check_arguments(backend: str = "local", search_url: str | None = None, k="10", pages="5000",
                        reward: str = "paper", background: str | None = None, alpha="0.2",
                        rankers: str = ",".join(DEFAULT_RANKERS), combination: str = "position",
                        backend_url: str | None = None, **_ignored) -> None:
        """Raise a one-line user error for a bad spider argument (called by ``scrapy crawl``)."""
        make_backend(backend, _search_url(search_url, backend_url))
        CombinedFunctionRank(rankers=[r.strip() for r in rankers.split(",") if r.strip()],
                             alpha=_float(alpha, "alpha"), combination=combination)._check()
        if reward not in REWARDS:
            raise DWDBRMError(f"spider argument reward={reward!r}: expected one of {', '.join(REWARDS)}")
        for name, value in (("k", k), ("pages", pages)):
            if not str(value).isdigit() or int(value) < 1:
                raise DWDBRMError(f"spider argument {name}={value!r} must be a positive integer")
        if background and not Path(background).is_file():
            raise DWDBRMError(f"spider argument background={background!r}: file not found")

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(spider.spider_closed, signal=signals.spider_closed)
        return spider

    @property
    def tc(self) -> TopicCrawl:
        return TopicCrawl.for_crawler(self.crawler)

    # -- start --------------------------------------------------------------------------------
    async def start(self):
        scheduler = self.crawler.engine.scheduler
        backend = make_backend(self.backend_name, self.backend_url)
        self.ctl = DiscoveryController(self.tc.topic, self.operators, backend, k=self.k, alpha=self.alpha,
                                       page_limit=self.page_limit, reward=self.reward,
                                       rankers=self.rankers, combination=self.combination)
        scheduler.discovery = self.ctl
        if scheduler.discovery_state is not None:  # JOBDIR resume
            self.ctl.load_state(scheduler.discovery_state)
            self.logger.info("resumed discovery at iteration %d with %d results", self.ctl.iteration, len(self.ctl.results))
            return
        seeds = self.tc.seed_arg(self.seed_arg) if self.seed_arg else list(self.tc.topic.seeds)
        if not seeds:
            self.logger.error("no seed pages: pass -a seeds=URL,URL (or truth:N on an offline web) or add seeds to the topic")
            return
        for url in seeds:
            yield scrapy.Request(url, callback=self.parse_seed, dont_filter=True)
        for url in self._background_urls(set(seeds)):
            yield scrapy.Request(url, callback=self.parse_background, dont_filter=True)

    def _background_urls(self, exclude: set[str]) -> list[str]:
        if self.background_arg:
            lines = Path(self.background_arg).read_text(encoding="utf-8").splitlines()
            return [l.strip() for l in lines if l.strip() and not l.startswith("#")]
        if self.tc.corpus is None:
            return []
        pool = [u for u in self.tc.corpus.search_sample(5000) if u not in exclude]
        return random.Random(1).sample(pool, min(BACKGROUND_SAMPLE, len(pool)))

    # -- callbacks ----------------------------------------------------------------------------
    def _page(self, response) -> DiscoveredPage | None:
        if not html_page(response):
            self.crawler.stats.inc_value("topiccrawl/non_html")
            return None
        ex, relevance = self.tc.read_page(response)
        self._meta[response.url] = {
            "relevance": round(relevance, 6), "title": ex.title[:300],
            "language": ex.language, "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        return DiscoveredPage.from_extracted(response.url, ex)

    def parse_seed(self, response):
        page = self._page(response)
        if page is not None:
            self.ctl.add_seed(page)

    def parse_background(self, response):
        page = self._page(response)
        if page is not None:
            self.ctl.add_background(page)

    def parse_search(self, response):
        planned = PlannedRequest(**response.meta["planned"])
        try:
            results = self.ctl.backend.parse(response.body)
        except SearchBackendError as exc:
            self.crawler.stats.inc_value("topiccrawl/dwdbrm/search_errors")
            self.logger.error("search backend answer unusable for %s: %s", planned.source, exc)
            return
        self.crawler.stats.inc_value("topiccrawl/dwdbrm/search_results", len(results))
        for p in self.ctl.follow(planned, results):
            yield self._request(p)

    def parse_page(self, response):
        planned = PlannedRequest(**response.meta["planned"])
        page = self._page(response)
        if page is None or not self.ctl.add_result(page):
            return
        if planned.role == "hub":
            for p in self.ctl.expand_hub(page):
                yield self._request(p)

    def search_failed(self, failure):
        self.crawler.stats.inc_value("topiccrawl/dwdbrm/search_errors")
        self.logger.error("search backend unreachable (%s): %s", failure.request.url, failure.getErrorMessage())

    def _request(self, p: PlannedRequest) -> scrapy.Request:
        if p.role == "search":
            return scrapy.Request(p.url, callback=self.parse_search, errback=self.search_failed,
                                  meta={"planned": asdict(p), **SEARCH_CALL}, dont_filter=True)
        return scrapy.Request(p.url, callback=self.parse_page, meta={"planned": asdict(p)})

    # -- iterations -----------------------------------------------------------------------------
    def spider_idle(self, spider) -> None:
        if getattr(self, "ctl", None) is None:
            return
        scheduler = self.crawler.engine.scheduler
        if getattr(scheduler, "lost_redis", False) and not self._flushed:
            # Redis gone: the pages this iteration found go out, unrewarded; the scheduler then closes
            self._flushed = True
            emitted = self.ctl.flush()
            if emitted:
                self._emit(emitted)
                raise DontCloseSpider
        if getattr(scheduler, "refused", None):  # a Redis worker refused, or that lost Redis: it closes the crawl
            return
        if not self.ctl.finished:
            try:
                emitted, planned = self.ctl.end_iteration()
            except Exception as exc:  # the shared bandit or page count on Redis: Redis gone
                down = getattr(scheduler, "redis_down", None)
                if down is None or not down(exc):
                    raise
                self.spider_idle(spider)  # its pages go out, then the scheduler closes the crawl
                return
            self._emit(emitted)
            for p in planned:
                self.crawler.engine.crawl(self._request(p))
            if self.ctl.finished:
                self.logger.info("discovery finished: %s", self.ctl.finished)
            if planned or emitted:  # let the last items through the pipelines before closing
                raise DontCloseSpider
        # an empty plan always sets `finished`; the reason is the same whether the last
        # iteration emitted pages or not (another worker may have taken them all)
        self.crawler.stats.set_value("topiccrawl/dwdbrm/finished", self.ctl.finished)
        raise CloseSpider("discovery_finished")

    def _emit(self, pages: list[DiscoveredPage]) -> None:
        for page in pages:
            ranked = self.ctl.ranking.position(page.url)
            entry = self.ctl.ranking[ranked - 1] if ranked else None
            meta = self._meta.pop(page.url, {})
            item = DiscoveryItem(url=page.url, operator=page.operator, iteration=page.iteration,
                                 rank=entry.rank if entry else 0, score=round(entry.score, 6) if entry else 0.0, **meta)
            deferred_from_coro(self.crawler.engine.scraper.start_itemproc_async(item, response=None))

    # -- report ---------------------------------------------------------------------------------
    def spider_closed(self, spider, reason) -> None:
        ctl = getattr(self, "ctl", None)
        if ctl is None or writes_nothing(self.crawler, reason):  # refused: an earlier run's files stay as they were
            return
        stats = self.crawler.stats
        for op, values in ctl.operator_stats().items():
            for key, value in values.items():
                stats.set_value(f"topiccrawl/dwdbrm/op/{op}/{key}", value)
        out = self.tc.output_dir
        out.mkdir(parents=True, exist_ok=True)
        with (out / "ranked.jsonl").open("w", encoding="utf-8") as fh:
            for row in ctl.ranked_rows():
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        with (out / "iterations.jsonl").open("w", encoding="utf-8") as fh:
            for row in ctl.log_records():
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        stats.set_value("topiccrawl/dwdbrm/over_limit", ctl.over_limit)
        report = {"operators": ctl.operator_stats(), "dropped": ctl.bandit.dropped, "finished": ctl.finished,
                  "over_limit": ctl.over_limit}
        if self.tc.ground_truth and self.tc.topic.labels:
            is_rel = self.tc.is_truly_relevant
            report["ranking"] = ctl.ranking_quality(is_rel)
            report["curve"] = ctl.curves(is_rel)
            report["segments"] = ctl.harvest_segments(report["curve"])
            for ranker, values in report["ranking"].items():
                for key, value in values.items():
                    stats.set_value(f"topiccrawl/ranking/{ranker}/{key}", value)
            curve = report["curve"]
            if curve:
                stats.set_value("topiccrawl/dwdbrm/relevant_sites", curve[-1][2])
        (out / "discovery.json").write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")


class KeywordSearchSpider(DiscoverySpider):
    name = "keyword_search"
    operators = ("KS",)


class RelatedSearchSpider(DiscoverySpider):
    name = "related_search"
    operators = ("RS",)


class ForwardSpider(DiscoverySpider):
    name = "forward"
    operators = ("FC",)


class BackwardSpider(DiscoverySpider):
    name = "backward"
    operators = ("BC",)
