"""Page extraction in a worker process (``TOPICCRAWL_PARSE_WORKERS``; docs/architecture.md,
"Parsing beside the crawl").

Extracting a page (lxml, the main text, the anchors with their context) and tokenising its text
is pure work on the page's bytes, and about a third of a focused crawl's CPU. A worker process
does it while the crawl's own process schedules, scores and learns. The worker gives exactly what
:func:`extract` and :func:`document_terms` give in the crawl's process: the same function on the
same bytes, with the same words taught to jieba.

A worker is a ``spawn``-ed process (forking a process that runs a reactor and threads is not safe)
joined by one pipe, which the crawl's reactor watches like a socket: no thread in the crawl's
process, so nothing there competes with the crawl for the GIL. A worker holds at most two pages at a time;
a page that finds every worker full is extracted in the crawl's process. If a worker dies, the crawl logs one warning and extracts
in its own process from then on, the pages the worker held included: no page is lost.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
from collections.abc import Callable

from twisted.internet.defer import Deferred

from topiccrawl.scoring import text
from topiccrawl.scoring.text import Extracted, document_terms, extract

logger = logging.getLogger(__name__)

#: pages sent to a worker and not answered yet, at most: enough to keep it busy, few enough that
#: a pipe write does not wait for the worker
IN_WORKER = 2


def page_terms(body: bytes, url: str, content_type: str | None) -> tuple[Extracted, list[str]]:
    """A page extracted, and the terms of its title, meta data and text."""
    ex = extract(body, url, content_type)
    return ex, document_terms(ex)


def _serve(conn, segmenter: bool) -> None:
    """The worker's loop: ``("words", [...])`` teaches jieba words, ``("page", (id, body, url,
    content type))`` is answered with ``(id, True, Extracted, terms joined by spaces)`` (a term
    never holds a space: one string to pickle, not thousands) or ``(id, False, error, None)``."""
    if segmenter:
        text.load_segmenter()
    conn.send_bytes(b"ready")
    while True:
        try:
            kind, payload = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the crawl closed the pipe, or died
            return
        if kind == "words":
            text.add_words(payload)
            continue
        task, body, url, content_type = payload
        try:
            ex, terms = page_terms(body, url, content_type)
            answer = (task, True, ex, " ".join(terms))
        except Exception as exc:  # extract's own error: raised in the crawl as it would be there
            try:
                pickle.dumps(exc)
            except Exception:
                exc = RuntimeError(repr(exc))
            answer = (task, False, exc, None)
        conn.send_bytes(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))


def resolve_workers(setting: str) -> int:
    """``TOPICCRAWL_PARSE_WORKERS``: ``auto`` is 1 where this process may use two cores or more,
    else 0 (extract in the crawl's process); a number is taken as it is."""
    if setting == "auto":
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
        return 1 if cores >= 2 else 0
    return int(setting)


class _Worker:
    """One worker process and its pipe; a reader of the reactor (``fileno``, ``doRead``,
    ``connectionLost``, ``logPrefix``)."""

    def __init__(self, pool: ParsePool, segmenter: bool) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pool = pool
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_serve, args=(child, segmenter), daemon=True, name="topiccrawl-parse")
        self.process.start()
        child.close()
        self.started = False
        self.dead = False
        #: task id -> (body, url, content type, Deferred), in the order sent
        self.sent: dict[int, tuple] = {}
        self.words_sent = 0

    def fileno(self) -> int:
        return -1 if self.conn.closed else self.conn.fileno()

    def logPrefix(self) -> str:
        return "topiccrawl-parse"

    def send(self, task: int, job: tuple) -> None:
        words = text.added_words()
        if len(words) > self.words_sent:
            self.conn.send_bytes(pickle.dumps(("words", list(words[self.words_sent:]))))
            self.words_sent = len(words)
        body, url, content_type, _ = job
        self.conn.send_bytes(pickle.dumps(("page", (task, body, url, content_type)), protocol=pickle.HIGHEST_PROTOCOL))
        self.sent[task] = job

    def doRead(self):
        try:
            while not self.dead and self.conn.poll():
                message = self.conn.recv_bytes()
                if message == b"ready":
                    self.started = True
                    continue
                task, ok, value, joined = pickle.loads(message)
                _, _, _, d = self.sent.pop(task)
                if ok:
                    d.callback((value, joined.split(" ") if joined else []))
                else:
                    d.errback(value)
        except (EOFError, OSError) as exc:
            self.pool._lost(self, exc)
        return None

    def connectionLost(self, reason) -> None:
        if not self.dead:
            self.pool._lost(self, getattr(reason, "value", reason))

    def close(self) -> None:
        self.dead = True
        self.conn.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)


class ParsePool:
    """Worker processes that extract pages. :meth:`submit` returns a Deferred of ``(Extracted,
    terms)``. ``watch`` and ``unwatch`` add and remove a worker's pipe from the reactor
    (``reactor.addReader`` / ``removeReader``); without them the owner calls :meth:`pump`."""

    def __init__(self, workers: int, segmenter: bool = False, watch: Callable | None = None,
                 unwatch: Callable | None = None) -> None:
        self.workers = workers
        self.broken = False
        self._watch, self._unwatch = watch, unwatch
        self._next = 0
        self._workers = [_Worker(self, segmenter) for _ in range(workers)]
        for worker in self._workers:
            if watch is not None:
                watch(worker)

    @property
    def ready(self) -> bool:
        """True once a worker has started (and, for a Chinese topic, loaded jieba), until one dies:
        pages fetched before are extracted in the crawl's process rather than wait for it."""
        return not self.broken and any(w.started for w in self._workers)

    def can_take(self) -> bool:
        """A started worker holds fewer than :data:`IN_WORKER` pages. When none does, the crawl
        extracts the page itself: pages never queue for a worker, so a crawl that fetches faster
        than the worker extracts is slowed by its own process, as without a worker, and a page's
        links are never long in coming (a queue of pages waiting for extraction would leave the
        frontier choosing without their links)."""
        return self._free() is not None

    def _free(self) -> _Worker | None:
        if self.broken:
            return None
        free = [w for w in self._workers if w.started and not w.dead and len(w.sent) < IN_WORKER]
        return min(free, key=lambda w: len(w.sent)) if free else None

    def submit(self, body: bytes, url: str, content_type: str | None) -> Deferred:
        d: Deferred = Deferred()
        job = (body, url, content_type, d)
        worker = self._free()
        if worker is None:
            self._here(job)
            return d
        self._next += 1
        try:
            worker.send(self._next, job)
        except OSError as exc:
            worker.sent.pop(self._next, None)
            self._lost(worker, exc)
            self._here(job)
        return d

    def _here(self, job: tuple) -> None:
        body, url, content_type, d = job
        try:
            result = page_terms(body, url, content_type)
        except Exception as exc:
            d.errback(exc)
        else:
            d.callback(result)

    def _lost(self, worker: _Worker, exc: BaseException | None) -> None:
        """A worker died (or its pipe broke): every page it held is extracted here, and so is every
        later page."""
        if worker.dead:
            return
        if self._unwatch is not None:
            self._unwatch(worker)
        worker.dead = True
        held = list(worker.sent.values())
        worker.sent.clear()
        if not self.broken:
            self.broken = True
            logger.warning("page extraction worker failed (%s); extracting pages in the crawl's process "
                           "from now on", exc or "its pipe closed")
        for job in held:
            self._here(job)

    def pump(self, timeout: float) -> None:
        """Without a reactor: wait up to ``timeout`` seconds for answers and hand them on."""
        live = [w for w in self._workers if not w.dead]
        for conn in multiprocessing.connection.wait([w.conn for w in live], timeout):
            for worker in live:
                if worker.conn is conn:
                    worker.doRead()

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if not w.dead]

    def close(self) -> None:
        for worker in self._workers:
            if not worker.dead and self._unwatch is not None:
                self._unwatch(worker)
            worker.close()
