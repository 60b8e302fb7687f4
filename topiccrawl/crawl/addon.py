"""The topiccrawl add-on: one ``ADDONS`` entry installs the scheduler and the components.

``ADDONS = {"topiccrawl.crawl.addon.TopicCrawlAddon": 0}`` (the project's settings have it). The
scheduler is chosen here, once, from two things known before the crawl starts: the store
(``TOPICCRAWL_STORE``) and the queue the spider declares as a class attribute,
``topiccrawl_queue`` — ``"frontier"`` (focused spiders), ``"discovery"`` (DWDBRM spiders) or
``"sites"`` (the site finder). The class written into ``SCHEDULER`` is the class Scrapy builds:
no ``from_crawler`` returns another one.

Everything is set with the ``addon`` priority, so a value in a project's settings.py, a spider's
``custom_settings`` or ``-s`` wins (``-s SCHEDULER=…`` gets exactly that scheduler). With
``TOPICCRAWL_ENABLED = False`` the add-on installs nothing: a plain Scrapy crawl. In every case
it keeps the process off the network for the public suffix list (Scrapy's cookie middleware uses
tldextract's bundled snapshot) and masks the secrets of URLs in Scrapy's log lines that print
settings or feed URIs.
"""

from __future__ import annotations

import os

from scrapy.utils.misc import load_object

from topiccrawl.crawl.errors import mask_secrets_in_logs
from topiccrawl.crawl.settings import DEFAULTS, topiccrawl_enabled

#: tldextract's list of public-suffix-list URLs (newline-separated); empty: never download
PSL_URLS_ENV = "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"

#: (store, spider queue) -> scheduler class
SCHEDULERS = {
    ("memory", "frontier"): "topiccrawl.crawl.scheduler.TopicScheduler",
    ("memory", "discovery"): "topiccrawl.crawl.scheduler.TopicScheduler",
    ("memory", "sites"): "topiccrawl.crawl.scheduler.TopicScheduler",
    ("redis", "frontier"): "topiccrawl.redis.scheduler.RedisScheduler",
    ("redis", "discovery"): "topiccrawl.redis.discovery.RedisDiscoveryScheduler",
    ("redis", "sites"): "topiccrawl.redis.sitefinder.RedisSiteScheduler",
}

DOWNLOADER_MIDDLEWARES = {
    "topiccrawl.crawl.middlewares.WebRoutingMiddleware": 740,
    "topiccrawl.crawl.middlewares.PrivateAddressMiddleware": 745,
    "topiccrawl.crawl.middlewares.BodyFaultMiddleware": 580,
    "topiccrawl.crawl.middlewares.FaultStatsMiddleware": 950,
    "topiccrawl.crawl.middlewares.RetryRedirectFilterMiddleware": 960,
}
SPIDER_MIDDLEWARES = {"topiccrawl.crawl.middlewares.TrapGuardMiddleware": 800}
ITEM_PIPELINES = {
    "topiccrawl.crawl.pipelines.ImportancePipeline": 300,
    "topiccrawl.crawl.pipelines.HarvestPipeline": 400,
}
EXTENSIONS = {"topiccrawl.crawl.extensions.TopicStats": 500, "topiccrawl.crawl.feeds.FeedFlush": 510}


def scheduler_for(store: str, spidercls) -> str:
    """The scheduler class path for ``store`` and a spider class (its ``topiccrawl_queue``,
    ``"frontier"`` when it declares none)."""
    queue = getattr(spidercls, "topiccrawl_queue", "frontier")
    return SCHEDULERS.get((store, queue), SCHEDULERS[("memory", "frontier")])


class TopicCrawlAddon:
    def __init__(self, crawler) -> None:
        self.spidercls = crawler.spidercls

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def update_settings(self, settings) -> None:
        # tldextract (Scrapy's cookie middleware builds one when it is first imported, after the
        # add-ons) reads this variable for where to download the public suffix list from: empty =
        # nowhere, use the snapshot it ships. Set by the user, it is left alone.
        os.environ.setdefault(PSL_URLS_ENV, "")
        mask_secrets_in_logs()  # e.g. "Error storing … feed in: ftp://user:***@host/…"
        from topiccrawl.crawl.middlewares import quiet_download_errors

        quiet_download_errors()  # a DNS failure or a refused connection: one line, no traceback
        for name, value in DEFAULTS.items():
            settings.set(name, value, priority="default")
        if not topiccrawl_enabled(settings):
            return
        store = str(settings.get("TOPICCRAWL_STORE") or "memory").strip().lower()  # read as TopicCrawlConfig reads it
        settings.set("SCHEDULER", scheduler_for(store, self.spidercls), priority="addon")
        if store == "redis":  # a callback that meets Redis gone stops the worker in one line
            settings.setdefault_in_component_priority_dict(
                "SPIDER_MIDDLEWARES", load_object("topiccrawl.redis.scheduler.RedisLostMiddleware"), 40)
        # Scrapy's fingerprints, computed without canonicalize_url for already-canonical URLs, and a
        # duplicate filter holding 63-bit prefixes in a sorted array (topiccrawl/crawl/dupefilter.py)
        settings.set("REQUEST_FINGERPRINTER_CLASS", "topiccrawl.crawl.dupefilter.RequestFingerprinter", "addon")
        settings.set("DUPEFILTER_CLASS", "topiccrawl.crawl.dupefilter.CompactDupeFilter", "addon")
        for setting, components in (("DOWNLOADER_MIDDLEWARES", DOWNLOADER_MIDDLEWARES),
                                    ("SPIDER_MIDDLEWARES", SPIDER_MIDDLEWARES),
                                    ("ITEM_PIPELINES", ITEM_PIPELINES), ("EXTENSIONS", EXTENSIONS)):
            for path, order in components.items():
                settings.setdefault_in_component_priority_dict(setting, load_object(path), order)
        # Scrapy 2.19's robots.txt middleware lets the third and later requests waiting for a host's
        # robots.txt through unchecked, and its compression middleware lets a corrupt body's error
        # through as a traceback (topiccrawl/crawl/middlewares.py): both replaced, unless the user
        # named Scrapy's own in DOWNLOADER_MIDDLEWARES (an order keeps it, None turns it off)
        named = {load_object(path) for path in settings.getdict("DOWNLOADER_MIDDLEWARES")}
        for scrapy_path, ours, order in (
                ("scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
                 "topiccrawl.crawl.middlewares.SharedRobotsTxtMiddleware", 100),
                ("scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware",
                 "topiccrawl.crawl.middlewares.CompressionFaultMiddleware", 590)):
            scrapys = load_object(scrapy_path)
            if scrapys not in named:
                settings.setdefault_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", scrapys, None)
                settings.setdefault_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", load_object(ours), order)
