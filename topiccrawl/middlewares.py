"""Deprecated alias of :mod:`topiccrawl.crawl.middlewares` (the path Scrapy settings named before 0.2; removed in 0.3)."""

import warnings

from topiccrawl.crawl.middlewares import (  # noqa: F401
              FaultStatsMiddleware,
              PrivateAddressMiddleware,
              TrapGuardMiddleware,
              WebRoutingMiddleware,
)

warnings.warn("topiccrawl.middlewares is deprecated: use topiccrawl.crawl.middlewares (or the add-on, topiccrawl.crawl.addon)",
              DeprecationWarning, stacklevel=2)
