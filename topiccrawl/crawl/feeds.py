"""Feed lines on disk as the pages are counted.

Scrapy's feed exporter writes each item into a buffered file and flushes it when the feed closes,
so a crawl killed with kill -9 (or by the out-of-memory killer) lost the lines still in the buffer:
pages counted, in the stats and, with JOBDIR or on Redis, done for good, but in no ``-O`` feed.
:class:`FeedFlush` (``TOPICCRAWL_FEED_FLUSH_ENABLED``) flushes every feed file after each item the
exporter wrote, so a kill loses no line already written; a JOBDIR crawl's journal writes a page's
``count`` record only after its line is flushed (:mod:`topiccrawl.crawl.jobdir`), so a resume
never takes a page for done whose line is missing. A flush is one ``write`` per item; a feed with
post-processing (``gzip``) keeps its own buffer, and a remote feed (S3, FTP) is uploaded at close
whatever happens here.
"""

from __future__ import annotations

import logging

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.extensions.feedexport import FeedExporter

from topiccrawl.crawl.runtime import NO_TRUTH_PAGES, TopicComponent

logger = logging.getLogger(__name__)


def feed_exporter(crawler) -> FeedExporter | None:
    """Scrapy's feed exporter among the crawler's extensions (None without feeds)."""
    extensions = getattr(getattr(crawler, "extensions", None), "middlewares", ())
    return next((e for e in extensions if isinstance(e, FeedExporter)), None)


#: the close reason of a crawl whose topic has no words and none could be derived from its examples
#: (stopped before its seeds; ``scrapy crawl`` then exits with status 2, as for other user mistakes)
NO_TOPIC_WORDS = "no_topic_words"
#: the close reason of a crawl whose queue ran dry before it counted a page (every seed failed, was
#: refused or was no HTML page): ``scrapy crawl`` exits with status 1
NO_PAGES = "no_pages"
#: close reasons of a crawl stopped before its first page (a Redis worker whose options or spider
#: differ from its crawl's; a topic without words whose examples gave none; truth:N that found none;
#: seeds that gave no page): no output file is written, and an earlier run's in the same folder
#: (feeds, stats, CSV, plots, audit) stay as they were
NO_OUTPUT_REASONS = frozenset({"redis_refused", NO_TOPIC_WORDS, NO_TRUTH_PAGES, NO_PAGES})


def writes_nothing(crawler, reason: str) -> bool:
    """A crawl closed for ``reason`` writes no output file: a reason of :data:`NO_OUTPUT_REASONS`,
    a crawl stopped while its example pages were fetched (its spider's ``stopped_in_examples``:
    it counted no page), or ``redis_lost`` in a Redis worker that lost Redis before it joined its
    crawl (its scheduler's ``joined`` is False)."""
    if reason in NO_OUTPUT_REASONS or getattr(getattr(crawler, "spider", None), "stopped_in_examples", False):
        return True
    if reason != "redis_lost":
        return False
    try:
        scheduler = crawler.engine.scheduler
    except (AttributeError, RuntimeError):
        return False
    return getattr(scheduler, "joined", None) is False


def keep_feeds(crawler, reason: str) -> None:
    """For a crawl that writes nothing (:func:`writes_nothing`): the feeds without an item are not
    stored (Scrapy stores an empty feed at close, FEED_STORE_EMPTY, which would empty an earlier
    run's ``-O`` file). Called from the scheduler's ``close``, which comes before the exporter's."""
    if not writes_nothing(crawler, reason):
        return
    for slot in getattr(feed_exporter(crawler), "slots", ()):
        if not slot.itemcount:
            slot.store_empty = False


def flush_feeds(exporter: FeedExporter | None) -> None:
    """Flush the open file of every feed slot (the lines the exporter wrote reach the OS)."""
    for slot in getattr(exporter, "slots", ()):
        fh = getattr(slot, "file", None)
        if fh is None or getattr(fh, "closed", False):
            continue
        try:
            fh.flush()
        except (OSError, ValueError) as exc:  # a full disk: the exporter reports it at close
            logger.debug("feed %s not flushed: %s", slot.uri, exc)


class FeedFlush(TopicComponent):
    """Flushes the feeds after each exported item (connected after Scrapy's ``FeedExporter``, an
    extension of lower order, so its handler has written the line)."""

    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        if not self.tc.config.feed_flush_enabled:
            raise NotConfigured
        self.exporter: FeedExporter | None = None  # found at spider open: the extensions exist by then
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.item_scraped, signal=signals.item_scraped)

    def spider_opened(self) -> None:
        self.exporter = feed_exporter(self.crawler)

    def item_scraped(self, item) -> None:
        flush_feeds(self.exporter)
