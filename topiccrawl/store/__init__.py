"""Shared crawl state in Redis: N crawler processes, one crawl (``TOPICCRAWL_STORE = "redis"``).

Modules, small and focused like scrapy-redis's:

``connection``  the client from ``TOPICCRAWL_REDIS_URL``, the key layout, one-line errors
``frontier``    :class:`RedisFrontier`: the bfs/bestfirst/oracle order in a ZSET, leases, the
                global DP budget and counters (Lua scripts, atomic); Scrapy-free
``codec``       Scrapy requests as JSON (``Request.to_dict``), never pickle
``graph``       the seen link graph shared between workers for PageRank
``scheduler``   :class:`RedisScheduler`: the TopicScheduler over the shared frontier (dupefilter,
                leases around callbacks, idle-wait, pause/resume)

See docs/deploy.md ("Running N workers on one crawl", "Redis settings", "Recovery").
"""

from topiccrawl.store.connection import STRATEGIES, RedisStoreError, check_redis, connect, crawl_keys

__all__ = ["STRATEGIES", "RedisStoreError", "check_redis", "connect", "crawl_keys"]
