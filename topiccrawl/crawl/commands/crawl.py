"""``scrapy crawl`` with the project's user errors checked first.

A broken topic file, a bad or unknown ``TOPICCRAWL_*`` setting, a malformed corpus spec or fault
spec, a missing corpus directory, an unknown spider argument, seeds that are not URLs (or none where
the spider needs them), an output directory or feed that cannot be written, ``-O`` onto the feed of
a crawl resumed from JOBDIR in a non-line format, a JOBDIR of another crawl or whose state cannot be
read, or an unreachable Redis (``TOPICCRAWL_STORE=redis``) are user mistakes: they get one line on
stderr and exit status 2, before any crawl starts (and before Scrapy's start-up lines), instead of a
traceback from inside the engine. A resumed crawl (JOBDIR holding a previous run), or a worker
started again on a Redis crawl with pages counted, appends to its ``-O`` JSON-lines feed instead of
overwriting the pages of the runs before.
"""

from __future__ import annotations

import inspect
import logging
import sys
from datetime import datetime, timezone
from logging.handlers import BufferingHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.spiderloader import get_spider_loader
from w3lib.url import canonicalize_url

from topiccrawl.crawl.errors import redact_text
from topiccrawl.crawl.runtime import (
    OVERRIDABLE,
    check_output_dir,
    checks_sites,
    make_topic_and_scorer,
    output_path,
    output_template,
    scrapyd_job,
)
from topiccrawl.crawl.settings import (
    ConfigError,
    TopicCrawlConfig,
    check_setting_names,
    parse_url_list,
    strategy_options,
    topiccrawl_enabled,
)
from topiccrawl.discovery.pages import DWDBRMError
from topiccrawl.discovery.search import SearchBackendError
from topiccrawl.scoring.dmoz import TreeError
from topiccrawl.scoring.groundtruth import GroundTruthError
from topiccrawl.scoring.topic import TopicError, load_topic
from topiccrawl.sitefinder.rules import SiteFinderError
from topiccrawl.strategies.base import STRATEGIES, FrontierError
from topiccrawl.weblab.corpus import CorpusError, check_spec
from topiccrawl.weblab.faults import FaultSpecError, parse_faults

logger = logging.getLogger(__name__)

USER_ERRORS = (ConfigError, TopicError, CorpusError, GroundTruthError, FrontierError, TreeError,
               SiteFinderError, SearchBackendError, DWDBRMError, FaultSpecError)
#: the exit status of a crawl by its close reason: 2 for a user mistake found only once it ran
#: (``redis_refused``: a worker whose options or spider do not match the Redis crawl it joined), 1
#: for a crawl that could not go on (``redis_lost``: Redis gone mid-crawl)
EXIT_STATUS = {"no_topic_words": 2, "no_truth_pages": 2, "redis_refused": 2, "redis_lost": 1, "jobdir_failed": 1,
               "no_pages": 1}

#: feed formats whose files can be appended to (one record a line)
LINE_FORMATS = ("jsonlines", "jsonl", "jl")
#: feed formats that are one document with an end (a JSON array, CSV's header, XML's root): an
#: append (-o) to a file holding one starts a second
DOCUMENT_FORMATS = ("json", "csv", "xml")


def check_crawl_inputs(settings, spargs: dict, spidercls=None) -> None:
    """Raise one of ``USER_ERRORS`` for a bad topic, setting, strategy, corpus or fault spec,
    spider argument, seed list or output directory (spiders may define a
    ``check_arguments(**spargs)`` class method)."""
    if spidercls is not None:
        settings = settings.copy()
        settings.setdict(getattr(spidercls, "custom_settings", None) or {}, priority="spider")
        check_argument_names(spidercls, spargs)
    check_setting_names(settings)
    cfg = TopicCrawlConfig.from_settings(settings, {k: spargs.get(k) for k in OVERRIDABLE})
    topic = None
    if cfg.scorer == "vsm" and not cfg.topic_tree:
        topic = load_topic(cfg.topic)
        given = parse_url_list("examples", spargs.get("examples"), cfg.offline)  # audit: may label none 1
        counter = {canonicalize_url(url) for url in topic.counter_examples}  # a page, whatever its fragment
        both = [url for url in given.urls if canonicalize_url(url) in counter]
        if both:
            raise ConfigError(f"-a examples: {both[0]} is a counter-example of topic {topic.path or topic.name} "
                              "(counter_examples): a page is an example or a counter-example, not both")
        if not topic.words and not topic.has_examples and not (given.urls or given.truth) and not resuming(settings):
            if given.counter:
                raise TopicError(f"{topic.path or topic.name}: no [words] table and no example pages: the audit "
                                 f"{spargs['examples'][6:].strip()!r} labels no page on topic (1), only off topic "
                                 "(0); label some pages 1, or give [words] or other example pages")
            raise TopicError(f"{topic.path or topic.name}: no [words] table (topic word = weight) and no example "
                             "pages to learn them from (examples = [...] or examples_dir in the file, or -a examples=URL,URL)")
        if (not topic.words and topic.examples_dir and not topic.examples and not (given.urls or given.truth)
                and not resuming(settings)):  # the folder is all it has: a folder without a page is known now
            from topiccrawl.learning.examples import example_files

            usable, skipped = example_files(topic.examples_dir, settings.getint("DOWNLOAD_MAXSIZE"))
            if not usable:
                why = "; ".join(f"{path.name or path}: {reason}" for path, reason in skipped[:3])
                more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
                raise TopicError(f"{topic.path or topic.name}: no [words] table, and examples_dir {topic.examples_dir} "
                                 f"holds no saved page to learn them from ({why}{more})")
    else:  # a misspelt scorer, a tree that cannot be read, a node it lacks: one line before the crawl
        make_topic_and_scorer(cfg)  # the tree is read once (cached) for the crawl too
    check = getattr(spidercls, "check_arguments", None)
    if check is not None:
        check(**spargs)
        check_live_backend(spidercls, spargs, cfg, settings)
    serving = list(STRATEGIES)  # a site queue for the spider that checks sites, a page queue for the others
    if spidercls is not None:
        sites = checks_sites(spidercls)
        serving = [name for name, strategy in STRATEGIES.items() if strategy.sites == sites]
    if cfg.strategy not in serving:
        what = "unknown strategy" if cfg.strategy not in STRATEGIES else f"the {spidercls.name} spider runs no strategy"
        raise FrontierError(f"{what} {cfg.strategy!r}; expected one of: {', '.join(serving)}")
    options = strategy_options(settings, cfg.strategy)  # a bad TOPICCRAWL_<STRATEGY>_* value: one line, before the crawl
    if cfg.store == "redis" and cfg.strategy == "learned":  # an option the Redis store lacks: the same
        from topiccrawl.redis.learned import check_redis_options

        check_redis_options(options)
    if cfg.semantic_mode == "on":  # a missing package or model: one line before the crawl (auto never stops it)
        from topiccrawl.learning.semantic import SemanticError, load_encoder

        try:
            load_encoder(cfg.semantic_model, cfg.blas_threads, cfg.semantic_encoder, cfg.semantic_cache_dir)
        except SemanticError as exc:
            raise ConfigError(str(exc)) from None
    check_truth(cfg, topic)
    if cfg.offline:
        spec = check_spec(cfg.web)
        if spec.kind != "generated" and spec.arg and not Path(spec.arg).exists():
            raise CorpusError(f"{spec.kind} corpus path not found: {spec.arg}")
        if cfg.web_faults and not cfg.web_proxy:
            parse_faults(cfg.web_faults)
    if spidercls is not None:
        check_seeds(spidercls, spargs, cfg, topic)
        job = scrapyd_job(spargs.get("_job"))
        check_output_dir(output_path(output_template(settings, job), spidercls.name, datetime.now(timezone.utc), job))
        if settings.get("JOBDIR"):  # a JOBDIR written by another spider, topic or web is refused
            from topiccrawl.crawl.jobdir import STATE_FILE, check_jobdir, read_state

            check_output_dir(Path(settings["JOBDIR"]), "JOBDIR")  # read-only, not a folder: a traceback before
            check_jobdir(settings["JOBDIR"], spidercls.name, cfg)
            state = Path(settings["JOBDIR"]) / STATE_FILE
            if state.is_file() and cfg.store != "redis":  # so is a crawl state that cannot be read (the
                read_state(state, keep=True)  # scheduler takes what is read here; Redis keeps its own state)
    if cfg.ground_truth and not Path(cfg.ground_truth).is_file():
        raise GroundTruthError(f"{cfg.ground_truth}: labels file not found")
    if cfg.store == "redis":
        from topiccrawl.redis import check_redis

        check_redis(cfg.redis_url)  # unreachable / wrong password: one line before the crawl


def resuming(settings) -> bool:
    """A JOBDIR that holds a crawl to resume: its state has the words derived from the examples it
    started with (a crawl stopped before any were derived says so itself, with close reason
    ``no_topic_words``)."""
    from topiccrawl.crawl.jobdir import JOB_FILE

    jobdir = settings.get("JOBDIR")
    return bool(jobdir) and (Path(jobdir) / JOB_FILE).is_file()


def check_truth(cfg: TopicCrawlConfig, topic) -> None:
    """A benchmark strategy that reads ground truth (``oracle``) or the offline web's link graph as
    well (``oracle-path``) without what it reads: one line before the crawl, not a crawl that never
    finds its truth (``topic``: None when a category node is the topic)."""
    strategy = STRATEGIES[cfg.strategy]
    if strategy.needs_paths and not cfg.offline:
        raise ConfigError(f"strategy {cfg.strategy!r} needs the whole link graph of an offline web: crawl one "
                          "(TOPICCRAWL_WEB)")
    if strategy.needs_truth and not (cfg.offline or cfg.ground_truth):
        raise ConfigError(f"strategy {cfg.strategy!r} needs ground truth: set TOPICCRAWL_GROUND_TRUTH or crawl an "
                          "offline web (TOPICCRAWL_WEB)")
    if strategy.needs_truth and topic is not None and not topic.labels:
        raise ConfigError(f"strategy {cfg.strategy!r} needs the topic's evaluation labels: "
                          f"labels = [...] in {topic.path or topic.name}")


def spider_arguments(spidercls) -> set[str]:
    """The ``-a`` names a project spider takes: its ``__init__`` keywords (up the class
    hierarchy) and the arguments that override settings (``topic``, ``strategy``, …)."""
    names = set(OVERRIDABLE)
    for cls in spidercls.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                names.add(p.name)
    return names


def check_argument_names(spidercls, spargs: dict) -> None:
    """Refuse a ``-a`` name the spider does not know (a misspelled ``max_page`` would be silently
    ignored). Names starting with ``_`` pass: Scrapyd adds ``_job``."""
    if not hasattr(spidercls, "topiccrawl_queue"):  # not a topiccrawl spider
        return
    known = spider_arguments(spidercls)
    unknown = sorted(k for k in spargs if k not in known and not k.startswith("_"))
    if unknown:
        raise ConfigError(f"unknown spider argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for "
                          f"{spidercls.name}; expected one of: {', '.join(sorted(known - {'name'}))}")


def check_live_backend(spidercls, spargs: dict, cfg: TopicCrawlConfig, settings) -> None:
    """On the live web, the ``local`` search backend (a spider's default) without a ``search_url``
    names the offline web's engine, ``search.topiccrawl.test``: one line before the crawl, not a
    failed DNS lookup, retried, for every search call. Only for a crawl that searches (the
    spider's ``searches(spargs, settings)``: not ``forward``, not a site finder given sites only)."""
    searches = getattr(spidercls, "searches", None)
    if cfg.offline or searches is None or not searches(spargs, settings):
        return
    backends = [b.strip() for b in str(spargs.get("backend") or "local").split(",")]
    if "local" in backends and not (spargs.get("search_url") or spargs.get("backend_url")):
        raise SearchBackendError("search backend local is the offline web's engine (search.topiccrawl.test), not on "
                                 "the live web: give -a backend=searxng -a search_url=URL of a SearXNG instance, or "
                                 "-a search_url=URL of an engine that answers as the local one (docs/dwdbrm.md)")


def check_seeds(spidercls, spargs: dict, cfg: TopicCrawlConfig, topic) -> None:
    """Seeds that are not URLs, and no seeds at all where the spider needs them: a spider with
    ``topiccrawl_seeds = "required"`` needs ``-a seeds`` or the topic's seeds, one with ``"web"``
    falls back to the offline web's entry pages (so only a live crawl needs seeds)."""
    for name in ("seeds", "examples"):
        # e.g. -a examples=$UNSET or seeds=$A,$B both unset: a mistake, not "none"
        if name in spargs and not any(part.strip() for part in str(spargs[name]).split(",")):
            raise ConfigError(f"spider argument {name} is empty: give URL,URL,…{', truth:N' if cfg.offline else ''}"
                              f"{' or audit:PATH' if name == 'examples' else ''}, or leave it out")
        if spargs.get(name):
            pages = parse_url_list(name, spargs[name], cfg.offline)
            if pages.truth is not None and topic is not None and not topic.labels:
                raise ConfigError(f"spider argument {name}=truth:{pages.truth}: picks truly relevant pages by the "
                                  f"topic's evaluation labels, and {topic.path or topic.name} has none (labels = [...])")
    need = getattr(spidercls, "topiccrawl_seeds", None)
    if spargs.get("seeds") or need is None or topic is None or topic.seeds:
        return
    if need == "required" or not cfg.offline:
        where = "" if need == "required" else " (a live crawl has no entry pages of its own)"
        raise ConfigError(f"{spidercls.name}: no seed pages{where}: pass -a seeds=URL,URL"
                          f"{' (or truth:N on an offline web)' if need == 'required' else ''} or add seeds to the topic")


def local_feed_path(uri: str) -> Path | None:
    """The file of a feed URI written to the local disk (a path or ``file://``); None otherwise."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if not parts.scheme or len(parts.scheme) == 1:  # a path (or a Windows drive letter)
        return Path(uri)
    return None


def feed_file(uri: str, params: dict | None = None) -> Path | None:
    """The local file a feed URI writes this run, its placeholders filled from ``params`` (the
    spider's name and arguments, as Scrapy fills them); None for a remote feed, or one whose path
    holds another placeholder (``%(time)s``, ``%(batch_id)d``: a new file each run)."""
    path = local_feed_path(str(uri))
    if path is None or "%" not in str(path):
        return path
    try:
        return Path(str(path) % (params or {}))
    except (KeyError, ValueError, TypeError):
        return None


def check_feeds(feeds: dict) -> None:
    """The folder of every local feed file must be writable (a placeholder-free prefix of it)."""
    for uri in feeds:
        path = local_feed_path(str(uri))
        if path is None:
            continue
        folder = path.parent
        while "%" in str(folder):  # %(name)s, %(time)s, …: check the folder above the placeholders
            folder = folder.parent
        if path.is_dir():
            raise ConfigError(f"feed {uri}: is a directory, expected a file")
        check_output_dir(folder.absolute(), f"the folder of feed {uri},")


def resume_feeds(settings, params: dict | None = None) -> dict | None:
    """``FEEDS`` for a crawl resumed from JOBDIR: a ``-O`` JSON-lines feed is appended to rather
    than overwritten, so the pages of the earlier runs stay in it; ``-O`` with another format is a
    :class:`ConfigError` (appending would break a JSON array, CSV header or XML document). None
    when nothing changes. ``params`` fill a feed path's placeholders (:func:`feed_file`)."""
    jobdir = settings.get("JOBDIR")
    feeds = settings.getdict("FEEDS")
    if not jobdir or not feeds or not Path(jobdir).is_dir() or not any(Path(jobdir).iterdir()):
        return None
    why = f"JOBDIR {jobdir} holds a crawl to resume"
    _no_second_document(feeds, why, params)
    return _appending(feeds, why, f"resuming from JOBDIR {jobdir}")


def _ended_document(options) -> bool:
    """An ``-o`` feed of a format with an end (:data:`DOCUMENT_FORMATS`)."""
    options = options or {}
    return not options.get("overwrite") and str(options.get("format", "")).lower() in DOCUMENT_FORMATS


def _no_second_document(feeds: dict, why: str, params: dict | None = None) -> None:
    """A :class:`ConfigError` naming ``why`` for an ``-o`` JSON, CSV or XML feed whose local file
    holds the earlier run's document: Scrapy would append a second one (the file no longer valid)."""
    for uri, options in feeds.items():
        path = feed_file(str(uri), params)
        if _ended_document(options) and path is not None and path.is_file() and path.stat().st_size:
            fmt = str(options.get("format", "")).lower()
            raise ConfigError(f"-o {uri}: {why}, and appending to this {fmt} feed would start a second document "
                              f"after the one already in it (no longer valid {fmt}); use a .jsonl feed, or "
                              "another file for this run")


def rejoin_feeds(settings, spargs: dict, spider: str) -> dict | None:
    """``FEEDS`` for a worker that joins a Redis crawl with pages counted already (a restarted
    worker, or one added later): a ``-O`` feed file that exists and is not empty is appended to
    (JSON lines) rather than overwritten, so the pages this worker's earlier run wrote stay in it;
    another format is a :class:`ConfigError`, as for :func:`resume_feeds`. None when nothing
    changes."""
    feeds = settings.getdict("FEEDS")
    cfg = TopicCrawlConfig.from_settings(settings, {k: spargs.get(k) for k in OVERRIDABLE})
    if cfg.store != "redis" or not any(options and (options.get("overwrite") or _ended_document(options))
                                       for options in feeds.values()):
        return None
    params = {**spargs, "name": spider}
    kept = {uri: options for uri, options in feeds.items()
            if (path := feed_file(str(uri), params)) is not None and path.is_file() and path.stat().st_size}
    if not kept:
        return None
    from topiccrawl.redis.connection import connect, crawl_keys

    crawl_id = cfg.crawl_id or spider
    client = connect(cfg.redis_url, timeout=5.0)
    try:
        dp = int(client.hget(crawl_keys(crawl_id)["stats"], "dp") or 0)
    finally:
        client.close()
    if not dp:
        return None
    why = f"crawl id {crawl_id!r} in Redis has {dp} pages counted"
    _no_second_document(kept, why, params)
    return {**feeds, **_appending(kept, why, f"joining crawl id {crawl_id!r} in Redis ({dp} pages counted)")}


def _appending(feeds: dict, why: str, doing: str) -> dict:
    """``feeds`` with every ``-O`` (overwrite) JSON-lines feed turned into an append; another
    format is a :class:`ConfigError` naming ``why``."""
    changed = {}
    for uri, options in feeds.items():
        options = dict(options or {})
        if options.get("overwrite"):
            if str(options.get("format", "")).lower() not in LINE_FORMATS:
                raise ConfigError(f"-O {uri}: {why}, and overwriting its feed would lose the pages of the earlier "
                                  f"runs, while appending (-o) would start a second {options.get('format')} "
                                  "document in it; use a .jsonl feed, or -O another file for this run")
            options["overwrite"] = False
            logger.info("%s: appending to feed %s instead of overwriting it", doing, uri)
        changed[uri] = options
    return changed


def _to_log_file(settings, message: str) -> None:
    """The refusal as an ERROR line in ``LOG_FILE`` too, when one is set (Scrapyd sets it per job:
    the job's log then says why it failed, instead of no log at all)."""
    path = settings.get("LOG_FILE")
    if not path:
        return
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding=settings.get("LOG_ENCODING") or "utf-8") as fh:
            fh.write(f"{datetime.now():%Y-%m-%d %H:%M:%S} [{__name__}] ERROR: {message}\n")
    except OSError:
        pass  # stderr has the line


class Command(ScrapyCrawlCommand):
    """The inputs are checked in ``process_options``, before Scrapy builds its crawler process and
    logs its start-up lines, so a mistake is the only line a user sees; what the checks log (a feed
    appended to, …) is held and logged once logging is set up."""

    _spidercls = None
    _held: tuple[logging.LogRecord, ...] = ()

    def process_options(self, args, opts) -> None:
        super().process_options(args, opts)
        if not args:
            return
        try:
            if not topiccrawl_enabled(self.settings):
                return
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        # the checks' log records, held until Scrapy has set up logging (never flushed before)
        root, held = logging.getLogger(), BufferingHandler(capacity=sys.maxsize)
        level = root.level
        root.addHandler(held)
        root.setLevel(logging.DEBUG)
        try:
            loader = get_spider_loader(self.settings)
            try:
                spidercls = loader.load(args[0])
            except KeyError:  # Scrapy's own report of it is a traceback
                import difflib

                names = sorted(loader.list())
                close = difflib.get_close_matches(args[0], names, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise ConfigError(f"unknown spider {args[0]!r}{hint} (the spiders: {', '.join(names)})") from None
            check_crawl_inputs(self.settings, opts.spargs, spidercls)
            feeds = resume_feeds(self.settings, {**opts.spargs, "name": spidercls.name if spidercls else args[0]})
            if feeds is None and spidercls is not None:
                feeds = rejoin_feeds(self.settings, opts.spargs, spidercls.name)
            check_feeds(feeds or self.settings.getdict("FEEDS"))
            if spidercls is not None and self.settings.get("JOBDIR"):  # the last: once every check passed
                from topiccrawl.crawl.jobdir import mend_spider_state

                if (mended := mend_spider_state(self.settings["JOBDIR"])) is not None:
                    logger.warning(mended)
        except USER_ERRORS as exc:
            message = redact_text(str(exc))
            print(f"error: {message}", file=sys.stderr)
            _to_log_file(self.settings, message)
            raise SystemExit(2) from None
        finally:
            root.removeHandler(held)
            root.setLevel(level)
        if feeds is not None:
            self.settings.set("FEEDS", feeds, priority="cmdline")
        self._spidercls, self._held = spidercls, tuple(held.buffer)

    def run(self, args, opts) -> None:
        for record in self._held:
            logging.getLogger(record.name).handle(record)
        if len(args) == 1 and self._spidercls is not None:
            self._crawl(args[0], opts)
            return
        super().run(args, opts)

    def _crawl(self, name: str, opts) -> None:
        """Scrapy's ``crawl``, with the exit status of its close reason (:data:`EXIT_STATUS`): 2
        for a user mistake found only once it ran, as for those found before it; 1 for a worker
        that lost Redis whatever its close reason (the loss may come during a Ctrl-C stop)."""
        crawler = self._create_crawler(name)
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        else:
            self.exitcode = EXIT_STATUS.get(crawler.stats.get_value("finish_reason"), self.exitcode)
            if not self.exitcode and crawler.stats.get_value("topiccrawl/redis/lost"):
                self.exitcode = 1  # Redis lost as the crawl closed for another reason (Ctrl-C, its budget)
            if not self.exitcode and crawler.stats.get_value("topiccrawl/jobdir_error"):
                self.exitcode = 1  # JOBDIR not written as the crawl closed (a full disk): its state is older
