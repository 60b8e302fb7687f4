"""Deprecated alias of :mod:`topiccrawl.crawl.pipelines` (the path Scrapy settings named before 0.2; removed in 0.3)."""

import warnings

from topiccrawl.crawl.pipelines import HarvestPipeline, ImportancePipeline  # noqa: F401

warnings.warn("topiccrawl.pipelines is deprecated: use topiccrawl.crawl.pipelines (or the add-on, topiccrawl.crawl.addon)",
              DeprecationWarning, stacklevel=2)
