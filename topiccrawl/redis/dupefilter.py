"""A duplicate filter shared by all workers of a crawl: a Redis SET of Scrapy request
fingerprints (``crawler.request_fingerprinter``), key ``topiccrawl:<crawl_id>:dupefilter`` as in
scrapy-redis (``%(spider)s:dupefilter``). The RedisScheduler adds most fingerprints in its batched
push script (:meth:`~topiccrawl.redis.frontier.RedisFrontier.push_many`) and reports the duplicates
found there with :meth:`log`; :meth:`request_seen` is the one-round-trip check. Scrapy-free: it
implements the interface of Scrapy's ``BaseDupeFilter`` (``request_seen``, ``open``, ``close``,
``log``) without importing Scrapy; the schedulers build it themselves."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


class RedisDupeFilter:
    def __init__(self, client, key: str, fingerprinter, stats=None, debug: bool = False) -> None:
        self.r, self.key, self.fingerprinter, self.stats, self.debug = client, key, fingerprinter, stats, debug
        self._logged = False

    def fingerprint(self, request) -> str:
        """The SET member of ``request`` (the RedisScheduler batches its SADDs with the pushes)."""
        return self.fingerprinter.fingerprint(request).hex()

    def request_seen(self, request) -> bool:
        """True when any worker saw the request before (SADD returned 0)."""
        return self.r.sadd(self.key, self.fingerprint(request)) == 0

    def open(self) -> None:
        pass

    def close(self, reason: str) -> None:
        pass

    def log(self, request, spider) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif not self._logged:
            logger.debug("Filtered duplicate request %(request)s - no more duplicates will be shown "
                         "(see DUPEFILTER_DEBUG to show all duplicates)", {"request": request})
            self._logged = True
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
