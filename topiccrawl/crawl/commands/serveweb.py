"""``scrapy serveweb CORPUS [options]``: run the offline web lab (same as ``python -m topiccrawl.weblab``)."""

from __future__ import annotations

import argparse
import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from topiccrawl.weblab.__main__ import add_arguments, run
from topiccrawl.weblab.corpus import READERS, CorpusError, open_corpus


def urls_of(spec: str, paths: list[str], readers: list[str] = ()) -> list[str]:
    """The served URL of each file path of an ``htmltree:`` corpus (its opaque URL with
    ``opaque=1``); :class:`CorpusError` (one line) for another corpus kind or an unknown path."""
    for item in readers:
        kind, eq, target = item.partition("=")
        if not eq or ":" not in target:
            raise CorpusError(f"--reader {item!r}: expected KIND=MODULE:FUNCTION")
        READERS[kind.strip().lower()] = target.strip()
    corpus = open_corpus(spec)
    url_of = getattr(corpus, "url_of", None)
    if url_of is None:
        raise CorpusError(f"--url-of: {corpus.name} pages are not named by a file path (htmltree: corpora are)")
    return [url_of(path) for path in paths]


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False  # the lab runs its own reactor
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "CORPUS [--port N] [--bind ADDR] [--faults SPEC] [--labels-out FILE] [--url-of PATH ...]"

    def short_desc(self) -> str:
        return "Serve a corpus as an offline web (HTTP proxy + search engine)"

    def long_desc(self) -> str:
        return ("Serve a corpus (e.g. generated:zh-disaster?pages=2000) on loopback as an HTTP forward "
                "proxy with a SearXNG-shaped search engine; see docs/offline-web.md.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_arguments(parser)
        parser.add_argument("--url-of", action="append", default=[], metavar="PATH",
                            help="print the URL an htmltree: corpus serves the file PATH at (relative to its "
                                 "directory; may be repeated) and exit, e.g. to pick seeds under opaque=1")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("expected exactly one CORPUS spec, e.g. generated:zh-disaster")
        opts.corpus = args[0]
        if opts.url_of:
            try:
                urls = urls_of(opts.corpus, opts.url_of, opts.reader)
            except (CorpusError, OSError, ImportError) as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)
                self.exitcode = 2
                return
            for url in urls:
                print(url, flush=True)
            self.exitcode = 0
            return
        self.exitcode = run(opts)
