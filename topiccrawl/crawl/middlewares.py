"""Middlewares: offline routing, the live-web address guard, fault counting and the trap guard.

* :class:`WebRoutingMiddleware` (offline, ``TOPICCRAWL_WEB`` = a corpus spec): every request,
  robots.txt included, gets ``meta["proxy"]`` = the web lab's forward proxy, so URLs stay the real
  absolute ones and only the proxy differs from a live crawl; requests to hosts outside the corpus
  are dropped (counted in ``topiccrawl/outside_corpus``).
* :class:`PrivateAddressMiddleware` (live, ``TOPICCRAWL_WEB = "live"``): requests to any address
  that is not global unicast (the policy of :mod:`topiccrawl.crawl.addresses`: loopback, private,
  link-local, shared, multicast, reserved, …, also the IPv4 inside IPv4-mapped, 6to4, NAT64 and
  Teredo forms) are refused — literal addresses and local names, redirect targets (Scrapy sends
  every redirected request through the downloader middlewares again) and host names whose DNS
  answer is such an address — unless ``TOPICCRAWL_LIVE_ALLOW_PRIVATE`` is set or the host is in
  ``TOPICCRAWL_LIVE_ALLOW_HOSTS``.
* :class:`FaultStatsMiddleware` counts every fault a download meets in
  ``topiccrawl/faults/<kind>`` and repairs what can be repaired (a wrong charset header); it never
  swallows a retry: Scrapy's RetryMiddleware and RedirectMiddleware still see everything.
* :class:`RetryRedirectFilterMiddleware` gives the redirect target of a retried request back to
  the duplicate filter, so each URL is fetched and counted at most once whatever the retries.
* :class:`TrapGuardMiddleware` (spider middleware) drops links that continue a chain of more than
  ``TOPICCRAWL_TRAP_GUARD_DEPTH`` consecutive links inside one URL shape (``trap_dropped``).

docs/resilience.md describes the policy, every counter and the settings.
"""

from __future__ import annotations

import codecs
import ipaddress
import logging
import re
from time import monotonic
from urllib.parse import urljoin, urlsplit
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
    NotSupported,
    ResponseDataLossError,
)
from scrapy.http import HtmlResponse
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import error as txerror
from twisted.internet.defer import Deferred
from twisted.web.client import ResponseFailed, ResponseNeverReceived
from w3lib.encoding import html_body_declared_encoding, resolve_encoding

from topiccrawl.crawl.addresses import allow_listed, host_refusal, parse_allow_hosts, refusal
from topiccrawl.crawl.runtime import TopicComponent
from topiccrawl.weblab.search import SEARCH_HOST

logger = logging.getLogger(__name__)

FAULT_PREFIX = "topiccrawl/faults/"


class WebRoutingMiddleware(TopicComponent):
    """Offline crawls: route every request through the web lab's proxy (module docstring)."""

    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        if not self.tc.config.offline:
            raise NotConfigured

    def process_request(self, request):
        host = urlsplit(request.url).hostname or ""
        corpus = self.tc.corpus
        if corpus is not None and host != SEARCH_HOST and not corpus.has_host(host):
            # a link out of the offline web (e.g. to the live web): the lab would only answer
            # 502, and retrying that wastes requests
            self.crawler.stats.inc_value("topiccrawl/outside_corpus")
            raise IgnoreRequest(f"host outside the offline web: {request.url}")
        # always the current lab: a request restored from JOBDIR carries the previous run's port
        request.meta["proxy"] = self.tc.proxy_url
        return None


class CompressionFaultMiddleware(HttpCompressionMiddleware):
    """Scrapy's ``HttpCompressionMiddleware`` with a body that does not decompress as its
    ``Content-Encoding`` says (a corrupt gzip, deflate, br or zstd stream) counted in
    ``topiccrawl/faults/bad_encoding`` and dropped with one warning line: Scrapy let the
    decompressor's error through, logged with its traceback and counted nowhere. The add-on
    installs it in place of Scrapy's (order 590, the same)."""

    def process_response(self, request, response, spider=None):
        try:
            return super().process_response(request, response)
        except IgnoreRequest:
            raise
        except Exception as exc:  # zlib.error, gzip's OSError, brotli's or zstandard's own error
            encoding = b", ".join(response.headers.getlist("Content-Encoding")).decode("latin-1")
            if not encoding:
                raise
            if self.stats is not None:
                self.stats.inc_value("topiccrawl/faults/bad_encoding")
            message = (f"Ignored response {response}: its body does not decompress as {encoding} "
                       f"({type(exc).__name__}: {exc})")
            logger.warning(message)
            raise IgnoreRequest(message) from None


class SharedRobotsTxtMiddleware(RobotsTxtMiddleware):
    """Scrapy's ``RobotsTxtMiddleware`` with its parser handed to every request that waited for it.

    In Scrapy 2.19 the requests to a host whose robots.txt is still being fetched each await the
    host's one ``Deferred`` through ``Deferred.asFuture``, whose callback consumes the result: the
    first waiter gets the parser, every later one ``None`` — and ``None`` means "no robots.txt, fetch
    anything". So with ``ROBOTSTXT_OBEY = True`` a crawl fetched disallowed pages whenever three or
    more requests to a host went out before its robots.txt had arrived. Here a waiter given ``None``
    takes what the middleware stored for the host once the fetch ended (the parser, or ``None``
    when robots.txt could not be fetched: Scrapy's "allow everything"). The add-on installs it in
    place of Scrapy's (order 100, the same)."""

    async def robot_parser(self, request):
        parser = await super().robot_parser(request)
        if parser is None:
            stored = self._parsers.get(urlparse_cached(request).netloc)
            if not isinstance(stored, Deferred):
                return stored
        return parser


class PrivateAddressMiddleware(TopicComponent):
    """Live crawls: refuse non-global destinations, also after redirects and DNS (module docstring).

    Names are resolved with the reactor's resolver, i.e. Scrapy's ``TWISTED_DNS_RESOLVER`` with
    its cache (``DNSCACHE_ENABLED``), so the address checked is the address the download then
    connects to.
    """

    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        cfg = self.tc.config
        if cfg.offline or cfg.live_allow_private:
            raise NotConfigured
        self.allow_names, self.allow_nets = parse_allow_hosts(cfg.live_allow_hosts)

    def _allowed(self, host: str, ip=None) -> bool:
        return allow_listed(host, ip, self.allow_names, self.allow_nets)

    def _refuse(self, request, why: str):
        self.crawler.stats.inc_value("topiccrawl/refused_private")
        message = f"refused non-global address in live mode: {request.url} ({why})"
        logger.warning("%s; set TOPICCRAWL_LIVE_ALLOW_PRIVATE=true or TOPICCRAWL_LIVE_ALLOW_HOSTS to allow", message)
        raise IgnoreRequest(message)

    async def process_request(self, request):
        host = (urlsplit(request.url).hostname or "").lower().rstrip(".")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        if self._allowed(host, ip):
            return None
        why = host_refusal(host)
        if ip is not None or why is not None:  # a literal address or a local name
            if why is not None:
                self._refuse(request, f"{'redirect target' if 'redirect_urls' in request.meta else 'address'}: {why}")
            return None
        from twisted.internet import reactor

        try:
            answer = ipaddress.ip_address(await maybe_deferred_to_future(reactor.resolve(host)))
        except Exception:
            return None
        why = refusal(answer)
        if why is not None and not self._allowed(host, answer):
            self._refuse(request, f"{host} resolves to {answer}: {why}")
        return None


#: meta keys: the spider itself marked the request ``dont_filter`` (not RetryMiddleware); the number
#: of redirect hops of the request when it was last scheduled
OWN_DONT_FILTER = "topiccrawl_dont_filter"
REDIRECT_HOPS = "topiccrawl_redirect_hops"


class RetryRedirectFilterMiddleware(TopicComponent):
    """Each URL is fetched and counted at most once, whatever the retries.

    RetryMiddleware marks a retried request ``dont_filter=True`` and RedirectMiddleware copies the
    flag to the redirect target, so the target of a retried request skipped the duplicate filter:
    a page already crawled through another link was fetched and counted again. On
    ``request_scheduled`` (sent before the scheduler's duplicate filter, memory or Redis) a *new*
    redirect target whose flag came from a retry gets ``dont_filter=False`` back and is counted in
    ``topiccrawl/redirect_refiltered``. A retry of a redirect target (same number of hops) keeps
    its flag, and so do the targets of requests the spider itself marked ``dont_filter`` (seeds,
    search calls): Scrapy's behaviour there. No download method: the middleware only listens.
    """

    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        crawler.signals.connect(self._scheduled, signal=signals.request_scheduled)

    def _scheduled(self, request, spider) -> None:
        meta = request.meta
        redirects = meta.get("redirect_urls")
        if not redirects:
            if request.dont_filter and "retry_times" not in meta:
                meta[OWN_DONT_FILTER] = True
            return
        if len(redirects) == meta.get(REDIRECT_HOPS, 0):  # a retry of a redirect target
            return
        meta[REDIRECT_HOPS] = len(redirects)
        if request.dont_filter and not meta.get(OWN_DONT_FILTER):
            request.dont_filter = False
            self.crawler.stats.inc_value("topiccrawl/redirect_refiltered")


class _FaultCounter(TopicComponent):
    """What the two fault middlewares share: ``topiccrawl/faults/<kind>`` counters."""

    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        self.stats = crawler.stats

    def _count(self, kind: str) -> None:
        self.stats.inc_value(FAULT_PREFIX + kind)


class FaultStatsMiddleware(_FaultCounter):
    """Count the faults of every download attempt in ``topiccrawl/faults/<kind>``.

    Sits next to the download handler (order 950), so it sees each attempt before RetryMiddleware
    and RedirectMiddleware: a URL retried twice after a timeout counts 3 timeouts. Kinds:
    ``timeout``, ``5xx``, ``reset``, ``refused``, ``dns``, ``truncated`` (data loss),
    ``partial``, ``slow_response``, ``slow_body``, ``redirect_loop``, ``redirect_limit``,
    ``large``, ``too_large``, ``other`` (docs/resilience.md); the body's own faults are
    :class:`BodyFaultMiddleware`'s. Redirect cycles are cut here (IgnoreRequest); everything else
    continues unchanged.
    """

    def __init__(self, crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.slow = self.tc.config.slow_seconds
        self.warnsize = settings.getint("DOWNLOAD_WARNSIZE")
        self.max_redirects = settings.getint("REDIRECT_MAX_TIMES")
        self.headers_at: WeakKeyDictionary = WeakKeyDictionary()
        crawler.signals.connect(self._headers_received, signal=signals.headers_received)

    def _headers_received(self, headers, body_length, request, spider) -> None:
        self.headers_at[request] = monotonic()

    def process_response(self, request, response):
        headers_at = self.headers_at.pop(request, None)
        if request.meta.get("download_latency", 0.0) >= self.slow:
            self._count("slow_response")
        if headers_at is not None and monotonic() - headers_at >= self.slow:
            self._count("slow_body")
        status = response.status
        if status >= 500:
            self._count("5xx")
        elif 300 <= status < 400 and b"Location" in response.headers:
            self._redirect(request, response)
        for flag in ("dataloss", "partial"):
            if flag in response.flags:
                self._count("truncated" if flag == "dataloss" else flag)
        if self.warnsize and len(response.body) > self.warnsize:
            self._count("large")
        return response

    def _redirect(self, request, response) -> None:
        if request.meta.get("dont_redirect"):
            return
        target = urljoin(request.url, response.headers[b"Location"].decode("latin-1"))
        if target == request.url or target in request.meta.get("redirect_urls", ()):
            self._count("redirect_loop")
            raise IgnoreRequest(f"redirect loop: {request.url} -> {target}")
        if request.meta.get("redirect_times", 0) >= self.max_redirects:
            self._count("redirect_limit")

    def process_exception(self, request, exception):
        self.headers_at.pop(request, None)
        kind = _exception_kind(exception)
        if kind:
            self._count(kind)
        return None


class BodyFaultMiddleware(_FaultCounter):
    """The faults of an HTML body, counted like :class:`FaultStatsMiddleware`'s: ``badlength``
    (a ``Content-Length`` page cut before ``</html>``; an empty body is whole), ``wrong_charset`` (the header's charset
    replaced by the page's own) and ``decode_error``. Order 580: after ``HttpCompressionMiddleware``
    (590) has decompressed the body (before it, a compressed answer is a plain ``Response``, not
    HTML to check), before ``RetryMiddleware`` (550), so each attempt is counted."""

    def process_response(self, request, response):
        if not isinstance(response, HtmlResponse) or response.status != 200 or request.method == "HEAD":
            return response
        if response.headers.get(b"Content-Encoding", b"identity").lower() not in (b"identity", b""):
            return response  # an encoding Scrapy could not undo (or compression off): not HTML to check
        if response.body and b"Content-Length" in response.headers and b"</html" not in response.body[-2048:].lower():
            self._count("badlength")
        return self._charset(response)

    def _charset(self, response):
        """A declared header charset that cannot decode the body while the page's own
        ``<meta>`` charset can: count ``wrong_charset`` and answer with the page's charset."""
        declared = response.headers.get(b"Content-Type", b"").decode("latin-1")
        m = re.search(r"charset=([\w.:-]+)", declared, re.I)
        if not m or _decodes(response.body, m.group(1)):
            return response
        meta = html_body_declared_encoding(response.body)
        if meta and resolve_encoding(meta) != resolve_encoding(m.group(1)) and _decodes(response.body, meta):
            self._count("wrong_charset")
            headers = response.headers.copy()
            headers[b"Content-Type"] = declared[:m.start(1)] + meta
            return response.replace(headers=headers, encoding=resolve_encoding(meta))
        self._count("decode_error")
        return response


def _decodes(body: bytes, charset: str) -> bool:
    try:
        codecs.decode(body, resolve_encoding(charset) or charset)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


_EXCEPTION_KINDS = (
    ((DownloadTimeoutError, txerror.TimeoutError, txerror.TCPTimedOutError), "timeout"),
    ((ResponseDataLossError,), "truncated"),
    ((DownloadCancelledError,), "too_large"),
    ((DownloadConnectionRefusedError, txerror.ConnectionRefusedError), "refused"),
    ((CannotResolveHostError, txerror.DNSLookupError), "dns"),
    ((DownloadFailedError, ResponseFailed, ResponseNeverReceived, txerror.ConnectionLost,
      txerror.ConnectionDone, ConnectionError), "reset"),
)


class DownloadErrorFilter(logging.Filter):
    """A logging filter for Scrapy's "Error downloading" lines (the scraper's, when a request
    without an errback fails for good, and the robots.txt middleware's): a failure of the network
    or the page (the kinds above, a URL scheme Scrapy cannot fetch such as a redirect to
    ``mailto:``) is not a program error, so its traceback is replaced by the exception's own
    one-line message. Other records pass unchanged."""

    TYPES = (*(t for types, _ in _EXCEPTION_KINDS for t in types), NotSupported)

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or not isinstance(exc, self.TYPES):
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: the handler reports it
            return True
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        record.msg = message if (str(exc) or reason) in message else f"{message}: {reason}"
        record.args, record.exc_info, record.exc_text = (), None, None
        return True


#: the loggers of Scrapy's "Error downloading" lines
DOWNLOAD_ERROR_LOGGERS = ("scrapy.core.scraper", "scrapy.downloadermiddlewares.robotstxt")


def quiet_download_errors() -> None:
    """Install :class:`DownloadErrorFilter` on Scrapy's download-error loggers (once per process)."""
    for name in DOWNLOAD_ERROR_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, DownloadErrorFilter) for f in log.filters):
            log.addFilter(DownloadErrorFilter())


def _exception_kind(exc: Exception) -> str | None:
    if isinstance(exc, IgnoreRequest):  # a middleware's decision, not a fault
        return None
    for types, kind in _EXCEPTION_KINDS:
        if isinstance(exc, types):
            return kind
    return "other"


_DIGITS = re.compile(r"\d+")
TRAP_META = "topiccrawl_trap_chain"


def url_shape(url: str) -> str:
    """Host, path and query with every run of digits collapsed: ``/calendar/2024/06/`` and
    ``/calendar/1999/12/`` share the shape ``host/calendar/#/#/``."""
    parts = urlsplit(url)
    return _DIGITS.sub("#", f"{parts.netloc.lower()}{parts.path}?{parts.query}")


class TrapGuardMiddleware(TopicComponent, BaseSpiderMiddleware):
    """Spider-trap guard: a link whose URL has the shape of the page it was found on continues
    that page's *shape chain*; links past ``TOPICCRAWL_TRAP_GUARD_DEPTH`` consecutive links of one
    shape are dropped before they reach the scheduler (``topiccrawl/faults/trap_dropped``).

    A calendar that links month to month is one chain growing by one per page, so it yields at
    most 1 + 2·depth pages per entry link (both directions); articles that link to articles of the
    same host form short chains (at most 7 in a 1,000-page bestfirst crawl, docs/resilience.md).
    """

    def __init__(self, crawler) -> None:
        TopicComponent.__init__(self, crawler)
        if not self.tc.config.trap_guard_enabled:
            raise NotConfigured
        self.depth = self.tc.config.trap_guard_depth
        self._page = ("", "")  # (URL, shape) of the page whose links are coming through

    def get_processed_request(self, request, response):
        if response is None:  # start requests
            return request
        if self._page[0] != response.url:  # once per page, not once per link
            self._page = (response.url, url_shape(response.url))
        chain = response.meta.get(TRAP_META, 0) + 1 if url_shape(request.url) == self._page[1] else 0
        if chain > self.depth:
            self.crawler.stats.inc_value(FAULT_PREFIX + "trap_dropped")
            return None
        if chain:
            request.meta[TRAP_META] = chain
        return request
