"""Deprecated alias of :mod:`topiccrawl.crawl.dupefilter` (the path Scrapy settings named before 0.2; removed in 0.3)."""

import warnings

from topiccrawl.crawl.dupefilter import CompactDupeFilter, RequestFingerprinter  # noqa: F401

warnings.warn("topiccrawl.dupefilter is deprecated: use topiccrawl.crawl.dupefilter (or the add-on, topiccrawl.crawl.addon)",
              DeprecationWarning, stacklevel=2)
