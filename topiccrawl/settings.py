"""Scrapy settings of the topiccrawl project (every TOPICCRAWL_* setting: docs/settings.md).

The scheduler, duplicate filter, middlewares, pipelines, the stats extension and the
``TOPICCRAWL_*`` defaults come from the add-on (topiccrawl/crawl/addon.py); a value set here or with
``-s`` overrides the add-on's.
"""

BOT_NAME = "topiccrawl"
SPIDER_MODULES = ["topiccrawl.spiders"]
NEWSPIDER_MODULE = "topiccrawl.spiders"
COMMANDS_MODULE = "topiccrawl.crawl.commands"
ADDONS = {"topiccrawl.crawl.addon.TopicCrawlAddon": 0}

USER_AGENT = "topiccrawl/0.1 (+https://github.com/topiccrawl/topiccrawl)"
ROBOTSTXT_OBEY = True
REMOTE_CONTROL_ENABLED = False
TELNETCONSOLE_ENABLED = False

CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_DELAY = 0
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
REDIRECT_MAX_TIMES = 10
# Scrapy starts CONCURRENT_ITEMS (default 100) asyncio tasks per response to run the callback's
# output through the spider middlewares and pipelines; ours are synchronous CPU work, so 100
# tasks buy nothing and cost ~10% of a crawl's CPU (docs/benchmarks.md, "Frontier strategies").
CONCURRENT_ITEMS = 8
RETRY_TIMES = 2

DOWNLOAD_WARNSIZE = 2 * 1024 * 1024  # bigger pages are kept but logged and counted (docs/resilience.md)
DOWNLOAD_FAIL_ON_DATALOSS = True  # a truncated body is an error: retried, never scored as a page


FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"
