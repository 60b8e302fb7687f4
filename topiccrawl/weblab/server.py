"""The offline web lab's HTTP server: a loopback forward proxy that answers from a corpus.

A crawler configured with this server as its HTTP proxy sends ``GET http://host/path HTTP/1.1``;
the server answers from :class:`~topiccrawl.weblab.corpus.Corpus` (robots.txt from
``corpus.robots_txt``, 404 for unknown paths, 502 for hosts outside the corpus, 501 for
``CONNECT``/https). Requests addressed to the server itself (``GET /search``, ``/_lab/info``,
``/_lab/seeds``) and any request for host :data:`~topiccrawl.weblab.search.SEARCH_HOST` reach the
lab's own endpoints. Faults (:mod:`topiccrawl.weblab.faults`) are injected into corpus answers only.

Built on ``twisted.web.http`` directly (no resource tree, no access log): per request the only
work is parsing the URL and ``corpus.get``.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections import Counter
from urllib.parse import parse_qs, urlsplit

from twisted.internet import defer, task
from twisted.web import http

from topiccrawl.weblab.corpus import Corpus, Page
from topiccrawl.weblab.faults import NO_FAULT, FaultPlan
from topiccrawl.weblab.search import SEARCH_HOST, SearchError, SearchIndex

DRIP_PIECES = 16
HTML = "text/html; charset=utf-8"
JSON = "application/json; charset=utf-8"
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _html(title: str, text: str) -> bytes:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>".encode()


class _Request(http.Request):
    def process(self) -> None:
        self.channel.factory.lab.handle(self)


class _Factory(http.HTTPFactory):
    noisy = False

    def __init__(self, lab: LabServer):
        super().__init__()
        self.lab = lab

    def buildProtocol(self, addr):
        proto = super().buildProtocol(addr)
        proto.requestFactory = _Request
        return proto

    def log(self, request) -> None:  # no access log: it would cost more than serving
        pass


class LabServer:
    """Serves ``corpus`` (and its search ``index``) with optional faults; see the module doc."""

    def __init__(self, corpus: Corpus, index: SearchIndex | None = None,
                 faults: FaultPlan | None = None, spec: str | None = None, reactor=None, access_log=None):
        if reactor is None:
            from twisted.internet import reactor
        self.reactor, self.corpus, self.index, self.faults = reactor, corpus, index, faults
        self.spec = spec or corpus.name
        self.pages = len(corpus)
        self.seeds = corpus.seeds()
        self.stats: Counter[str] = Counter()
        self.attempts: dict[str, int] = {}
        self.port = 0
        self.bind = "127.0.0.1"
        self.index_ready: defer.Deferred | None = None
        #: a text file getting one line per corpus request, its URL (``--access-log``), or None
        self.access_log = access_log

    # -- lifecycle ------------------------------------------------------------------------------

    def listen(self, port: int = 0, bind: str = "127.0.0.1"):
        """Start listening (raises ``CannotListenError``); returns the listening port."""
        listening = self.reactor.listenTCP(port, _Factory(self), interface=bind)
        self.port, self.bind = listening.getHost().port, bind
        return listening

    def start_index(self) -> defer.Deferred:
        """Build the search index cooperatively in the reactor (page serving continues)."""
        if self.index is None or self.index.ready:
            self.index_ready = defer.succeed(None)
        else:
            self._index_steps = self.index.build_steps()
            self._index_task = task.cooperate(self._index_steps)
            self.index_ready = self._index_task.whenDone()
            self.index_ready.addErrback(self._index_failed)
        return self.index_ready

    def stop_index(self) -> None:
        """Stop a build still under way (the lab stops): its half-built file is removed, and the
        next lab builds the index anew."""
        steps = getattr(self, "_index_steps", None)
        if steps is None or self.index.ready:
            return
        try:
            self._index_task.stop()
        except task.TaskFinished:
            pass
        steps.close()

    def _index_failed(self, failure) -> None:
        if failure.check(task.TaskStopped):  # stop_index: the lab stops
            return
        self.index.state = f"failed: {failure.getErrorMessage()}"
        sys.stderr.write(f"search index build failed: {failure.getErrorMessage()}\n")

    def info(self) -> dict:
        index = self.index.info() if self.index else None
        return {
            "name": self.corpus.name, "spec": self.spec, "pages": self.pages,
            "seeds": self.seeds, "search_host": SEARCH_HOST,
            "search_url": f"http://{self.bind}:{self.port}/search",
            "sample_size": min(self.pages, index["limit"]) if index else 0,
            "search": index, "faults": self.faults.describe() if self.faults else None,
            "stats": dict(self.stats), "corpus": self.corpus.describe(),
        }

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, req: http.Request) -> None:
        self.stats["requests"] += 1
        try:
            self._dispatch(req)
        except Exception as exc:  # a reader bug must not kill the connection silently
            traceback.print_exc(file=sys.stderr)
            if not req.startedWriting and not req._disconnected:
                self._send(req, 500, HTML, _html("500 Internal Server Error", f"{type(exc).__name__}: {exc}"))

    def _dispatch(self, req: http.Request) -> None:
        uri = req.uri.decode("utf-8", "replace")
        if req.method == b"CONNECT" or uri.startswith("https://"):
            req.setHeader(b"Connection", b"close")
            return self._send(req, 501, HTML, _html(
                "501 Not Implemented", "https is not replayed by the topiccrawl web lab; "
                "crawl the corpus over http:// through this proxy"))
        if uri.startswith("/"):
            path, _, query = uri.partition("?")
            return self._local(req, path, query)
        if not uri.startswith("http://"):
            return self._send(req, 400, HTML, _html("400 Bad Request", "expected an absolute http:// URL or a path"))
        parts = urlsplit(uri)
        host = parts.hostname or ""
        if self.corpus.has_host(host):
            return self._page(req, uri, host, parts.path, parts.query)
        if host == SEARCH_HOST or (host in _LOCAL_HOSTS + (self.bind,) and parts.port == self.port):
            return self._local(req, parts.path, parts.query)
        self._send(req, 502, HTML, _html("502 Bad Gateway", f"host not in corpus {self.corpus.name}: {host}"))

    def _page(self, req: http.Request, url: str, host: str, path: str, query: str) -> None:
        if self.access_log is not None:
            self.access_log.write(f"{url}\n")
        if req.method not in (b"GET", b"HEAD"):
            req.setHeader(b"Allow", b"GET, HEAD")
            return self._send(req, 405, HTML, _html("405 Method Not Allowed", "the web lab serves GET and HEAD"))
        if self.faults is not None and (hop := self.faults.loop_hop(url)) is not None:
            # a later hop of a redirect cycle: no corpus page, no heal, just the next hop
            base, k = hop
            return self._redirect(req, self.faults.loop_next(base, k))
        if path == "/robots.txt" and not query:
            text = self.corpus.robots_txt(host)
            page = None if text is None else Page(url, 200, {"Content-Type": "text/plain; charset=utf-8"}, text.encode())
        else:
            page = self.corpus.get(url)
        if page is None:
            page = Page(url, 404, {"Content-Type": HTML}, _html("404 Not Found", "no such page in the corpus"))
        if self.faults is None:
            return self._respond(req, page.status, page.headers, page.body)
        fault = self.faults.decide(url)
        if fault is not NO_FAULT and self.faults.heal:
            seen = self.attempts[url] = self.attempts.get(url, 0) + 1
            if seen > self.faults.heal:
                fault = NO_FAULT
        if fault is NO_FAULT:
            return self._respond(req, page.status, page.headers, page.body)
        self.stats[f"fault_{fault.kind or 'latency'}"] += 1
        if fault.delay:
            self._later(req, fault.delay, self._inject, req, fault, page, url)
        else:
            self._inject(req, fault, page, url)

    # -- answers --------------------------------------------------------------------------------

    def _respond(self, req: http.Request, status: int, headers: dict[str, str], body: bytes,
                 length: int | None = None) -> None:
        """Status, headers, Content-Length and body; with ``length`` (a declared length for
        faults) only the status and headers are set and the caller writes the body."""
        req.setResponseCode(status)
        for name, value in headers.items():
            req.setHeader(name, value)
        req.setHeader(b"Content-Length", b"%d" % (len(body) if length is None else length))
        if length is None:
            req.write(body)
            req.finish()

    def _send(self, req: http.Request, status: int, ctype: str, body: bytes) -> None:
        self._respond(req, status, {"Content-Type": ctype}, body)

    def _redirect(self, req: http.Request, location: str) -> None:
        self._respond(req, 302, {"Location": location, "Content-Type": HTML},
                      _html("302 Found", "injected redirect loop"))

    def _later(self, req: http.Request, delay: float, fn, *args) -> None:
        """Call ``fn(*args)`` after ``delay`` seconds unless the client has gone by then."""
        call = self.reactor.callLater(delay, fn, *args)
        req.notifyFinish().addErrback(lambda _: call.cancel() if call.active() else None)

    def _inject(self, req: http.Request, fault, page: Page, url: str) -> None:
        kind, body = fault.kind, page.body
        if kind is None:
            self._respond(req, page.status, page.headers, body)
        elif kind == "5xx":
            code = int(fault.value)
            self._send(req, code, HTML, _html(f"{code} Server Error", "injected by the web lab"))
        elif kind == "timeout":
            self._later(req, fault.value, req.transport.loseConnection)
        elif kind == "reset":
            req.transport.abortConnection()  # SO_LINGER 0: the peer sees a TCP RST
        elif kind in ("truncate", "badlength"):
            cut = len(body) // 2
            self._respond(req, page.status, page.headers, body, len(body) if kind == "truncate" else cut)
            req.write(body[:cut] if kind == "truncate" else body)
            req.transport.loseConnection()
        elif kind == "loop":
            self._redirect(req, self.faults.loop_next(url, 0))
        elif kind == "drip":
            self._respond(req, page.status, page.headers, body, len(body))
            step = -(-len(body) // DRIP_PIECES) or 1
            self._drip(req, body, step, fault.value / DRIP_PIECES, 0)

    def _drip(self, req: http.Request, body: bytes, step: int, pause: float, pos: int) -> None:
        if req._disconnected:
            return
        if pos >= len(body):
            req.finish()
            return
        req.write(body[pos:pos + step])
        self.reactor.callLater(pause, self._drip, req, body, step, pause, pos + step)

    # -- the lab's own endpoints ----------------------------------------------------------------

    def _local(self, req: http.Request, path: str, query: str) -> None:
        if path == "/search":
            return self._search(req, parse_qs(query))
        if path == "/_lab/info":
            return self._json(req, 200, self.info())
        if path == "/_lab/seeds":
            return self._json(req, 200, self.seeds)
        if path in ("", "/"):
            text = (f"topiccrawl web lab serving {self.spec} ({self.pages} pages). Use this address as an "
                    f"HTTP proxy; endpoints: /search?q=...&format=json&pageno=N, /_lab/info, /_lab/seeds; "
                    f"search through the proxy at http://{SEARCH_HOST}/search")
            return self._send(req, 200, "text/plain; charset=utf-8", text.encode())
        self._json(req, 404, {"error": f"no lab endpoint {path!r}; try /search, /_lab/info, /_lab/seeds"})

    def _json(self, req: http.Request, status: int, obj) -> None:
        self._send(req, status, JSON, json.dumps(obj, ensure_ascii=False).encode())

    def _search(self, req: http.Request, args: dict[str, list[str]]) -> None:
        fmt = args.get("format", ["json"])[0]
        if fmt != "json":
            return self._json(req, 400, {"error": f"unsupported format {fmt!r}; only format=json"})
        if self.index is None:
            return self._json(req, 503, {"error": "this web lab runs without a search engine"})
        q, pageno = args.get("q", [""])[0], args.get("pageno", ["1"])[0]
        if self.index.ready:
            return self._answer(req, q, pageno)
        if self.index_ready is None:
            self.start_index()
        self.index_ready.addCallback(lambda _: None if req._disconnected else self._answer(req, q, pageno))

    def _answer(self, req: http.Request, q: str, pageno: str) -> None:
        if not self.index.ready:
            return self._json(req, 503, {"error": f"search index {self.index.state}"})
        try:
            self._json(req, 200, self.index.search(q, pageno))
        except SearchError as exc:
            self._json(req, 400, {"error": str(exc)})
