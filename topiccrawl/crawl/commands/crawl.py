"""``scrapy crawl`` with the project's user errors checked first.

A broken topic file, a bad ``TOPICCRAWL_*`` value, a malformed corpus spec, a missing corpus
directory or an unreachable Redis (``TOPICCRAWL_STORE=redis``) are user mistakes: they get one
line on stderr and exit status 2, before any crawl starts, instead of a traceback from inside the
engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from topiccrawl.crawl.runtime import OVERRIDABLE
from topiccrawl.crawl.settings import ConfigError, TopicCrawlConfig
from topiccrawl.discovery.pages import DWDBRMError
from topiccrawl.discovery.search import SearchBackendError
from topiccrawl.scoring.dmoz import TreeError
from topiccrawl.scoring.groundtruth import GroundTruthError
from topiccrawl.scoring.topic import TopicError, load_topic
from topiccrawl.sitefinder.rules import SiteFinderError
from topiccrawl.strategies.base import STRATEGIES, FrontierError
from topiccrawl.weblab.corpus import CorpusError, parse_spec

USER_ERRORS = (ConfigError, TopicError, CorpusError, GroundTruthError, FrontierError, TreeError,
               SiteFinderError, SearchBackendError, DWDBRMError)


def check_crawl_inputs(settings, spargs: dict, spidercls=None) -> None:
    """Raise one of ``USER_ERRORS`` for a bad topic, setting, strategy, corpus spec or spider
    argument (spiders may define a ``check_arguments(**spargs)`` class method)."""
    if spidercls is not None:
        settings = settings.copy()
        settings.setdict(getattr(spidercls, "custom_settings", None) or {}, priority="spider")
    cfg = TopicCrawlConfig.from_settings(settings, {k: spargs.get(k) for k in OVERRIDABLE})
    if cfg.scorer == "vsm" and not cfg.topic_tree:
        topic = load_topic(cfg.topic)
        if not topic.words and not topic.has_examples and not spargs.get("examples"):
            raise TopicError(f"{topic.path or topic.name}: no [words] table (topic word = weight) and no example "
                             "pages to learn them from (examples = [...] or examples_dir in the file, or -a examples=URL,URL)")
    elif not (cfg.topic_tree and cfg.topic_node):
        raise TreeError(f"scorer {cfg.scorer!r} needs -a topic_tree=SPEC -a topic_node=NODE")
    check = getattr(spidercls, "check_arguments", None)
    if check is not None:
        check(**spargs)
    if cfg.strategy not in STRATEGIES:
        raise FrontierError(f"unknown strategy {cfg.strategy!r}; expected one of: {', '.join(STRATEGIES)}")
    if cfg.offline:
        spec = parse_spec(cfg.web)
        if spec.kind != "generated" and spec.arg and not Path(spec.arg).exists():
            raise CorpusError(f"{spec.kind} corpus path not found: {spec.arg}")
    if cfg.ground_truth and not Path(cfg.ground_truth).is_file():
        raise GroundTruthError(f"{cfg.ground_truth}: labels file not found")
    if cfg.store == "redis":
        from topiccrawl.redis import check_redis

        check_redis(cfg.redis_url)  # unreachable / wrong password: one line before the crawl


class Command(ScrapyCrawlCommand):
    def run(self, args, opts) -> None:
        if args and self.settings.getbool("TOPICCRAWL_ENABLED", True):
            try:
                try:
                    spidercls = self.crawler_process.spider_loader.load(args[0])
                except KeyError:
                    spidercls = None  # Scrapy reports the unknown spider itself
                check_crawl_inputs(self.settings, opts.spargs, spidercls)
            except USER_ERRORS as exc:
                print(f"error: {exc}", file=sys.stderr)
                self.exitcode = 2
                return
        super().run(args, opts)
