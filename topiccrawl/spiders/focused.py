"""The generic focused spider: ``scrapy crawl focused -a topic=台风灾害 -a strategy=bestfirst``."""

from __future__ import annotations

import scrapy
from scrapy.http import TextResponse

from topiccrawl.crawl.runtime import TopicCrawl
from topiccrawl.crawl.scheduler import META_KEY


class FocusedSpider(scrapy.Spider):
    """Fetch seeds, score every page (R(P)) and link (R(l)), let the scheduler's strategy choose.

    Spider arguments (each overrides the ``TOPICCRAWL_*`` setting of the same name):
    ``topic`` (a shipped topic name or a .toml path), ``strategy`` (bfs, bestfirst, oracle),
    ``max_pages`` (the DP budget), ``link_threshold``, ``seeds`` (comma-separated URLs, or
    ``truth:N`` on an offline web: N truly relevant pages as the starting points).
    """

    name = "focused"

    def __init__(self, *args, seeds: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.seed_arg = seeds

    @property
    def tc(self) -> TopicCrawl:
        return TopicCrawl.for_crawler(self.crawler)

    async def start(self):
        seeds = self.tc.seed_arg(self.seed_arg)
        if not seeds:
            self.logger.error(
                "topic %r has no seed URLs: add seeds to the topic file or pass -a seeds=URL,URL",
                self.tc.topic.name,
            )
            return
        for url in seeds:
            yield scrapy.Request(url, callback=self.parse, meta={META_KEY: {"score": 1.0, "depth": 0}})

    def parse(self, response):
        if not isinstance(response, TextResponse):
            self.crawler.stats.inc_value("topiccrawl/non_html")
            return
        if self.tc.budget_spent:  # in flight when the budget ran out: keep it for a resume
            self.crawler.engine.scheduler.requeue(response.request)
            return
        meta = response.meta.get(META_KEY) or {}
        depth = int(meta.get("depth", 0))
        item, links = self.tc.process_page(response, depth, meta.get("parent"), meta.get("anchor", ""))
        # links first, the item last: the item counts the page (and, on Redis, ends its lease), so
        # by then every link of the page is in the frontier — a worker killed right after loses none
        for link in links:
            yield scrapy.Request(
                link.url,
                callback=self.parse,
                meta={META_KEY: {"score": link.score, "depth": depth + 1, "parent": response.url,
                                "anchor": link.anchor, "potential": link.potential}},
            )
        yield item
