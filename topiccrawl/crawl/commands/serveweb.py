"""``scrapy serveweb CORPUS [options]``: run the offline web lab (same as ``python -m topiccrawl.weblab``)."""

from __future__ import annotations

import argparse

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topiccrawl.weblab.__main__ import add_arguments, run


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False  # the lab runs its own reactor
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "CORPUS [--port N] [--bind ADDR] [--faults SPEC] [--labels-out FILE]"

    def short_desc(self) -> str:
        return "Serve a corpus as an offline web (HTTP proxy + search engine)"

    def long_desc(self) -> str:
        return ("Serve a corpus (e.g. generated:zh-disaster?pages=2000) on loopback as an HTTP forward "
                "proxy with a SearXNG-shaped search engine; see docs/offline-web.md.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_arguments(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("expected exactly one CORPUS spec, e.g. generated:zh-disaster")
        opts.corpus = args[0]
        self.exitcode = run(opts)
