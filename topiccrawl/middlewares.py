"""Downloader middleware that routes a crawl to the offline web lab or guards the live web.

Offline (``TOPICCRAWL_WEB`` = a corpus spec): every request, robots.txt included, gets
``meta["proxy"]`` = the web lab's forward proxy, so URLs stay the real absolute ones and only the
proxy differs from a live crawl; requests to hosts outside the corpus are dropped (counted in
``topiccrawl/outside_corpus``). Live (``TOPICCRAWL_WEB = "live"``): requests to loopback,
private and link-local addresses are refused unless ``TOPICCRAWL_LIVE_ALLOW_PRIVATE`` is set.
"""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest

from topiccrawl.runtime import TopicComponent
from topiccrawl.web.search import SEARCH_HOST

logger = logging.getLogger(__name__)

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_private_host(host: str) -> bool:
    """True for loopback, private, link-local, reserved or unspecified addresses and local names."""
    host = host.strip("[]").lower()
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_unspecified


class WebRoutingMiddleware(TopicComponent):
    def process_request(self, request):
        proxy = self.tc.proxy_url
        if proxy:
            host = urlsplit(request.url).hostname or ""
            corpus = self.tc.corpus
            if corpus is not None and host != SEARCH_HOST and not corpus.has_host(host):
                # a link out of the offline web (e.g. to the live web): the lab would only answer
                # 502, and retrying that wastes requests
                self.crawler.stats.inc_value("topiccrawl/outside_corpus")
                raise IgnoreRequest(f"host outside the offline web: {request.url}")
            # always the current lab: a request restored from JOBDIR carries the previous run's port
            request.meta["proxy"] = proxy
            return None
        if not self.tc.config.live_allow_private and is_private_host(urlsplit(request.url).hostname or ""):
            self.crawler.stats.inc_value("topiccrawl/refused_private")
            message = f"refused private/loopback address in live mode: {request.url}"
            logger.warning("%s (set TOPICCRAWL_LIVE_ALLOW_PRIVATE=true to allow)", message)
            raise IgnoreRequest(message)
        return None
