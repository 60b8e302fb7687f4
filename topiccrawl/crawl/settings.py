"""All ``TOPICCRAWL_*`` settings, parsed once and validated (see ``docs/settings.md``).

Spider arguments (``-a topic=… -a strategy=… -a max_pages=…``) override the matching settings.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import get_type_hints

from topiccrawl.crawl.addresses import parse_allow_hosts
from topiccrawl.crawl.errors import ConfigError
from topiccrawl.learning.focus import ESTIMATE_RULES, PSEUDO_RULES, UNRANKED_RULES, WORDLESS_RULES
from topiccrawl.learning.semantic import ENCODERS
from topiccrawl.strategies.base import (
    STRATEGIES,
    SWITCH_OFF,
    SWITCH_ON,
    FrontierBase,
    FrontierError,
    StrategyOptions,
    get_strategy,
    parse_switch,
    setting_name,
)


@dataclass
class TopicCrawlConfig:
    """Every ``TOPICCRAWL_*`` setting, typed, with its default: the one place the defaults are
    written (:data:`DEFAULTS` is derived from it). Field ``max_pages`` = setting
    ``TOPICCRAWL_MAX_PAGES``. Strategy options live in the strategies' options dataclasses
    (:func:`strategy_options`)."""

    enabled: bool = True
    topic: str = "台风灾害"
    strategy: str = "bestfirst"
    web: str = "generated:zh-disaster"
    web_proxy: str = ""
    web_faults: str = ""
    max_pages: int = 1000
    link_threshold: float = 0.0
    anchor_weight: float = 0.3
    max_links_per_page: int = 0
    pagerank_every: int = 500
    potential_pagerank: float = 2.0
    ground_truth: str = ""
    output_dir: str = "out/%(name)s"
    plot_enabled: bool = True
    audit_enabled: bool = True
    audit_pages: int = 50
    checkpoints: list[int] = field(default_factory=lambda: [100, 250, 500, 1000, 5000, 10000, 15000])
    progress_interval: float = 10.0
    checkpoint_interval: float = 30.0
    feed_flush_enabled: bool = True
    live_allow_private: bool = False
    live_allow_hosts: str = ""
    trap_guard_enabled: bool = True
    trap_guard_depth: int = 20
    slow_seconds: float = 5.0
    scorer: str = "vsm"
    topic_tree: str = ""
    topic_node: str = ""
    tdcs_k: int = 180
    store: str = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_url_file: str = ""
    crawl_id: str = ""
    lease_seconds: float = 30.0
    idle_timeout: float = 60.0
    classifier: str = "auto"
    classifier_refit_every: int = 100
    classifier_quantile: float = 0.25
    classifier_pseudo: str = "top"
    classifier_share: float = 0.03
    classifier_steer_share: float = 0.0
    classifier_c: float = 1.0
    classifier_report_c: float = 0.0
    classifier_wordless: str = "keep"
    classifier_unranked: str = "discard"
    classifier_estimate: str = "mean"
    classifier_rank: str = "auto"
    classifier_guard: bool = False
    examples_background: str = "seeds"
    holder_score: str = "auto"
    association_score: str = "holder"
    dispatch: str = "eager"
    dispatch_margin: float = 1.0
    dispatch_max_wait: float = 1.0
    dispatch_scope: str = "auto"
    dispatch_rule: str = "any"
    dispatch_p: float = 0.95
    dispatch_seeds: str = "queued"
    dispatch_page_links: str = "auto"
    dispatch_patient_pages: int = 0
    blas_threads: int = 1
    gc_threshold: int = 10000
    semantic_enabled: str = "auto"
    semantic_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    semantic_weight: float = 0.7
    semantic_anchor_weight: str = ""
    semantic_anchor_pages: int = 0
    semantic_holder_pages: int = 0
    semantic_anchor_rescore: bool = False
    semantic_encoder: str = "transformer"
    semantic_cache_dir: str = ""
    semantic_terms: str = "auto"
    semantic_link_feature: bool = False

    @property
    def offline(self) -> bool:
        return self.web.strip().lower() != "live"

    @property
    def semantic_mode(self) -> str:
        """``TOPICCRAWL_SEMANTIC_ENABLED`` read: ``on``, ``off`` or ``auto``."""
        value = str(self.semantic_enabled).strip().lower()
        if not value:  # empty keeps the default, as for every switch
            return "auto"
        if value in SWITCH_ON:
            return "on"
        if value in SWITCH_OFF:
            return "off"
        return value

    @property
    def semantic_anchor_weight_resolved(self) -> float:
        """W of R(l)'s anchor term: ``TOPICCRAWL_SEMANTIC_ANCHOR_WEIGHT``, or when empty
        ``TOPICCRAWL_SEMANTIC_WEIGHT``."""
        value = str(self.semantic_anchor_weight).strip()
        return float(value) if value else self.semantic_weight

    @property
    def dispatch_scope_resolved(self) -> str:
        """``TOPICCRAWL_DISPATCH_SCOPE``: ``auto`` is ``slot`` on the live web, ``crawl`` offline."""
        if self.dispatch_scope == "auto":
            return "crawl" if self.offline else "slot"
        return self.dispatch_scope

    @classmethod
    def from_settings(cls, settings, overrides: dict | None = None) -> TopicCrawlConfig:
        """Read every ``TOPICCRAWL_*`` setting, apply spider-argument overrides, validate."""
        values: dict[str, object] = {}
        kinds = get_type_hints(cls)
        for f in fields(cls):
            key = setting_name(f.name)
            default, kind = DEFAULTS[key], kinds[f.name]
            try:
                if kind is bool:  # empty keeps the default, as the strategies' switches do
                    values[f.name] = parse_switch(settings.get(key, default), default)
                elif kind is int:
                    values[f.name] = settings.getint(key, default)
                elif kind is float:
                    values[f.name] = settings.getfloat(key, default)
                    if math.isnan(values[f.name]):  # passes every bound check (nan < 0 is False)
                        raise ValueError(key)
                elif kind == list[int]:
                    values[f.name] = [int(x) for x in settings.getlist(key, default)]
                else:
                    raw = settings.get(key, default)  # False or 0 from a settings dict: a value, not ""
                    values[f.name] = "" if raw is None else str(raw)
            except (TypeError, ValueError):
                expected = f": expected {SWITCH_SPELLINGS}" if kind is bool else " is not a valid value"
                raise ConfigError(f"setting {key}={settings.get(key)!r}{expected}") from None
        for name, value in (overrides or {}).items():
            if value is None:
                continue
            kind = type(values[name])
            try:
                values[name] = parse_switch(value) if kind is bool else kind(value)
            except (TypeError, ValueError):
                expected = f": expected {SWITCH_SPELLINGS}" if kind is bool else f" is not a valid {kind.__name__}"
                raise ConfigError(f"spider argument {name}={value!r}{expected}") from None
        for name in CHOICE_FIELDS:  # Redis, Learned, EAGER: a choice is read in any case, as strategy options are
            values[name] = str(values[name]).strip().lower()
        choice = values["classifier"]  # true, 1, no, …: as every switch reads them
        if choice in (*SWITCH_ON, *SWITCH_OFF, ""):
            values["classifier"] = "on" if choice in SWITCH_ON else "off" if choice else "auto"  # empty: the default
        if values["store"] == "redis":
            values["redis_url"] = _redis_url(str(values["redis_url"]), str(values["redis_url_file"]))
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.max_pages < 0:
            raise ConfigError("TOPICCRAWL_MAX_PAGES (-a max_pages) must be >= 0 (0 = no limit)")
        if self.audit_pages < 1:
            raise ConfigError("TOPICCRAWL_AUDIT_PAGES must be >= 1 (TOPICCRAWL_AUDIT_ENABLED=False writes no audit.csv)")
        if not 0.0 <= self.anchor_weight <= 1.0:
            raise ConfigError("TOPICCRAWL_ANCHOR_WEIGHT (∂ of eq. 5) must lie in [0, 1]")
        if not 0.0 <= self.link_threshold <= 1.0:
            raise ConfigError("TOPICCRAWL_LINK_THRESHOLD (-a link_threshold) must lie in [0, 1]")
        if any(n < 1 for n in self.checkpoints):
            raise ConfigError(f"TOPICCRAWL_CHECKPOINTS={','.join(map(str, self.checkpoints))}: page counts must be >= 1")
        if self.topic_node and not self.topic_tree:  # the topic's words were crawled by, the node ignored
            raise ConfigError(f"topic node {self.topic_node!r} (-a topic_node, TOPICCRAWL_TOPIC_NODE) needs the tree it "
                              "is in: -a topic_tree=SPEC (docs/tdcs.md)")
        if self.pagerank_every < 1:
            raise ConfigError("TOPICCRAWL_PAGERANK_EVERY must be >= 1")
        if self.store not in ("memory", "redis"):
            raise ConfigError(f"TOPICCRAWL_STORE={self.store!r}: expected memory or redis")
        if self.lease_seconds <= 0 or self.idle_timeout < 0:
            raise ConfigError("TOPICCRAWL_LEASE_SECONDS must be > 0 and TOPICCRAWL_IDLE_TIMEOUT >= 0")
        if self.store == "redis":
            on_redis = [name for name, strategy in STRATEGIES.items() if strategy.redis]
            if self.strategy not in on_redis:
                raise ConfigError(f"TOPICCRAWL_STORE=redis supports the strategies {', '.join(on_redis)}, "
                                  f"not {self.strategy!r}")
        if self.classifier not in ("auto", "on", "off"):
            raise ConfigError(f"TOPICCRAWL_CLASSIFIER={self.classifier!r}: expected auto, on or off")
        for name, value, rules in (("PSEUDO", self.classifier_pseudo, PSEUDO_RULES),
                                   ("WORDLESS", self.classifier_wordless, WORDLESS_RULES),
                                   ("UNRANKED", self.classifier_unranked, UNRANKED_RULES),
                                   ("ESTIMATE", self.classifier_estimate, ESTIMATE_RULES)):
            if value not in rules:
                raise ConfigError(f"TOPICCRAWL_CLASSIFIER_{name}={value!r}: expected "
                                  f"{', '.join(rules[:-1])} or {rules[-1]}")
        if self.classifier_rank not in ("auto", "relevance", "full", "semantic", "title"):
            raise ConfigError(f"TOPICCRAWL_CLASSIFIER_RANK={self.classifier_rank!r}: "
                              "expected auto, relevance, full, semantic or title")
        if self.semantic_mode not in ("on", "off", "auto"):
            raise ConfigError(f"TOPICCRAWL_SEMANTIC_ENABLED={self.semantic_enabled!r}: expected auto, 1 or 0")
        if self.classifier_rank == "semantic" and self.semantic_mode != "on":
            raise ConfigError("TOPICCRAWL_CLASSIFIER_RANK=semantic needs the semantic prior: set TOPICCRAWL_SEMANTIC_ENABLED=1")
        if self.examples_background not in ("seeds", "none"):
            raise ConfigError(f"TOPICCRAWL_EXAMPLES_BACKGROUND={self.examples_background!r}: expected seeds or none")
        if self.holder_score not in ("auto", "relevance", "probability"):
            raise ConfigError(f"TOPICCRAWL_HOLDER_SCORE={self.holder_score!r}: expected auto, relevance or probability")
        if self.association_score not in ("relevance", "holder"):
            raise ConfigError(f"TOPICCRAWL_ASSOCIATION_SCORE={self.association_score!r}: expected relevance or holder")
        if not 0.0 < self.classifier_share <= 1.0:
            raise ConfigError("TOPICCRAWL_CLASSIFIER_SHARE must lie in (0, 1]")
        if not self.classifier_c > 0.0:
            raise ConfigError("TOPICCRAWL_CLASSIFIER_C must be > 0")
        if not self.classifier_report_c >= 0.0:
            raise ConfigError("TOPICCRAWL_CLASSIFIER_REPORT_C must be a C > 0, or 0 for one classifier "
                              "(TOPICCRAWL_CLASSIFIER_C's) that steers and reports")
        if not 0.0 <= self.classifier_steer_share <= 1.0:
            raise ConfigError("TOPICCRAWL_CLASSIFIER_STEER_SHARE must lie in [0, 1] (0: one classifier)")
        if not 0.0 <= self.classifier_quantile < 1.0:
            raise ConfigError("TOPICCRAWL_CLASSIFIER_QUANTILE must lie in [0, 1)")
        if self.classifier_refit_every < 1:
            raise ConfigError("TOPICCRAWL_CLASSIFIER_REFIT_EVERY must be >= 1")
        if self.dispatch not in ("auto", "eager", "patient"):
            raise ConfigError(f"TOPICCRAWL_DISPATCH={self.dispatch!r}: expected auto, eager or patient")
        if self.dispatch_margin < 0 or self.dispatch_max_wait < 0:
            raise ConfigError("TOPICCRAWL_DISPATCH_MARGIN and TOPICCRAWL_DISPATCH_MAX_WAIT must be >= 0")
        if self.dispatch_scope not in ("auto", "crawl", "slot"):
            raise ConfigError(f"TOPICCRAWL_DISPATCH_SCOPE={self.dispatch_scope!r}: expected auto, crawl or slot")
        if self.dispatch_seeds not in ("queued", "answered"):
            raise ConfigError(f"TOPICCRAWL_DISPATCH_SEEDS={self.dispatch_seeds!r}: expected queued or answered")
        if self.dispatch_seeds == "answered" and self.store == "redis":
            raise ConfigError("TOPICCRAWL_DISPATCH_SEEDS=answered is not available with TOPICCRAWL_STORE=redis "
                              "(memory scheduler only)")
        if self.dispatch == "patient" and self.store == "redis" and self.strategy == "learned":
            raise ConfigError("TOPICCRAWL_DISPATCH=patient is not available for strategy learned with "
                              "TOPICCRAWL_STORE=redis yet (memory scheduler only)")
        if self.dispatch_page_links not in ("auto", "streamed", "together", "after-seeds"):
            raise ConfigError(f"TOPICCRAWL_DISPATCH_PAGE_LINKS={self.dispatch_page_links!r}: "
                              "expected auto, streamed, together or after-seeds")
        if self.dispatch_page_links in ("together", "after-seeds") and self.store == "redis":
            raise ConfigError(f"TOPICCRAWL_DISPATCH_PAGE_LINKS={self.dispatch_page_links} is not available with "
                              "TOPICCRAWL_STORE=redis (memory scheduler only)")
        if self.dispatch_rule not in ("median", "probability", "any"):
            raise ConfigError(f"TOPICCRAWL_DISPATCH_RULE={self.dispatch_rule!r}: expected median, probability or any")
        if self.dispatch_patient_pages < 0:
            raise ConfigError(f"TOPICCRAWL_DISPATCH_PATIENT_PAGES={self.dispatch_patient_pages}: expected 0 (the whole "
                              "crawl) or a number of pages")
        if not 0.0 < self.dispatch_p <= 1.0:
            raise ConfigError("TOPICCRAWL_DISPATCH_P must lie in (0, 1]")
        if self.trap_guard_depth < 1:
            raise ConfigError("TOPICCRAWL_TRAP_GUARD_DEPTH must be >= 1")
        if self.checkpoint_interval < 0:
            raise ConfigError("TOPICCRAWL_CHECKPOINT_INTERVAL must be >= 0 seconds (0 = JOBDIR saved on close only)")
        if self.blas_threads < 0:
            raise ConfigError("TOPICCRAWL_BLAS_THREADS must be >= 0 (0 = the BLAS libraries' own default)")
        if not 0 <= self.gc_threshold <= 2**31 - 1:
            raise ConfigError("TOPICCRAWL_GC_THRESHOLD must be >= 0 (0 = Python's own setting) and at most 2147483647")
        if self.max_links_per_page < 0:
            raise ConfigError("TOPICCRAWL_MAX_LINKS_PER_PAGE must be >= 0 (0 = every link of a page)")
        if self.web_proxy and not self.offline:  # it was ignored without a word: the live web went direct
            raise ConfigError(f"TOPICCRAWL_WEB_PROXY={self.web_proxy!r} routes an offline web; TOPICCRAWL_WEB=live "
                              "does not use it (for a proxy to the live web set http_proxy/https_proxy, which "
                              "Scrapy's HttpProxyMiddleware reads)")
        if self.web_faults and not self.offline:  # ignored as well: the faults are the offline web's
            raise ConfigError(f"TOPICCRAWL_WEB_FAULTS={self.web_faults!r} injects faults into an offline web; "
                              "TOPICCRAWL_WEB=live does not use it")
        if self.web_proxy:
            from urllib.parse import urlsplit

            try:
                parts = urlsplit(self.web_proxy)
                ok = parts.scheme == "http" and bool(parts.hostname) and parts.port is not None
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(f"TOPICCRAWL_WEB_PROXY={self.web_proxy!r}: expected the URL of a running `scrapy "
                                  "serveweb`, http://HOST:PORT (e.g. http://127.0.0.1:8780)")
        if self.slow_seconds <= 0:
            raise ConfigError("TOPICCRAWL_SLOW_SECONDS must be > 0")
        if not 0.0 <= self.semantic_weight <= 1.0:
            raise ConfigError("TOPICCRAWL_SEMANTIC_WEIGHT must lie in [0, 1]")
        try:
            anchor_weight = self.semantic_anchor_weight_resolved
        except ValueError:
            raise ConfigError(f"TOPICCRAWL_SEMANTIC_ANCHOR_WEIGHT={self.semantic_anchor_weight!r}: "
                              "expected a number from 0 to 1, or empty") from None
        if not 0.0 <= anchor_weight <= 1.0:
            raise ConfigError("TOPICCRAWL_SEMANTIC_ANCHOR_WEIGHT must lie in [0, 1]")
        if self.semantic_anchor_pages < 0:
            raise ConfigError(f"TOPICCRAWL_SEMANTIC_ANCHOR_PAGES={self.semantic_anchor_pages}: expected 0 (the whole "
                              "crawl) or a number of pages")
        if self.semantic_holder_pages < 0:
            raise ConfigError(f"TOPICCRAWL_SEMANTIC_HOLDER_PAGES={self.semantic_holder_pages}: expected 0 (the whole "
                              "crawl) or a number of pages")
        if self.semantic_anchor_rescore and not self.semantic_anchor_pages:
            raise ConfigError("TOPICCRAWL_SEMANTIC_ANCHOR_RESCORE needs TOPICCRAWL_SEMANTIC_ANCHOR_PAGES (the page "
                              "count where the anchors' prior stops), not 0")
        if self.semantic_terms not in ("auto", "both", "anchor", "holder"):
            raise ConfigError(f"TOPICCRAWL_SEMANTIC_TERMS={self.semantic_terms!r}: expected auto, both, anchor or holder")
        if self.semantic_encoder not in ENCODERS:
            raise ConfigError(f"TOPICCRAWL_SEMANTIC_ENCODER={self.semantic_encoder!r}: expected {' or '.join(ENCODERS)}")
        parse_allow_hosts(self.live_allow_hosts)  # raises ConfigError on a bad entry


SWITCH_SPELLINGS = "1/0, true/false, yes/no or on/off"

#: the settings that name one of a few choices (a strategy, a store, a rule): read in any case
CHOICE_FIELDS = ("strategy", "scorer", "store", "classifier", "classifier_pseudo", "classifier_wordless",
                 "classifier_unranked", "classifier_estimate", "classifier_rank", "examples_background",
                 "holder_score", "association_score", "dispatch", "dispatch_scope", "dispatch_rule",
                 "dispatch_seeds", "dispatch_page_links", "semantic_encoder", "semantic_terms")


def topiccrawl_enabled(settings) -> bool:
    """``TOPICCRAWL_ENABLED`` read as every switch is (:class:`ConfigError` for another value)."""
    value = settings.get("TOPICCRAWL_ENABLED", True)
    try:
        return parse_switch(value, default=True)  # empty keeps the default, as for every switch
    except ValueError:
        raise ConfigError(f"setting TOPICCRAWL_ENABLED={value!r}: expected {SWITCH_SPELLINGS}") from None


#: the environment variable that may hold the Redis URL (a password stays out of ``ps`` and Scrapyd's log)
REDIS_URL_ENV = "TOPICCRAWL_REDIS_URL"


def _redis_url(url: str, path: str) -> str:
    """The Redis URL: the first line of ``TOPICCRAWL_REDIS_URL_FILE`` when set, else the environment
    variable ``TOPICCRAWL_REDIS_URL`` when the setting keeps its default, else the setting."""
    if path:
        try:
            lines = Path(path).expanduser().read_text(encoding="utf-8").split()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise ConfigError(f"TOPICCRAWL_REDIS_URL_FILE={path!r}: cannot read it ({why})") from None
        if not lines:
            raise ConfigError(f"TOPICCRAWL_REDIS_URL_FILE={path!r} is empty; expected one line redis://…")
        return lines[0]
    env = os.environ.get(REDIS_URL_ENV, "").strip()
    return env if env and url == TopicCrawlConfig.redis_url else url


#: setting -> default of every ``TOPICCRAWL_*`` setting of :class:`TopicCrawlConfig` (the add-on
#: sets them at ``default`` priority)
DEFAULTS: dict[str, object] = {
    setting_name(f.name): f.default_factory() if f.default is MISSING else f.default for f in fields(TopicCrawlConfig)
}


def known_settings() -> frozenset[str]:
    """Every ``TOPICCRAWL_*`` setting the project reads: :class:`TopicCrawlConfig`'s and every
    strategy's options."""
    names = set(DEFAULTS)
    for strategy in STRATEGIES:
        cls = get_strategy(strategy).options_class()
        if cls is not None:
            names.update(setting_name(name) for name in cls.kinds())
    return frozenset(names)


def check_setting_names(settings) -> None:
    """A one-line :class:`ConfigError` for a ``TOPICCRAWL_*`` setting the project does not read (a
    misspelling would otherwise be ignored without a word), naming the closest known one."""
    import difflib

    known = known_settings()
    for name in sorted(k for k in settings if isinstance(k, str) and k.startswith("TOPICCRAWL_")):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else " (docs/settings.md lists them)"
            raise ConfigError(f"unknown setting {name}{hint}")


def strategy_options(settings, strategy: str) -> StrategyOptions | None:
    """The options object of ``strategy`` from ``settings`` (Scrapy settings or a mapping of setting
    names): field ``wl_lnf0`` is read from ``TOPICCRAWL_WL_LNF0``, an unset or empty setting keeps
    the field's default; None for a strategy without options. A bad value or an unknown strategy
    is a one-line :class:`ConfigError` naming the setting."""
    try:
        cls = get_strategy(strategy).options_class()
        if cls is None:
            return None
        return cls.from_mapping({name: settings.get(setting_name(name)) for name in cls.kinds()})
    except FrontierError as exc:
        raise ConfigError(str(exc)) from None


def build_frontier(settings, strategy: str, is_relevant: Callable[[str], bool] | None = None,
                   paths: Callable[[], object] | None = None) -> FrontierBase:
    """The memory frontier of ``strategy`` with its options from ``settings``
    (:func:`strategy_options`); ``is_relevant``: the ground truth of link targets, for the
    strategies that need it (``oracle``); ``paths``: builds the offline web's
    :class:`~topiccrawl.scoring.groundtruth.TruthPaths` (or returns None without one), called only
    for a strategy that reads it (``oracle-path``)."""
    options = strategy_options(settings, strategy)
    spec = get_strategy(strategy)
    if spec.needs_truth and is_relevant is None:
        raise ConfigError(f"strategy {strategy!r} needs ground truth: set TOPICCRAWL_GROUND_TRUTH or crawl an "
                          "offline web (TOPICCRAWL_WEB) and give the topic evaluation labels")
    graph = paths() if spec.needs_paths and paths is not None else None
    if spec.needs_paths and graph is None:
        raise ConfigError(f"strategy {strategy!r} needs the whole link graph of an offline web: crawl one "
                          "(TOPICCRAWL_WEB) and give the topic evaluation labels")
    return spec.build(is_relevant, options, graph)


@dataclass(frozen=True)
class UrlList:
    """A spider argument naming pages (``-a seeds=``, ``-a examples=``): URLs, or ``truth:N`` —
    N truly relevant pages of an offline web, picked by the crawl (``truth``) — or, for examples,
    ``audit:PATH``: the pages a labelled audit calls on topic (``urls``) and off topic (``counter``)."""

    urls: tuple[str, ...] = ()
    truth: int | None = None
    counter: tuple[str, ...] = ()
    audit: Path | None = None  # the audit.csv read for ``audit:PATH``
    kept: bool = False  # ``audit:FOLDER`` read a labelled audit kept beside the folder's audit.csv


def parse_url_list(name: str, value: str | None, offline: bool = True) -> UrlList:
    """The one reading of ``-a seeds=`` / ``-a examples=``: comma-separated http(s) URLs, or
    ``truth:N`` (N ≥ 1) on an offline web, or for examples ``audit:PATH`` (a labelled audit.csv or
    the crawl folder holding it); empty: no URLs. ConfigError (one line) otherwise."""
    value = (value or "").strip()
    if value.startswith("audit:"):
        if name != "examples":
            raise ConfigError(f"spider argument {name}={value!r}: audit: names examples (-a examples=audit:PATH)")
        from topiccrawl.crawl.audit import audit_file, audit_labels
        from topiccrawl.scoring.audit import AuditError

        named = Path(value[6:].strip() or ".")
        path = audit_file(named)
        try:
            yes, no = audit_labels(path)
        except AuditError as exc:
            raise ConfigError(f"spider argument examples: {exc}") from None
        bad = next((u for u in (*yes, *no) if not _is_http_url(u)), None)
        if bad is not None:
            raise ConfigError(f"spider argument examples={value!r}: {bad!r} is not an http(s) URL a crawl can fetch")
        return UrlList(tuple(yes), counter=tuple(no), audit=path, kept=named.is_dir() and path.name != "audit.csv")
    if value.startswith("truth:"):
        if "," in value:
            raise ConfigError(f"spider argument {name}={value!r}: truth:N stands alone; it cannot be mixed with URLs")
        if not (value[6:].isascii() and value[6:].isdigit()) or int(value[6:]) < 1:
            raise ConfigError(f"spider argument {name}={value!r}: truth:N needs a whole number N >= 1")
        if not offline:
            raise ConfigError(f"spider argument {name}={value!r}: truth:N needs an offline web (TOPICCRAWL_WEB)")
        return UrlList(truth=int(value[6:]))
    urls = tuple(filter(None, (u.strip() for u in value.split(","))))
    for url in urls:
        if not _is_http_url(url):
            forms = "URL,URL,…, truth:N or audit:PATH" if name == "examples" else "URL,URL,… or truth:N"
            raise ConfigError(f"spider argument {name}: {url!r} is not an http(s) URL a crawl can fetch (expected {forms})")
    from topiccrawl.scoring.topic import distinct_pages

    return UrlList(tuple(distinct_pages(urls)))  # one page under two spellings (a fragment) is one page


def _is_http_url(url: str) -> bool:
    from topiccrawl.scoring.text import followable

    return followable(url)


def page_links_mode(config, has_examples: bool, language: str = "en") -> str:
    """``TOPICCRAWL_DISPATCH_PAGE_LINKS`` resolved: ``auto`` holds each page's links beyond the seeds'
    (``after-seeds``) for a ``learned`` crawl whose topic has words, no example pages and a language
    other than Chinese, on the memory scheduler, and streams them otherwise (docs/learned.md,
    "`after-seeds` for `learned` with words, after the title rank" and "A check on two fresh
    generated webs")."""
    if config.dispatch_page_links != "auto":
        return config.dispatch_page_links
    if config.strategy == "learned" and not has_examples and language != "zh" and config.store != "redis":
        return "after-seeds"
    return "streamed"


#: TOPICCRAWL_SEMANTIC_TERMS=auto where ``auto`` turns the prior on: the anchor term takes it for this
#: many pages, then the links queued under it are re-scored without it (docs/learned.md, "Re-scoring
#: when the anchors' prior stops: a second trial")
AUTO_ANCHOR_PAGES = 60


def semantic_auto_off(config, has_words: bool, has_examples: bool, language: str) -> str:
    """Why ``TOPICCRAWL_SEMANTIC_ENABLED=auto`` leaves the semantic prior off for this crawl, ``""``
    when it may turn it on (its model at hand offline is checked apart): a ``learned`` crawl whose
    topic has words, no example pages and the language English (docs/learned.md, "The prior on the
    holder term by default for `learned`")."""
    if config.strategy != "learned":
        return f"strategy {config.strategy} (auto is for learned)"
    if config.scorer != "vsm" or config.topic_tree:
        return "the topic is a category node"
    if not has_words:
        return "the topic has no words"
    if has_examples:
        return "the topic has example pages"
    if language != "en":
        return f"the topic's language is {language!r} (the default model is English)"
    return ""
