"""Item pipelines (Scrapy 2.19 style: ``from_crawler``, no ``spider`` argument).

``ImportancePipeline`` fills ``importance`` from the crawl's PageRank (refreshed every
``TOPICCRAWL_PAGERANK_EVERY`` pages); ``HarvestPipeline`` records each page in the WL paper's
statistics (DP, LP, Accuracy, ARDP, SDDP, ARLP, SDLP, eqs. 7–11) and, with ground truth, the true
harvest rate and target recall. Pages fetched after the DP budget is spent are dropped so that
every table counts exactly ``TOPICCRAWL_MAX_PAGES`` pages (the scheduler then hands out nothing
more, and the crawl closes with reason ``topiccrawl_max_pages`` once in-flight requests are done).
"""

from __future__ import annotations

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from topiccrawl.crawl.runtime import TopicComponent, registered_domain


class ImportancePipeline(TopicComponent):
    def process_item(self, item):
        adapter = ItemAdapter(item)
        if "importance" in adapter and "url" in adapter:
            adapter["importance"] = round(self.tc.importance(adapter["url"]), 6)
        return item


class HarvestPipeline(TopicComponent):
    def process_item(self, item):
        adapter = ItemAdapter(item)
        if "relevance" not in adapter:
            return item
        row = self.tc.record(item)
        if row is None:
            raise DropItem(self.tc.not_counted)
        # strategies that learn from harvest (fcsa-host's host memory) get each counted page
        frontier = self.tc.frontier  # None: a foreign SCHEDULER
        if frontier is not None:
            frontier.feedback(adapter["url"], registered_domain(adapter["url"]), adapter["relevance"], self.tc.topic.beta)
        stats = self.crawler.stats
        for key, value in self.tc.metrics.snapshot().items():
            stats.set_value(f"topiccrawl/{key}", value)
        return item
