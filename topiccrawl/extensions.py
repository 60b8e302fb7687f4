"""Deprecated alias of :mod:`topiccrawl.crawl.extensions` (the path Scrapy settings named before 0.2; removed in 0.3)."""

import warnings

from topiccrawl.crawl.extensions import TopicStats  # noqa: F401

warnings.warn("topiccrawl.extensions is deprecated: use topiccrawl.crawl.extensions (or the add-on, topiccrawl.crawl.addon)",
              DeprecationWarning, stacklevel=2)
