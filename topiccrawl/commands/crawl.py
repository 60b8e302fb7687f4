"""``scrapy crawl`` with the project's user errors checked first.

A broken topic file, a bad ``TOPICCRAWL_*`` value, a malformed corpus spec or a missing corpus
directory are user mistakes: they get one line on stderr and exit status 2, before any crawl
starts, instead of a traceback from inside the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from topiccrawl.config import ConfigError, TopicCrawlConfig
from topiccrawl.frontier import STRATEGIES, FrontierError
from topiccrawl.groundtruth import GroundTruthError
from topiccrawl.topic import TopicError, load_topic
from topiccrawl.web.corpus import CorpusError, parse_spec

USER_ERRORS = (ConfigError, TopicError, CorpusError, GroundTruthError, FrontierError)


def check_crawl_inputs(settings, spargs: dict) -> None:
    """Raise one of ``USER_ERRORS`` for a bad topic, setting, strategy or corpus spec."""
    keys = ("topic", "strategy", "max_pages", "link_threshold")
    cfg = TopicCrawlConfig.from_settings(settings, {k: spargs.get(k) for k in keys})
    load_topic(cfg.topic)
    if cfg.strategy not in STRATEGIES:
        raise FrontierError(f"unknown strategy {cfg.strategy!r}; expected one of: {', '.join(STRATEGIES)}")
    if cfg.offline:
        spec = parse_spec(cfg.web)
        if spec.kind != "generated" and spec.arg and not Path(spec.arg).exists():
            raise CorpusError(f"{spec.kind} corpus path not found: {spec.arg}")
    if cfg.ground_truth and not Path(cfg.ground_truth).is_file():
        raise GroundTruthError(f"{cfg.ground_truth}: labels file not found")


class Command(ScrapyCrawlCommand):
    def run(self, args, opts) -> None:
        if args and self.settings.getbool("TOPICCRAWL_ENABLED", True):
            try:
                check_crawl_inputs(self.settings, opts.spargs)
            except USER_ERRORS as exc:
                print(f"error: {exc}", file=sys.stderr)
                self.exitcode = 2
                return
        super().run(args, opts)
