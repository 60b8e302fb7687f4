"""A plain Scrapy BFS spider (no project settings, no scoring) crawling the web lab through its proxy.

    python -m bench.plain_spider --proxy http://127.0.0.1:8780 --pages 2000 --seeds http://www.daohang-wang.cn/

Scrapy defaults except: breadth-first queues, LOG_LEVEL=WARNING, ``CLOSESPIDER_PAGECOUNT=--pages``
and the proxy given the ordinary way (the ``http_proxy`` environment variable read by Scrapy's
HttpProxyMiddleware); ``-s NAME=VALUE`` adds a setting (e.g. the project's ``CONCURRENT_ITEMS=8``).
Prints one JSON line ``{"pages", "seconds", "pages_per_s", "cpu_seconds"}`` last: ``cpu_seconds`` is
the process's CPU time from spider open to close, measured as the project's ``topiccrawl/cpu_seconds``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.http import TextResponse


class PlainSpider(scrapy.Spider):
    name = "plain_bfs"

    def parse(self, response):
        if isinstance(response, TextResponse):
            yield from response.follow_all(css="a")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seeds", default="http://www.daohang-wang.cn/", help="comma-separated start URLs")
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    os.environ["http_proxy"] = args.proxy
    seeds = [s for s in args.seeds.split(",") if s]
    process = CrawlerProcess({
        "LOG_LEVEL": "WARNING",
        "CLOSESPIDER_PAGECOUNT": args.pages,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        **dict(s.split("=", 1) for s in args.settings),
    })
    crawler = process.create_crawler(PlainSpider)
    cpu = {}

    def opened() -> None:
        cpu["opened"] = time.process_time()

    def closed() -> None:
        cpu["closed"] = time.process_time()

    crawler.signals.connect(opened, signal=signals.spider_opened)  # held here: receivers are weak references
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, start_urls=seeds)
    process.start()
    stats = crawler.stats.get_stats()
    pages = stats.get("response_received_count", 0)
    seconds = (stats["finish_time"] - stats["start_time"]).total_seconds()
    print(json.dumps({"pages": pages, "seconds": round(seconds, 2), "pages_per_s": round(pages / seconds, 1),
                      "cpu_seconds": round(cpu["closed"] - cpu["opened"], 3)}))


if __name__ == "__main__":
    main()
