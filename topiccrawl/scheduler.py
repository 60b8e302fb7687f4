"""Deprecated alias of :mod:`topiccrawl.crawl.scheduler` (the path Scrapy settings named before 0.2; removed in 0.3)."""

import warnings

from topiccrawl.crawl.scheduler import TopicScheduler  # noqa: F401

warnings.warn("topiccrawl.scheduler is deprecated: use topiccrawl.crawl.scheduler (or the add-on, topiccrawl.crawl.addon)",
              DeprecationWarning, stacklevel=2)
