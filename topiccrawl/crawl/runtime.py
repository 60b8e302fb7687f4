"""The per-crawl service shared by the scheduler, spiders, pipelines and the stats extension.

One :class:`TopicCrawl` exists per Scrapy crawler (``TopicCrawl.for_crawler(crawler)``). It holds
the parsed settings, the topic, the scorers (relevance, link graph + PageRank), the metrics, the
ground truth, and, in offline mode, the web lab it started. Its ``state()`` is what JOBDIR saves
next to the frontier so that a resumed crawl continues with identical scores.

Why links are scored here and not in an item pipeline: a link's priority R(l) must be known when
its request reaches the scheduler, and Scrapy hands requests to the scheduler independently of the
items of the same callback. So the spider calls :meth:`TopicCrawl.process_page`, which scores the
page and its links; item pipelines then add importance (PageRank) and record the statistics.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import tempfile
import time
import weakref
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import tldextract
from scrapy import signals
from scrapy.http import TextResponse
from scrapy.utils.defer import deferred_from_coro

from topiccrawl.crawl.engine import wake_engine
from topiccrawl.crawl.errors import ConfigError
from topiccrawl.crawl.items import PageItem
from topiccrawl.crawl.settings import (
    AUTO_ANCHOR_PAGES,
    TopicCrawlConfig,
    page_links_mode,
    parse_url_list,
    semantic_auto_off,
    topiccrawl_enabled,
)
from topiccrawl.learning.anchorjudge import context_words
from topiccrawl.learning.association import EXAMPLE_LINK, anchor_terms
from topiccrawl.learning.classifier import PageClassifier
from topiccrawl.learning.focus import RELIABLE_AUC, RELIABLE_C, TITLE_RANK_WEIGHTS, PageFocus, title_rank
from topiccrawl.learning.linkvalue import LinkFeatures, quick_terms, url_tokens
from topiccrawl.learning.semantic import (
    DEFAULT_MODEL,
    SemanticError,
    SemanticPrior,
    load_encoder,
    static_at_hand,
    topic_text,
)
from topiccrawl.learning.threads import limit_blas_threads
from topiccrawl.learning.vocabulary import Vocabulary, merge_columns
from topiccrawl.scoring.dmoz import TreeError
from topiccrawl.scoring.groundtruth import GroundTruth
from topiccrawl.scoring.importance import LinkGraph, PageRankCache
from topiccrawl.scoring.metrics import CrawlMetrics
from topiccrawl.scoring.relevance import RelevanceScorer
from topiccrawl.scoring.tdcs import scorer_from_state
from topiccrawl.scoring.text import Extracted, add_words, document_terms, extract, is_html, load_segmenter
from topiccrawl.scoring.topic import load_topic

logger = logging.getLogger(__name__)


def html_page(response) -> bool:
    """Whether a response is a page the crawl reads and counts: an HTML text response
    (:func:`~topiccrawl.scoring.text.is_html`); other responses are counted as ``topiccrawl/non_html``."""
    return isinstance(response, TextResponse) and is_html(response.body, response.headers.get(b"Content-Type"))


def raise_gc_threshold(threshold: int) -> int | None:
    """Let the garbage collector's young generation hold ``threshold`` objects before it is
    collected, for the whole process (``gc.set_threshold``'s first number; docs/settings.md,
    ``TOPICCRAWL_GC_THRESHOLD``). Returns the threshold before, or None when nothing changed:
    ``threshold`` 0, a threshold already as high, or the collector disabled."""
    current = gc.get_threshold()
    if threshold <= 0 or not gc.isenabled() or current[0] >= threshold:
        return None
    gc.set_threshold(threshold, *current[1:])
    return current[0]


#: tldextract with its bundled public-suffix snapshot: never downloads
_tld = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


#: ``scheme://host/`` with a plain lower-case host (no user, port, IPv6 brackets, query): the host
#: is the text between ``//`` and the next ``/``, without parsing the URL
_PLAIN_HOST = re.compile(r"[a-z][a-z0-9+.-]*://([a-z0-9.-]+)/")


def checks_sites(spider) -> bool:
    """A spider (or its class) that checks candidate sites (the site finder's ``topiccrawl_queue``):
    it counts no page, has no DP budget and ignores the topic."""
    return getattr(spider, "topiccrawl_queue", "frontier") == "sites"


def registered_domain(url_or_host: str) -> str:
    """``news.example.com.cn`` -> ``example.com.cn`` (the unit of region competition and sites)."""
    if "//" not in url_or_host:
        return _domain_of_host(url_or_host)
    plain = _PLAIN_HOST.match(url_or_host)
    host = plain.group(1) if plain is not None else urlsplit(url_or_host).hostname
    return _domain_of_host(host or url_or_host)


@lru_cache(maxsize=65536)
def _domain_of_host(host: str) -> str:
    """Memoised per host: the scheduler asks for every enqueued request."""
    ext = _tld(host)
    if ext.suffix:
        return ext.top_domain_under_public_suffix
    # no public suffix (``.test`` hosts of the offline web, IP addresses): keep the last two labels
    host = ".".join(x for x in (ext.subdomain, ext.domain) if x)
    return host if ext.domain.replace(".", "").isdigit() else ".".join(host.split(".")[-2:])


#: the environment variables older Scrapyd set to the id of the job it runs (``SCRAPY_JOB`` before
#: 1.4, ``SCRAPYD_JOB`` in 1.4); Scrapyd passes it as the spider argument ``_job`` in every version
SCRAPYD_JOB_ENV = ("SCRAPYD_JOB", "SCRAPY_JOB")


def scrapyd_job(job_arg: str | None = None) -> str | None:
    """The id of the Scrapyd job this crawl runs as: the spider argument ``_job`` Scrapyd passes,
    else the environment variable an older Scrapyd set; None outside Scrapyd."""
    if job_arg:
        return str(job_arg)
    return next((os.environ[v] for v in SCRAPYD_JOB_ENV if os.environ.get(v)), None)


def output_template(settings, job: str | None = None) -> str:
    """``TOPICCRAWL_OUTPUT_DIR``; under Scrapyd (``job``: :func:`scrapyd_job`) and left at its
    default, one folder per job, ``<default>/%(job)s``, so that two jobs of one spider keep their
    own outputs."""
    template = str(settings.get("TOPICCRAWL_OUTPUT_DIR") or TopicCrawlConfig.output_dir)
    priority = settings.getpriority("TOPICCRAWL_OUTPUT_DIR") if hasattr(settings, "getpriority") else None
    if job and not priority:  # unset, or the add-on's default
        template = os.path.join(template, "%(job)s")
    return template


def output_path(template: str, spider: str, started: datetime, job: str | None = None) -> Path:
    """``template`` with ``%(name)s`` (the spider), ``%(time)s`` (the start, UTC) and ``%(job)s``
    (``job``, Scrapyd's job id; the start time outside Scrapyd) filled in, made absolute. A one-line
    :class:`ConfigError` for another placeholder."""
    time = started.strftime("%Y%m%dT%H%M%S")
    try:
        path = template % {"name": spider, "time": time, "job": job or time}
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigError(f"TOPICCRAWL_OUTPUT_DIR={template!r}: bad placeholder ({exc}); "
                          "expected %(name)s, %(time)s or %(job)s") from None
    return Path(path).expanduser().absolute()


def check_output_dir(path: Path, what: str = "output directory") -> None:
    """Raise a one-line :class:`ConfigError` unless a file can be written in folder ``path``;
    folders created for the check are removed again (the crawl creates them when it writes)."""
    created: list[Path] = []
    try:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for folder in reversed(missing):
            folder.mkdir()
            created.append(folder)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(f"{what} {path} is not writable: {exc.strerror or exc}") from None
    finally:
        for folder in reversed(created):
            try:
                folder.rmdir()
            except OSError:
                pass


#: strategies whose crawls of a topic of words get the page classifier under TOPICCRAWL_CLASSIFIER=auto,
#: to report only: at 1,000 pages its mean P was nearer the true harvest rate than Accuracy (eq. 7)
#: on every corpus measured (docs/learned.md, "The page classifier's estimate for every strategy";
#: best-first's and wl's were not, on the Chinese corpora)
REPORTING_STRATEGIES = frozenset({"bfs"})

#: why a fetched page is not counted, the usual case (:meth:`TopicCrawl.record`; a shared store's
#: ``not_counted`` names its own reasons)
BUDGET_SPENT = "page budget spent (TOPICCRAWL_MAX_PAGES)"

#: the close reason of a crawl whose ``seeds=truth:N`` or ``examples=truth:N`` found no page the
#: topic's labels call relevant (a typo in a label, another web): exit status 2, stopped before its seeds
NO_TRUTH_PAGES = "no_truth_pages"

#: spider arguments that override the TOPICCRAWL_* setting of the same name
OVERRIDABLE = ("topic", "strategy", "max_pages", "link_threshold", "scorer", "topic_tree", "topic_node")


def make_topic_and_scorer(config: TopicCrawlConfig):
    """The topic and its relevance scorer: the topic's weighted words (VSM, WL paper eqs. 3–5), or
    a category node of a topic tree (``TOPICCRAWL_SCORER`` = tdcs, tdctkw or tdkw; the topic,
    its β and evaluation labels then come from the node, see docs/tdcs.md)."""
    if config.scorer == "vsm" and not config.topic_tree:
        topic = load_topic(config.topic)
        return topic, RelevanceScorer(topic, anchor_weight=config.anchor_weight)
    from topiccrawl.scoring.tdcs import SCORERS, load_tree, make_scorer, tree_topic

    if config.scorer not in SCORERS:
        raise TreeError(f"unknown scorer {config.scorer!r} (expected one of: {', '.join(SCORERS)})")
    if not config.topic_tree or not config.topic_node:
        raise TreeError(f"scorer {config.scorer!r} needs -a topic_tree=SPEC -a topic_node=NODE")
    topic = tree_topic(load_tree(config.topic_tree), config.topic_node)
    scorer = make_scorer(config.scorer, config.topic_tree, config.topic_node, config.tdcs_k, topic,
                         config.anchor_weight)
    return topic, scorer


@dataclass(slots=True)
class ScoredLink:
    url: str
    score: float
    anchor: str
    potential: bool = False


class TopicCrawl:
    _registry: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @classmethod
    def for_crawler(cls, crawler) -> TopicCrawl:
        inst = cls._registry.get(crawler)
        if inst is None:
            inst = cls._registry[crawler] = cls(crawler)
        return inst

    def __init__(self, crawler) -> None:
        self.crawler = crawler
        spider = crawler.spider
        overrides = {
            name: getattr(spider, name, None)
            for name in OVERRIDABLE
        }
        self.config = TopicCrawlConfig.from_settings(crawler.settings, overrides)
        # fewer collections of young objects: the crawl allocates many, few of them in cycles
        before = raise_gc_threshold(self.config.gc_threshold)
        if before is not None:
            logger.info("Garbage collection: a young generation of %d objects (TOPICCRAWL_GC_THRESHOLD; "
                        "Python's setting: %d)", self.config.gc_threshold, before)
        self.topic, self.scorer = make_topic_and_scorer(self.config)
        # set-up work belongs before the crawl: a page with one Chinese character (an English
        # article naming a Chinese city) would otherwise stall the crawl while jieba loads
        load_segmenter()
        # the models' products are small: more BLAS threads than one only spin (docs/learned.md)
        before = limit_blas_threads(self.config.blas_threads)
        if self.config.blas_threads and any(n != self.config.blas_threads for n in before.values()):
            logger.info("BLAS threads: %d (TOPICCRAWL_BLAS_THREADS; the libraries' default: %s)",
                        self.config.blas_threads, ", ".join(sorted({str(n) for n in before.values()})))
        #: TOPICCRAWL_SEMANTIC_ENABLED: the sentence encoder, loaded now so a missing package or model
        #: stops the crawl before it starts (auto: leaves the prior off); the prior itself (the
        #: topic's embedding) at the first page. The encoder and the terms of R(l) it enters, resolved:
        self.semantic_encoder, self.semantic_terms = self.config.semantic_encoder, self.config.semantic_terms
        self.semantic_anchor_weight = self.config.semantic_anchor_weight_resolved  # TOPICCRAWL_SEMANTIC_ANCHOR_WEIGHT
        #: TOPICCRAWL_SEMANTIC_ANCHOR_PAGES and _RESCORE, resolved (``auto`` may set them)
        self.semantic_anchor_pages = self.config.semantic_anchor_pages
        self.semantic_anchor_rescore = self.config.semantic_anchor_rescore
        #: TOPICCRAWL_SEMANTIC_HOLDER_PAGES: the page count where the holder term stops taking the prior (0: never)
        self.semantic_holder_pages = self.config.semantic_holder_pages
        self._encoder = self._semantic_encoder(self.has_examples())
        self.semantic: SemanticPrior | None = None
        #: TOPICCRAWL_CLASSIFIER_RANK, what ranks the pseudo-positives of a topic with words (reported as
        #: classifier/rank; docs/learned.md): auto is "semantic" with the prior on, else "title", except
        #: on a Chinese topic, where the title failed its check
        rank = self.config.classifier_rank
        if rank == "auto":
            if self._encoder is not None:
                rank = "semantic"
            else:
                rank = "relevance" if self.topic.language == "zh" else "title"
        self._rank_rule = rank
        self.graph = LinkGraph()
        #: per graph node: 1 once a request for it was handed to Scrapy (see _unseen)
        self._yielded = bytearray()
        self.pagerank = PageRankCache(self.graph, every=self.config.pagerank_every)
        self.harvest_rows: list[dict] = []
        #: URL -> the page's place in the page classifier's order, until the page is counted
        self._observed: dict[str, int] = {}
        #: TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE: URL -> the anchors' prior's part of its link's R(l),
        #: for the links scored under it, until it stops
        self._prior_parts: dict[str, float] = {}
        #: TOPICCRAWL_DISPATCH_PAGE_LINKS = "together" or "after-seeds": URL -> when its parsed page's links began to be
        #: queued, until the last of them reaches the scheduler (or the page is counted)
        self.links_open: dict[str, float] = {}
        #: TOPICCRAWL_DISPATCH_PAGE_LINKS resolved (reported as dispatch/page_links); the scheduler
        #: resolves it again knowing a command line's examples too
        self.page_links = page_links_mode(self.config, self.topic.has_examples, self.topic.language)
        self.started = datetime.now(timezone.utc)
        #: the page classifier (P(relevant | page)); on with ``TOPICCRAWL_CLASSIFIER=on``, or
        #: ``auto`` (:meth:`_classifier_wanted`)
        self.focus: PageFocus | None = None
        #: TOPICCRAWL_CLASSIFIER_STEER_SHARE: a second page classifier, looser, whose P steers the
        #: crawl while :attr:`focus` reports (None: :attr:`focus` does both)
        self.steer_focus: PageFocus | None = None
        if self._classifier_wanted(spider):
            self._make_foci()
        #: the frontier learns from pages (``observe_page``): the learned strategy
        self.learns = self.config.strategy == "learned"
        self._example_terms: list[list[str]] = []
        self._counter_terms: list[list[str]] = []
        self._background_terms: list[list[str]] = []
        #: the URLs the fetched example pages link to (a learning frontier with ``example_links``
        #: marks those pages and the links to them in its anchor association)
        self.example_links: set[str] = set()
        #: where the example pages came from (URLs, counter-examples, examples_dir; saved with JOBDIR,
        #: so that a resume given other examples says it keeps the first ones)
        self.example_sources: dict | None = None
        self.lab = None
        self.corpus = None
        self.ground_truth: GroundTruth | None = None
        #: the Redis scheduler when TOPICCRAWL_STORE=redis: global DP budget and counters
        #: (set once through :meth:`use_shared_store`)
        self.shared = None
        self._output_dir: Path | None = None
        logger.info("output directory: %s", self.output_dir)
        # the lab starts with the engine, not here: a spider built and never crawled leaves none running
        crawler.signals.connect(self._start_web, signal=signals.engine_started)
        self._load_ground_truth()
        self.metrics = CrawlMetrics(self.topic.beta, self.truth_labels, self.config.checkpoints)

    # -- offline web and ground truth ---------------------------------------------------------
    def _start_web(self):
        cfg = self.config
        if not cfg.offline or cfg.web_proxy:
            return
        from topiccrawl.weblab.api import WebLab, WebLabError

        try:
            self.lab = WebLab(cfg.web, faults=cfg.web_faults or None).start()
        except WebLabError as exc:  # one line, and the crawl closes before its first request
            logger.error("%s", exc)
            self.crawler.stats.set_value("topiccrawl/web_lab_error", str(exc))
            return deferred_from_coro(self.crawler.engine.close_spider_async(reason="web_lab_failed"))
        # the component that starts the lab stops it, whoever else stops the crawl
        self.crawler.signals.connect(self.stop, signal=signals.engine_stopped)
        logger.info("offline web %s: %s pages behind proxy %s", cfg.web, self.lab.pages, self.lab.proxy_url)

    @property
    def proxy_url(self) -> str | None:
        if not self.config.offline:
            return None
        return self.config.web_proxy or (self.lab.proxy_url if self.lab else None)

    def _load_ground_truth(self) -> None:
        cfg = self.config
        if cfg.ground_truth:
            self.ground_truth = GroundTruth.from_file(cfg.ground_truth)
        elif cfg.offline:
            from topiccrawl.weblab.corpus import open_corpus

            self.corpus = open_corpus(cfg.web)
            self.ground_truth = GroundTruth.from_corpus(self.corpus)
        self.truth_held_out = False
        if self.ground_truth is not None and cfg.topic_tree:
            from topiccrawl.scoring.tdcs import load_tree

            held_out = load_tree(cfg.topic_tree).heldout  # read once already, for the topic
            if held_out:  # the node was described by the other half of its pages: they were seen
                self.ground_truth = self.ground_truth.restricted(held_out, "held-out pages of the topic tree")
                self.truth_held_out = True
        # count the corpus's relevant pages now, at start-up, not inside the crawl
        self.total_relevant()

    @property
    def truth_labels(self) -> frozenset[str]:
        """The topic's evaluation labels where pages have labels to meet them (an offline web, or
        ``TOPICCRAWL_GROUND_TRUTH``); none on the live web, whose truth figures are then null, not 0."""
        return frozenset(self.topic.labels) if self.ground_truth is not None else frozenset()

    def is_truly_relevant(self, url: str) -> bool:
        return bool(self.ground_truth and self.ground_truth.is_relevant(url, self.topic.labels))

    def truth_paths(self):
        """The offline web's :class:`~topiccrawl.scoring.groundtruth.TruthPaths` for this topic
        (``oracle-path``), built from every page of the corpus; None without a corpus or labels."""
        if self.corpus is None or not self.topic.labels:
            return None
        from topiccrawl.scoring.groundtruth import TruthPaths
        from topiccrawl.weblab.webstats import CorpusGraph

        started = time.monotonic()
        paths = TruthPaths(self.corpus.iter_urls(), CorpusGraph(self.corpus).links, self.corpus.canonical,
                           self.is_truly_relevant)
        logger.info("oracle-path: link graph of %d pages and %d links read in %.1f s", len(paths), paths.edges,
                    time.monotonic() - started)
        return paths

    def seeds(self) -> list[str]:
        """The topic's seeds; on an offline web without topic seeds, the lab's entry pages."""
        if self.topic.seeds:
            return list(self.topic.seeds)
        if self.lab is not None:
            return list(self.lab.info.get("seeds", []))
        if self.corpus is not None:
            return self.corpus.seeds()
        if self.config.offline:  # the truth from TOPICCRAWL_GROUND_TRUTH and a running lab: the corpus unopened
            from topiccrawl.weblab.corpus import open_corpus

            return open_corpus(self.config.web).seeds()
        return []

    @property
    def output_dir(self) -> Path:
        """The crawl's output folder, absolute (:func:`output_path`)."""
        if self._output_dir is None:
            spider = getattr(self.crawler, "spider", None)
            name = getattr(spider, "name", None) or self.crawler.spidercls.name
            job = scrapyd_job(getattr(spider, "_job", None))
            self._output_dir = output_path(output_template(self.crawler.settings, job), name, self.started, job)
        return self._output_dir

    def seed_arg(self, arg: str | None) -> list[str]:
        """Seed URLs from a spider argument: comma-separated URLs, or ``truth:N`` on an offline
        web — N truly relevant pages (a seeded random pick from the labels) standing in for the
        representative examples a user would give; empty: :meth:`seeds`."""
        pages = parse_url_list("seeds", arg)
        if pages.truth is None:
            return list(pages.urls) or self.seeds()
        return self._truth_sample(pages.truth, seed=0, name="seeds")

    def _truth_sample(self, n: int, seed: int, name: str) -> list[str]:
        if self.corpus is None or not self.topic.labels:
            raise ValueError(f"truth:{n} needs an offline web and a topic with evaluation labels")
        # the pages the crawl is evaluated by (a topic tree's held-out half): a pick of others would
        # count as off-topic while the log calls them relevant
        accept = (lambda u: self.ground_truth.is_relevant(u, self.topic.labels)) if self.truth_held_out else None
        picked = self.corpus.truth_sample(self.topic.labels, n, seed, accept)
        if not picked:
            from scrapy.exceptions import CloseSpider

            logger.error("%s=truth:%d: no page of the offline web %s is labelled relevant to topic %s (labels: %s): "
                         "a typo in a label, or a web without this topic? Nothing crawled", name, n, self.config.web,
                         self.topic.path or self.topic.name, ", ".join(sorted(self.topic.labels)))
            raise CloseSpider(NO_TRUTH_PAGES)  # the engine closes the crawl with this reason
        if len(picked) < n:
            total = self.total_relevant()
            if total is not None and total > len(picked):  # the web is larger than the pick's sample
                from topiccrawl.weblab.corpus import TRUTH_SAMPLE

                logger.warning("%s=truth:%d: the first %d pages of the offline web, which truth:N picks from, hold "
                               "only %d of its %d pages labelled relevant to this topic; all %d are used",
                               name, n, TRUTH_SAMPLE, len(picked), total, len(picked))
            else:
                logger.warning("%s=truth:%d: the offline web has only %d pages labelled relevant to this topic; "
                               "all of them are used", name, n, len(picked))
        return picked

    def use_shared_store(self, shared, graph) -> None:
        """Count pages and keep the link graph in a shared store (the Redis scheduler at open):
        ``shared.count(item)`` and ``shared.budget_spent`` replace the local budget, ``graph``
        (a :class:`~topiccrawl.scoring.importance.LinkGraph` look-alike) the local link graph."""
        self.shared = shared
        self.graph = graph
        self.pagerank = PageRankCache(graph, every=self.config.pagerank_every)

    def stop(self) -> None:
        if self.lab is not None:
            self.lab.stop()
            self.lab = None

    # -- scoring --------------------------------------------------------------------------------
    def read_page(self, response) -> tuple[Extracted, float]:
        """Extract a downloaded page and score it: R(P) (eq. 4) over title, meta data and text."""
        ex, terms = self.page_terms(response)
        return ex, self.scorer.page_relevance(terms)

    @staticmethod
    def page_terms(response, squeeze: bool = True) -> tuple[Extracted, list[str]]:
        """A downloaded page extracted, and the terms of its title, meta data and text (with
        ``squeeze=False`` the text may keep the page's whitespace: :func:`extract`)."""
        ex = extract(response.body, response.url, response.headers.get("Content-Type", b"").decode("latin-1"),
                     squeeze=squeeze)
        return ex, document_terms(ex)

    def process_page(self, response, depth: int, parent: str | None, anchor: str) -> tuple[PageItem, list[ScoredLink]]:
        """Score a downloaded page (R(P), eq. 4) and its outlinks (R(l), eq. 5)."""
        ex, terms = self.page_terms(response, squeeze=False)  # its text is only tokenised here
        relevance = self.scorer.page_relevance(terms)
        probability = None
        # the page term of R(l) (eq. 5): R(P), or P(relevant) once the page classifier is fitted
        mode = self.config.holder_score
        by_probability = self.focus is not None and (
            mode == "probability" or (mode == "auto" and self.learns and self.focus.n_examples))
        guarded = False
        term_ids, hashed = self._term_ids(terms)
        # TOPICCRAWL_SEMANTIC_ENABLED: R(l)'s anchor and holder terms mixed with the closeness in
        # meaning of the anchor and of the page's title to the topic (the association keeps R(P))
        semantic = self._semantic_prior() if self._encoder is not None else None
        near = None
        # TOPICCRAWL_SEMANTIC_LINK_FEATURE: the anchors' closeness is a feature of the link-value model
        closeness = semantic is not None and self.learns and self.config.semantic_link_feature
        # TOPICCRAWL_SEMANTIC_ANCHOR_PAGES: the anchor term takes the prior until that many pages are
        # counted; links queued before keep their scores
        anchor_prior = semantic is not None and self.semantic_terms != "holder" and self._prior_open(
            self.semantic_anchor_pages)
        # TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE: the links queued under the anchors' prior lose its part
        # of R(l) when it stops (each link's part kept until then)
        kept = self._prior_parts if anchor_prior and self.semantic_anchor_rescore else None
        if not anchor_prior and self._prior_parts:
            self._rescore_without_prior()
        if semantic is not None:  # the title's closeness, then the anchors' where R(l) or the link model takes it
            texts = [ex.title.strip()]
            if anchor_prior or closeness:
                texts.extend(a.text.strip() for a in ex.anchors)
            near = semantic.scores(texts)
        if self.focus is not None:
            refits = self.focus.refits
            # TOPICCRAWL_CLASSIFIER_RANK: the pseudo-positives ranked with the title's closeness too
            rank, rule = None, self._rank_rule
            if rule == "semantic":
                rank = title_rank(relevance, near[0], TITLE_RANK_WEIGHTS[rule])
            elif rule == "title":
                rank = title_rank(relevance, self.scorer.anchor_relevance(ex.title), TITLE_RANK_WEIGHTS[rule])
            probability = self.focus.observe(terms, relevance, key=response.url, hashed=hashed, rank=rank)
            self._observed[response.url] = self.focus.pages
            steering, steer_p = self.focus, probability  # the classifier whose P steers, and that P
            if self.steer_focus is not None:  # TOPICCRAWL_CLASSIFIER_STEER_SHARE: a looser one steers
                steering, refits = self.steer_focus, self.steer_focus.refits
                steer_p = steering.observe(terms, relevance, key=response.url, hashed=hashed, rank=rank)
            # TOPICCRAWL_CLASSIFIER_GUARD: a P flagged unreliable does not steer, R(P) does (docs/learned.md)
            guarded = by_probability and self.config.classifier_guard and steering.unreliable
            if guarded:
                self.crawler.stats.inc_value("topiccrawl/classifier/guarded_pages")
            if self.learns and steering.refits != refits and self.frontier is not None and not guarded:
                hook = getattr(self.frontier, "page_probabilities", None)
                if hook is not None:  # with P as the holder term, queued links may follow their holder's new P
                    hook(steering.reservoir_probabilities,
                         holder_weight=1.0 - self.scorer.anchor_weight if by_probability else None)
                if by_probability and getattr(self.frontier, "judge_refresh", False):  # the judge under the new fit
                    self.frontier.refresh_judge(steering.classifier, steering.refits)
            steer = relevance if guarded else steer_p  # what the holder term and the link model see
        else:
            steering = steer = None
        holder = steer if steer is not None and by_probability and steering.fitted else relevance
        best: dict[str, ScoredLink] = {}
        anchors: dict[str, object] = {}  # the anchor that gave each link its best score
        close: dict[str, float] | None = {} if closeness else None  # that anchor's closeness
        link_holder = holder
        prior_terms = self.semantic_terms  # TOPICCRAWL_SEMANTIC_TERMS: which terms of R(l) take the prior
        # TOPICCRAWL_SEMANTIC_HOLDER_PAGES: the holder term takes the prior until that many pages are
        # counted; links queued before keep their scores
        if semantic is not None and prior_terms != "anchor" and self._prior_open(self.semantic_holder_pages):
            link_holder = semantic.mix(holder, near[0])
        anchor_w = self.semantic_anchor_weight
        parts: dict[str, float] = {}  # with ``kept``: the prior's part of each link's R(l)
        for i, a in enumerate(ex.anchors):
            anchor_rel = words = self.scorer.anchor_relevance(f"{a.text} {a.context}")
            if anchor_prior:
                anchor_rel = semantic.mix(anchor_rel, near[i + 1], anchor_w)
            score = self.scorer.link_relevance(anchor_rel, link_holder)
            if a.url not in best or score > best[a.url].score:
                best[a.url] = ScoredLink(a.url, score, a.text.strip()[:200])
                anchors[a.url] = a
                if close is not None:
                    close[a.url] = near[i + 1]
                if kept is not None:  # in the queue's float32, so that R(l) less the part is the words' exactly
                    parts[a.url] = float(np.float32(score)) - float(np.float32(self.scorer.link_relevance(words, link_holder)))
        for url, part in parts.items():  # a URL queued before keeps the part it was queued with
            if part:
                kept.setdefault(url, part)
        if self.learns:  # the association's page score: R(P), or R(l)'s holder term (TOPICCRAWL_ASSOCIATION_SCORE)
            judged = holder if self.config.association_score == "holder" else relevance
            # the page classifier judges anchors and their context where its P steers (TOPICCRAWL_LEARNED_ANCHOR_JUDGE)
            judge = by_probability and not guarded and steering.fitted
            self._observe(response.url, relevance if steer is None else steer, best, anchors, depth, terms, judged,
                          term_ids, judge=judge, holder_weight=None if by_probability else 1.0 - self.scorer.anchor_weight,
                          closeness=close, steering=steering)
        self.graph.add_page(response.url, best.keys())
        self.pagerank.maybe_refresh()
        potential = self.pagerank.potential(response.url, self.config.potential_pagerank)
        links = []
        for link in best.values():
            link.potential = potential
            if link.score >= self.config.link_threshold or potential:
                links.append(link)
        if self.config.max_links_per_page:
            links = sorted(links, key=lambda l: -l.score)[: self.config.max_links_per_page]
        item = self._item(response, ex, relevance, depth, parent, anchor)
        if probability is not None:
            item.probability = round(probability, 6)
        return item, self._unseen(links)

    def _term_ids(self, terms: list[str]) -> tuple:
        """With a memory anchor association, a page's distinct terms looked up once in its
        vocabulary (docs/learned.md, "One vocabulary for a page's terms"): their ids, and their
        hashed columns and counts for the page classifier (None without one); (None, None) without
        such an association (the classifier then hashes the terms itself)."""
        vocabulary = getattr(getattr(self.frontier, "association", None), "vocabulary", None)
        if not isinstance(vocabulary, Vocabulary):
            return None, None
        counts = Counter(terms)
        distinct = list(counts)
        ids = vocabulary.ids(distinct)
        hashed = None
        if self.focus is not None:
            columns = vocabulary.columns(ids, distinct, self.focus.classifier.n_features)
            hashed = merge_columns(columns, np.fromiter(counts.values(), dtype=np.float64, count=len(distinct)))
        return ids, hashed

    def _observe(self, url: str, probability: float, best: dict, anchors: dict, depth: int,
                 terms: list[str], relevance: float, term_ids=None, judge: bool = False,
                 holder_weight: float | None = None, closeness: dict[str, float] | None = None,
                 steering: PageFocus | None = None) -> None:
        """Hand a fetched page and its out-links (with their features) to a learning frontier,
        before the links are queued (with the page's terms and ``relevance``, the score its anchor
        association judges terms by: R(P), or P where P is R(l)'s holder term; ``term_ids``: the
        terms' ids in the association's vocabulary, :meth:`_term_ids`; ``judge``: the frontier's
        anchor judge, if it has one, shifts the out-links by the page classifier's score of their
        anchor and context; ``holder_weight``: 1 − ∂ where R(l)'s holder term is ``relevance``, for
        a frontier that keeps the holder mean, with the page's links to queued URLs; ``closeness``:
        each link's anchor closeness under the semantic prior, a link-model feature; ``steering``:
        the page classifier whose P steers, the judge's; None without a classifier)."""
        frontier = self.frontier
        if frontier is None:
            return
        skip = getattr(frontier, "queued_urls", ())  # pushed, not fetched yet: no features needed
        out = [(target, LinkFeatures(anchor=quick_terms(a.text), url=url_tokens(target),
                                     context=quick_terms(a.context), score=best[target].score, depth=depth + 1))
               for target, a in anchors.items() if target not in skip]
        if closeness:
            for target, f in out:
                f.closeness = closeness[target]
            self.crawler.stats.inc_value("topiccrawl/semantic/closeness_links", len(out))
        if getattr(frontier, "association", None) is not None:
            for target, f in out:
                f.terms = anchor_terms(anchors[target].text)
            marked = self.example_links if getattr(frontier, "example_links", False) else ()
            if marked:  # "linked from an example page" is one more term (docs/learned.md)
                for target, f in out:
                    if target in marked:
                        f.terms = (*f.terms, EXAMPLE_LINK)
                if url in marked:
                    terms = [*terms, EXAMPLE_LINK]
                    if term_ids is not None:
                        term_ids = np.append(term_ids, frontier.association.vocabulary.ids([EXAMPLE_LINK]))
                    self.crawler.stats.inc_value("topiccrawl/examples/linked_pages_fetched")
        anchor_judge = getattr(frontier, "anchor_judge", None)
        judged_links = []
        follow = holder_weight is not None and getattr(frontier, "holder_mean", False)
        refresh = judge and anchor_judge is not None and getattr(frontier, "judge_refresh", False)
        queued = [target for target in anchors if target in skip] if follow or refresh else []  # the page's links to queued URLs
        if judge and anchor_judge is not None:
            # with TOPICCRAWL_LEARNED_ANCHOR_JUDGE_REFRESH the links to queued targets are judged too
            linked = queued if refresh else []
            docs = [(*(t for t in (f.terms or anchor_terms(anchors[target].text)) if t != EXAMPLE_LINK),
                     *context_words(anchors[target].context)) for target, f in out]
            docs += [(*anchor_terms(anchors[target].text), *context_words(anchors[target].context))
                     for target in linked]
            if docs:
                shifts = anchor_judge.shifts(steering.classifier, steering.refits, docs).tolist()
                for (_, f), doc, shift in zip(out, docs, shifts):
                    f.shift = shift
                    if refresh:
                        f.judge_doc = doc
                judged_links = list(zip(linked, docs[len(out):], shifts[len(out):]))
        more = {"judged_links": judged_links} if judged_links else {}
        if follow:
            more.update(linked=queued, holder_weight=holder_weight)
        frontier.observe_page(url, registered_domain(url), probability, out, terms=terms, relevance=relevance,
                              term_ids=term_ids, **more)

    @property
    def frontier(self):
        """The strategy of the crawl's scheduler (None without an engine or a foreign scheduler)."""
        try:
            return getattr(self.crawler.engine.scheduler, "frontier", None)
        except RuntimeError:
            return None

    def has_examples(self) -> bool:
        """The crawl starts from example pages: the topic's, or the spider's ``-a examples=``."""
        spider = getattr(self.crawler, "spider", None)
        return self.topic.has_examples or bool(getattr(spider, "examples_arg", None))

    def _semantic_encoder(self, has_examples: bool):
        """The encoder of the semantic prior, or None with the prior off. ``auto``
        (TOPICCRAWL_SEMANTIC_ENABLED's default): the static encoder for the crawls
        :func:`semantic_auto_off` allows, when the static model is at hand without the network, in
        both terms of R(l) for the first :data:`AUTO_ANCHOR_PAGES` pages (or
        TOPICCRAWL_SEMANTIC_ANCHOR_PAGES), the links queued under the anchors' prior re-scored
        without it (TOPICCRAWL_SEMANTIC_TERMS=auto), the holder term for as many pages (or
        TOPICCRAWL_SEMANTIC_HOLDER_PAGES); otherwise off, with one log line saying why (docs/learned.md)."""
        cfg = self.config
        mode = cfg.semantic_mode
        if mode == "off":
            return None
        if mode == "on":
            if self.semantic_terms == "auto":
                self.semantic_terms = "both"
            return self._load_encoder()
        why = semantic_auto_off(cfg, bool(self.topic.words), has_examples, self.topic.language)
        if not why:
            why = static_at_hand(cfg.semantic_model, cfg.semantic_cache_dir)
        if not why:
            try:
                encoder = load_encoder(cfg.semantic_model, cfg.blas_threads, "static", cfg.semantic_cache_dir,
                                       local_only=True)
            except SemanticError as exc:
                why = str(exc)
        if why:
            logger.info("Semantic prior: off (TOPICCRAWL_SEMANTIC_ENABLED=auto: %s)", why)
            return None
        self.semantic_encoder = "static"
        if self.semantic_terms == "auto":
            self.semantic_terms = "both"
            self.semantic_anchor_pages = self.semantic_anchor_pages or AUTO_ANCHOR_PAGES
            self.semantic_anchor_rescore = True
            # the holder term for the anchor term's pages too (docs/learned.md, "The title's prior in
            # the holder term for the first pages only")
            self.semantic_holder_pages = self.semantic_holder_pages or self.semantic_anchor_pages
        return encoder

    def _load_encoder(self):
        try:
            encoder = load_encoder(self.config.semantic_model, self.config.blas_threads, self.config.semantic_encoder,
                                   self.config.semantic_cache_dir)
        except SemanticError as exc:
            raise ConfigError(str(exc)) from None
        if self.topic.language != "en" and self.config.semantic_model == DEFAULT_MODEL:
            logger.warning("TOPICCRAWL_SEMANTIC_MODEL %s is an English model and the topic's language is %r: "
                           "set a multilingual model (docs/learned.md, \"A semantic prior\")",
                           DEFAULT_MODEL, self.topic.language)
        return encoder

    def _semantic_prior(self) -> SemanticPrior | None:
        """The semantic prior, made at the first page (words derived from examples are known by then)."""
        if self.semantic is None and self._encoder is not None:
            try:
                self.semantic = SemanticPrior(self._encoder, topic_text(self.topic.description, self.topic.words),
                                              self.config.semantic_weight)
            except SemanticError as exc:
                raise ConfigError(str(exc)) from None
            until = ""
            if self._anchor_cut:
                until = f" (the anchor term for the first {self._anchor_cut} pages" + (
                    ", then taken out of the links queued under it)" if self.semantic_anchor_rescore else ")")
            if self._holder_cut:
                until += f" (the holder term for the first {self._holder_cut} pages)"
            logger.info("Semantic prior: %s (%s encoder), weight %.2f, terms of R(l): %s%s (TOPICCRAWL_SEMANTIC_*)",
                        self.config.semantic_model, self.semantic_encoder, self.config.semantic_weight,
                        self.semantic_terms, until)
        return self.semantic

    @property
    def _anchor_cut(self) -> int:
        """The page count where the anchor term stops taking the prior; 0 when it takes it all
        through or never (TOPICCRAWL_SEMANTIC_TERMS ``holder``)."""
        return self.semantic_anchor_pages if self.semantic_terms != "holder" else 0

    def _prior_open(self, pages: int) -> bool:
        """A term of R(l) whose prior stops once ``pages`` pages are counted (0: never) still takes it
        (TOPICCRAWL_SEMANTIC_ANCHOR_PAGES, TOPICCRAWL_SEMANTIC_HOLDER_PAGES)."""
        return not pages or self.metrics.dp < pages

    @property
    def _holder_cut(self) -> int:
        """The page count where the holder term stops taking the prior; 0 when it takes it all
        through or never (TOPICCRAWL_SEMANTIC_TERMS ``anchor``)."""
        return self.semantic_holder_pages if self.semantic_terms != "anchor" else 0

    def _rescore_without_prior(self) -> None:
        """The anchors' prior stopped (TOPICCRAWL_SEMANTIC_ANCHOR_PAGES): the links queued under
        it lose its part of R(l) (TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE), where the frontier can move
        queued links; the kept parts are dropped either way."""
        parts, self._prior_parts = self._prior_parts, {}
        hook = getattr(self.frontier, "shift_scores", None)
        if hook is None:
            logger.warning("TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE: the %s strategy's queue cannot re-score queued links; "
                           "they keep the anchors' prior", getattr(self.frontier, "name", "crawl's"))
            return
        moved = hook({url: -part for url, part in parts.items()})
        self.crawler.stats.set_value("topiccrawl/semantic/anchor_rescored", moved)
        logger.info("Semantic prior: the anchor term without it from here; %d queued links re-scored without it "
                    "(TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE)", moved)

    def _classifier_wanted(self, spider) -> bool:
        """TOPICCRAWL_CLASSIFIER: ``on``, ``off``, or ``auto``: on for the learned strategy, for a
        topic with example pages, and for a crawl of a spider that scores its pages
        (``topiccrawl_page_classifier``: focused, wl) with a strategy of :data:`REPORTING_STRATEGIES`
        whose topic has words of the VSM scorer, where it only reports."""
        cfg = self.config
        if cfg.classifier != "auto":
            return cfg.classifier == "on"
        if cfg.strategy == "learned" or self.topic.has_examples:
            return True
        return (cfg.strategy in REPORTING_STRATEGIES and getattr(spider, "topiccrawl_page_classifier", False)
                and cfg.scorer == "vsm" and not cfg.topic_tree and bool(self.topic.words))

    def _make_foci(self) -> None:
        """The page classifier (:attr:`focus`), and a second one that steers (:attr:`steer_focus`)
        with words and TOPICCRAWL_CLASSIFIER_STEER_SHARE (a looser one: docs/learned.md, "A looser
        page classifier for the link labels"), or when TOPICCRAWL_CLASSIFIER_REPORT_C gives the one
        that reports another C (docs/learned.md, "The self-assessment from a second, more
        regularised classifier"): the one that steers is then the one a crawl without it has."""
        cfg = self.config
        report_c = cfg.classifier_report_c or cfg.classifier_c
        self.focus = self._make_focus(cfg.classifier_share, report_c)
        steer = cfg.classifier_steer_share if self.topic.words else 0.0
        if steer or report_c != cfg.classifier_c:
            self.steer_focus = self._make_focus(steer or cfg.classifier_share, cfg.classifier_c)

    def _make_focus(self, share: float, c: float) -> PageFocus:
        cfg = self.config
        full = cfg.classifier_rank == "full" and self.topic.words  # pseudo-positives by the full-vector cosine
        return PageFocus(self.topic.beta, use_words=bool(self.topic.words), refit_every=cfg.classifier_refit_every,
                         strong_quantile=cfg.classifier_quantile, pseudo=cfg.classifier_pseudo,
                         pseudo_share=share, wordless=cfg.classifier_wordless,
                         unranked=cfg.classifier_unranked, estimate=cfg.classifier_estimate,
                         classifier=PageClassifier(C=c, random_state=0),
                         rank_scorer=RelevanceScorer(self.topic, restrict_to_topic=False) if full else None)

    # -- topics from examples -------------------------------------------------------------------
    def example_urls(self, arg: str | None) -> tuple[list[str], list[str]]:
        """Example and counter-example pages to fetch first. Examples: ``-a examples=URL,URL``,
        ``truth:N`` (N truly relevant pages of the offline web, a seeded pick different from
        ``seeds=truth:N``'s) or ``audit:PATH`` (the pages a labelled audit calls on topic), else the
        topic's ``examples``. Counter-examples: the topic's, then those the audit labels off topic."""
        pages = parse_url_list("examples", arg)
        if pages.audit is not None:
            self._note_audit(pages)
        if pages.truth is not None:
            examples = self._truth_sample(pages.truth, seed=1, name="examples")
        else:
            examples = list(pages.urls) or list(self.topic.examples)
        counter = list(self.topic.counter_examples)
        return examples, counter + [u for u in pages.counter if u not in counter]

    def _note_audit(self, pages) -> None:
        """Say what an ``-a examples=audit:PATH`` gave, and warn when the audit is of a crawl of
        another topic or another offline web (its stats.json says which)."""
        logger.info("examples from the audit %s: %d page(s) labelled on topic, %d off topic (counter-examples)",
                    pages.audit, len(pages.urls), len(pages.counter))
        if pages.kept:  # its topic and web are not checked: the stats.json beside it is a later crawl's
            logger.warning("examples from the audit %s: the folder's audit.csv has no label (a later crawl, or this "
                           "one before a resume, wrote it), so the labelled audit kept beside it gives them; name "
                           "the file to choose another", pages.audit)
        from topiccrawl.crawl.audit import audited_crawl
        from topiccrawl.weblab.corpus import same_web

        topic, web = audited_crawl(pages.audit)
        here = (self.topic.name, self.config.web or "")
        if topic is not None and (topic != here[0] or not same_web(web or "", here[1])):
            def name(web: str) -> str:
                return web if (web or "live") != "live" else "the live web"

            logger.warning("examples from the audit %s: it labels a crawl of topic %r on %s; this crawl is of topic "
                           "%r on %s: its labels may not hold for this topic, or its pages not be on this web",
                           pages.audit, topic, name(web or ""), here[0], name(here[1]))

    def add_example(self, terms: list[str], counter: bool = False, links: Iterable[str] = ()) -> None:
        """A fetched example (or counter-example) page: its terms, and for an example the URLs it
        links to (:attr:`example_links`)."""
        if self.focus is None:
            self._make_foci()
        foci = (self.focus,) if self.steer_focus is None else (self.focus, self.steer_focus)
        if counter:
            for focus in foci:
                focus.add_counter_example(terms)
            self._counter_terms.append(terms)
        else:
            for focus in foci:
                focus.add_example(terms)
            self._example_terms.append(terms)
            self.example_links.update(links)

    def add_background(self, terms: list[str]) -> None:
        """A background page (a seed fetched with the examples): words typical of every page of
        the web (site boilerplate) are not topic words."""
        self._background_terms.append(terms)

    def forget_examples(self) -> None:
        """Start the example pages over: a JOBDIR saved by a crawl that stopped because its examples
        gave a topic without words no words (nothing was crawled) takes the examples given now."""
        self.focus = self.steer_focus = None
        self._make_foci()
        self._example_terms, self._counter_terms, self._background_terms = [], [], []
        self.example_links = set()
        self.example_sources = None

    def learn_words(self, k: int = 30) -> list[tuple[str, float]]:
        """Derive weighted topic words from the example pages (counter-examples as background);
        a topic without words of its own is scored with them from now on."""
        from topiccrawl.learning.examples import topic_words

        background = self._counter_terms + self._background_terms
        words = topic_words(self._example_terms, background, k=k) if self._example_terms else []
        if words and not self.topic.words:
            self._use_words(dict(words))
            self.scorer = RelevanceScorer(self.topic, anchor_weight=self.config.anchor_weight)
        return words

    @property
    def background_pages(self) -> int:
        """The pages the derived words are told apart from: counter-examples and background pages."""
        return len(self._counter_terms) + len(self._background_terms)

    def examples_to_frontier(self) -> int:
        """Hand the fetched example and counter-example pages' terms to a learning frontier that
        keeps an anchor association (docs/learned.md, "The example pages in the association");
        the number of pages it took."""
        observe = getattr(self.frontier, "observe_examples", None)
        if observe is None or not (self._example_terms or self._counter_terms):
            return 0
        return observe(self._example_terms, self._counter_terms)

    def _use_words(self, words: dict[str, float]) -> None:
        """Give a topic without words of its own the words derived from its examples."""
        self.topic = replace(self.topic, words=words)
        add_words(list(words))

    def _unseen(self, links: list[ScoredLink]) -> list[ScoredLink]:
        """Drop links this process has already handed to Scrapy. The scheduler's duplicate filter
        would drop them too (it stays the authority: JOBDIR, redirects, other workers); skipping
        them here saves a Request, the spider middlewares and a fingerprint per repeated link —
        about three quarters of all links on the generated web. One byte per graph node."""
        graph, yielded = self.graph, self._yielded
        if len(yielded) < len(graph):
            yielded.extend(bytes(len(graph) - len(yielded)))
        fresh = []
        for link in links:
            node = graph.index(link.url)
            if node is None:  # a page added twice (redirect): its links were not re-indexed
                fresh.append(link)
            elif not yielded[node]:
                yielded[node] = 1
                fresh.append(link)
        return fresh

    def _item(self, response, ex: Extracted, relevance: float, depth: int, parent: str | None, anchor: str) -> PageItem:
        return PageItem(
            url=response.url,
            title=ex.title[:300],
            relevance=round(relevance, 6),
            depth=depth,
            parent=parent,
            anchor=anchor,
            strategy=self.config.strategy,
            language=ex.language or self.topic.language,
            fetched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    def importance(self, url: str) -> float:
        """Unnormalised PageRank of ``url`` at the last refresh (1.0 = the mean)."""
        return self.pagerank.score(url)

    def open_links(self, url: str, depth: int = 1) -> bool:
        """With ``TOPICCRAWL_DISPATCH_PAGE_LINKS = "together"`` (or ``"after-seeds"`` and a page at
        ``depth`` > 0): the page ``url``'s links are about to be queued, and no queued link is handed
        out until they all are (the scheduler's hold); True when held."""
        mode = self.page_links
        if mode == "streamed" or (mode == "after-seeds" and depth == 0):
            return False
        self.links_open[url] = time.monotonic()
        return True

    def close_links(self, url: str | None) -> None:
        """Every link of the page ``url`` has reached the scheduler: the hold ends once no page's
        links are still being queued (the engine is asked again at once)."""
        if self.links_open.pop(url, None) is not None and not self.links_open:
            wake_engine(self.crawler, 0.0)

    def record(self, item: PageItem) -> dict | None:
        """Count one downloaded page in the metrics; None once the page budget is spent, or when a
        shared store does not count it (:attr:`not_counted` then says why)."""
        observed = self._observed.pop(item.url, None)
        if self.links_open:  # its last link was dropped on the way (or none reached the scheduler)
            self.close_links(item.url)
        if self.config.max_pages and self.metrics.dp >= self.config.max_pages:
            self.not_counted = BUDGET_SPENT
            return None
        if self.shared is not None and not self.shared.count(item):
            # global budget spent, another worker counted this page, or Redis lost: the store says
            self.not_counted = getattr(self.shared, "not_counted", None) or BUDGET_SPENT
            return None
        gt = self.ground_truth
        labels = gt.labels(item.url) if gt else None
        identity = gt.identity(item.url) if gt else None
        row = self.metrics.record(item.url, item.relevance, labels, registered_domain(item.url), identity)
        # the discovery spiders' items have no probability
        row["judged"] = self._judgement(getattr(item, "probability", None), item.relevance)
        row["title"] = getattr(item, "title", "")
        if self.focus is not None:  # the classifier's self-assessed harvest rate, next to Accuracy
            expected = self.focus.expected_harvest
            row["expected_harvest"] = None if expected is None else round(expected, 6)
            # which figure that is (TOPICCRAWL_CLASSIFIER_ESTIMATE): a JOBDIR resume may change the rule
            row["estimate"] = None if expected is None else ("auc_bound" if self.focus.bound_applied else "mean")
            # pages are counted in the order their items finish, which with concurrent responses
            # is not always the order the classifier saw them in (a replay needs the latter)
            row["observed"] = observed
        self.harvest_rows.append(row)
        return row

    @property
    def budget_spent(self) -> bool:
        if self.shared is not None:
            return self.shared.budget_spent
        return bool(self.config.max_pages) and self.metrics.dp >= self.config.max_pages

    def _judgement(self, probability: float | None, relevance: float) -> float:
        """The crawl's own judgement of a counted page, what its self-assessed rate averages
        (audit.csv): the classifier's P, else 1 when R(P) ≥ β (Accuracy's count)."""
        return round(probability, 6) if probability is not None else float(relevance >= self.metrics.beta)

    def final_judgements(self) -> None:
        """At the close: each counted page's ``judged`` becomes its P(relevant) under the page
        classifier's last model where the classifier kept the page (the figures its self-assessed
        rate averages); pages fetched since that refit were judged by that model already."""
        probabilities = self.focus.reservoir_probabilities if self.focus is not None else None
        if not probabilities:
            return
        for row in self.harvest_rows:
            p = probabilities.get(row["url"])
            if p is not None:
                row["judged"] = round(p, 6)

    def warn_if_unreliable(self) -> bool:
        """Say so in the log when the page classifier flags its self-assessment as unreliable
        (:attr:`PageFocus.unreliable`); True if it did."""
        focus = self.focus
        if focus is None or not focus.unreliable:
            return False
        held = "pages the topic words match best"
        audit = " (to measure it, label the pages of audit.csv: docs/audit.md)" if self.config.audit_enabled else ""
        # a topic of words only can be given example pages beside them (the advice says how)
        more = ("give more, or more varied, example pages, or counter-examples" if focus.n_examples else
                "give example pages beside the words (examples = [...] in the topic file, or -a examples=URL,…), "
                "or counter-examples")
        if focus.unreliable_reason == "c":
            positives = f"example pages and {held}" if focus.n_examples else held
            why = (f"the page classifier's labelled positives (the {positives}) are only c = {focus.classifier.c_:.3f} "
                   f"(< {RELIABLE_C:.2f}) of the pages it takes for relevant, so most of the estimate is "
                   f"extrapolated; {more}")
        else:
            shown = "example pages" if focus.n_examples else held
            why = (f"the page classifier's held-out {shown} rank like ordinary fetched pages (AUC "
                   f"{focus.heldout_auc:.3f} < {RELIABLE_AUC:.2f}); {more}")
        if focus.expected_harvest is None:  # every refit discarded (TOPICCRAWL_CLASSIFIER_UNRANKED=discard)
            logger.warning("no self-assessed harvest rate: each of the page classifier's %d refits was discarded%s: "
                           "%s (docs/learned.md)", focus.discarded, audit, why)
        else:
            bound = (f" (the held-out AUC's bound 2·(1 − AUC), TOPICCRAWL_CLASSIFIER_ESTIMATE=auc; the mean P is "
                     f"{focus.mean_probability:.3f})" if focus.bound_applied else "")
            logger.warning("the self-assessed harvest rate %.3f%s is unreliable%s: %s (docs/learned.md)",
                           focus.expected_harvest, bound, audit, why)
        return True

    def learning_stats(self) -> dict:
        """``classifier/*`` statistics of the page classifier (empty when it is off; ``classifier/rank``:
        what ranked its pseudo-positives, with words), and ``semantic/encoded`` (texts the semantic
        prior encoded) when that is on."""
        out = self.focus.stats() if self.focus is not None else {}
        if self.steer_focus is not None:  # the classifier that steers: classifier_steer/*
            out["classifier_steer/share"] = self.steer_focus.pseudo_share
            out.update({f"classifier_steer/{k.split('/', 1)[1]}": v for k, v in self.steer_focus.stats().items()})
        if self.focus is not None and self.focus.use_words and self.config.classifier_pseudo != "beta":
            out["classifier/rank"] = self._rank_rule
        out["semantic/enabled"] = int(self._encoder is not None)
        if self._encoder is not None:
            out["semantic/terms"] = self.semantic_terms
            if self._anchor_cut:
                out["semantic/anchor_pages"] = self._anchor_cut
                out["semantic/anchor_rescore"] = int(self.semantic_anchor_rescore)
            if self._holder_cut:
                out["semantic/holder_pages"] = self._holder_cut
        if self.semantic is not None:
            out["semantic/encoded"] = self.semantic.encoded
        return out

    def total_relevant(self) -> int | None:
        if not self.ground_truth or not self.topic.labels:
            return None
        return self.ground_truth.total_relevant(self.topic.labels)

    # -- persistence (JOBDIR) -------------------------------------------------------------------
    def state(self) -> dict:
        return {
            "scorer": self.scorer.state(),
            "graph": self.graph.state(),
            "pagerank": self.pagerank.state(),
            "metrics": self.metrics.state(),
            "harvest_rows": self.harvest_rows,
            "focus": self.focus,  # the page classifier and its training pages (pickled with JOBDIR)
            "steer_focus": self.steer_focus,  # TOPICCRAWL_CLASSIFIER_STEER_SHARE's (None: off)
            "topic_words": self.topic.words,
            "example_links": sorted(self.example_links),
            "example_sources": self.example_sources,
            "semantic": self.semantic_resolution,
            "prior_parts": self._prior_parts,
        }

    def load_state(self, state: dict) -> None:
        self.scorer = scorer_from_state(state["scorer"], self.topic)
        self.graph = LinkGraph.from_state(state["graph"])
        self._yielded = bytearray()  # a cache only: the restored duplicate filter has the truth
        self.pagerank = PageRankCache.from_state(state["pagerank"], self.graph)
        self.metrics = CrawlMetrics.from_state(state["metrics"])
        if self.ground_truth is None:  # a live crawl's JOBDIR saved its topic's labels before
            self.metrics.relevant_labels = frozenset()
        self.harvest_rows = state["harvest_rows"]
        if state.get("focus") is None and self.focus is not None:
            if self.config.classifier == "auto" and not (self.learns or self.topic.has_examples):
                # here it would only report: auto keeps what the crawl started with (a figure of
                # the resumed pages only would pass for the crawl's)
                self.focus = self.steer_focus = None
            else:
                # started without the page classifier (another strategy, or the classifier off) and
                # resumed with it: a new one, which learns from the pages of this run on
                logger.warning("JOBDIR: the crawl started without the page classifier; a new one learns from the "
                               "pages fetched from now on (its self-assessed harvest rate covers those only)")
                for row in self.harvest_rows:  # their 0/1 (R(P) ≥ β) is no P: the audit leaves them out
                    row["judged"] = None
        else:
            self.focus = state.get("focus")
            # a resumed crawl keeps the classifiers it started with (saved before the setting existed: one)
            self.steer_focus = state.get("steer_focus")
            for focus in (self.focus, self.steer_focus):
                if focus is not None:  # what it reports follows this run's setting (it steers nothing)
                    focus.estimate = self.config.classifier_estimate
        self.example_links = set(state.get("example_links", ()))
        self.example_sources = state.get("example_sources")
        if state.get("topic_words") and not self.topic.words:  # words derived from examples
            self._use_words(dict(state["topic_words"]))
            self.scorer = scorer_from_state(state["scorer"], self.topic)
        self._resume_semantic(state.get("semantic"))
        self._prior_parts = dict(state.get("prior_parts", {}))

    @property
    def semantic_resolution(self) -> dict:
        """What the semantic prior resolved to in this process: on or off, the encoder, the terms of
        R(l) it enters and what ranks the pseudo-positives (saved with JOBDIR, claimed on Redis)."""
        on = self._encoder is not None
        out = {"on": on, "encoder": self.semantic_encoder if on else "", "terms": self.semantic_terms if on else "",
               "anchor_pages": self.semantic_anchor_pages if on else 0,
               "anchor_rescore": self.semantic_anchor_rescore if on else False, "rank": self._rank_rule}
        if on and self.semantic_holder_pages:  # absent when 0, as crawls saved or started before the setting
            out["holder_pages"] = self.semantic_holder_pages
        return out

    def _resume_semantic(self, saved: dict | None) -> None:
        """A JOBDIR resume under ``TOPICCRAWL_SEMANTIC_ENABLED=auto`` keeps what the crawl started
        with: off when it started off; on with the terms of R(l) it started with (a crawl started
        when ``auto`` put the prior on the holder term only keeps that); when it started on and this
        process cannot load the static model, it goes on without the prior and says so (queued links
        keep their scores)."""
        if not saved or self.config.semantic_mode != "auto" or saved == self.semantic_resolution:
            return
        if not saved["on"]:
            self._encoder, self.semantic = None, None
            self.semantic_terms, self._rank_rule = self.config.semantic_terms, saved["rank"]
            self.semantic_anchor_pages = self.config.semantic_anchor_pages
            self.semantic_anchor_rescore = self.config.semantic_anchor_rescore
            self.semantic_holder_pages = self.config.semantic_holder_pages
            logger.info("Semantic prior: off, as when this crawl started (TOPICCRAWL_SEMANTIC_ENABLED=auto, JOBDIR)")
        elif self._encoder is None:
            logger.warning("Semantic prior: this crawl started with it (%s encoder, terms of R(l): %s) and this "
                           "process cannot load it: resumed without it (TOPICCRAWL_SEMANTIC_ENABLED=auto; the "
                           "log line \"Semantic prior: off\" above says why)", saved["encoder"], saved["terms"])
        else:  # on both times, resolved otherwise now: as started
            self.semantic_terms = saved["terms"]
            self.semantic_anchor_pages = saved.get("anchor_pages", 0)  # saved before these were resolved: none
            self.semantic_anchor_rescore = saved.get("anchor_rescore", False)
            self.semantic_holder_pages = saved.get("holder_pages", 0)
            logger.info("Semantic prior: terms of R(l) as when this crawl started: %s (TOPICCRAWL_SEMANTIC_ENABLED=auto, "
                        "JOBDIR)", self.semantic_terms)

    def replay_count(self, url: str, relevance: float) -> None:
        """Count a page again from a JOBDIR journal (a page counted after the last snapshot), as
        :meth:`record` did; the classifier's self-assessment of that moment and the page's P are not
        kept (with the classifier on, the page then stays out of the audit unless the classifier kept it)."""
        gt = self.ground_truth
        row = self.metrics.record(url, relevance, gt.labels(url) if gt else None, registered_domain(url),
                                  gt.identity(url) if gt else None)
        row["judged"] = None if self.focus is not None else self._judgement(None, relevance)
        row["title"] = ""
        if self.focus is not None:
            row["expected_harvest"] = row["estimate"] = row["observed"] = None
        self.harvest_rows.append(row)


class TopicComponent:
    """Base of the project's Scrapy components (pipelines, middleware, stats extension): built
    with ``from_crawler``, off when ``TOPICCRAWL_ENABLED`` is false, sharing the crawl's
    :class:`TopicCrawl` as ``self.tc``."""

    def __init__(self, crawler) -> None:
        self.crawler = crawler
        self.tc = TopicCrawl.for_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler):
        from scrapy.exceptions import NotConfigured

        if not topiccrawl_enabled(crawler.settings):
            raise NotConfigured
        return cls(crawler)
