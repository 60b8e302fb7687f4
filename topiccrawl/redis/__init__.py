"""Shared crawl state in Redis: N crawler processes, one crawl (``TOPICCRAWL_STORE = "redis"``).

Modules, small and focused like scrapy-redis's:

``connection``  the client from ``TOPICCRAWL_REDIS_URL``, the key layout, one-line errors
``frontier``    :class:`RedisFrontier`: the bfs/bestfirst/oracle order in a ZSET, leases, the
                global DP budget and counters (Lua scripts, atomic); Scrapy-free
``wl``          :class:`RedisWLFrontier`: one shared Wang–Landau sampler, a decision = one Lua script
``annealing``   ``sa`` / ``fcsa-host``: one shared annealing chain (and host memory), a decision = one
                Lua script; ``make_redis_frontier`` picks the frontier of a strategy
``learned``     :class:`RedisLearnedFrontier`: the ``learned`` queue scored by link values, the
                workers' labels in one event list, one published model version (trainer lease)
``association`` the anchor association's term statistics of ``learned``, shared by the workers
``bandit``      :class:`RedisBandit`: the DWDBRM UCB1 statistics, atomic updates
``discovery``   the discovery spiders' scheduler: own iteration queue, shared duplicates, bandit
                (with pending plays) and page limit
``codec``       Scrapy requests as compact JSON (``Request.to_dict`` without defaults), never pickle
``graph``       the seen link graph shared between workers for PageRank
``sites``       :class:`RedisSiteTasks`: the site finder's searches and candidate sites as leased
                tasks, verdicts written once; Scrapy-free
``sitefinder``  :class:`RedisSiteScheduler`: ``scrapy crawl sitefinder`` workers sharing those tasks
``scheduler``   :class:`RedisScheduler`: the TopicScheduler over the shared frontier (dupefilter,
                leases around callbacks, idle-wait, pause/resume)

Which strategies the store runs is the ``redis`` flag of each entry of
:data:`topiccrawl.strategies.base.STRATEGIES`: the memory order in a ZSET, the shared WL sampler,
the shared annealing chains, the shared labels and model of ``learned``, and the site finder's
shared tasks (``sites``, ``sitefinder``).

See docs/deploy.md ("Running N workers on one crawl", "Redis settings", "Recovery").
"""

from topiccrawl.redis.connection import RedisStoreError, check_redis, connect, crawl_keys

__all__ = ["RedisStoreError", "check_redis", "connect", "crawl_keys"]
