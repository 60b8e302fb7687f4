"""``python -m topiccrawl.weblab CORPUS [--port N] [--bind ADDR] [--faults SPEC] [--labels-out FILE]``

Serves a corpus as an HTTP forward proxy with a search engine (see ``docs/offline-web.md``), or
with ``--labels-out`` writes its ground-truth labels and exits. ``scrapy serveweb`` shares
:func:`add_arguments` and :func:`run`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from topiccrawl.weblab.corpus import DEFAULT_SPEC, READERS, CorpusError, open_corpus
from topiccrawl.weblab.faults import FaultSpecError, parse_faults
from topiccrawl.weblab.search import DEFAULT_LIMIT, SEARCH_HOST, SearchIndex

DEFAULT_PORT = 8780


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by ``python -m topiccrawl.weblab`` and ``scrapy serveweb``."""
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--bind", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--faults", metavar="SPEC",
                        help="fault injection, e.g. 'latency=0.05-0.2@0.1,5xx@0.02,reset@0.01,seed=7'")
    parser.add_argument("--labels-out", metavar="FILE",
                        help="write 'url<TAB>label,label' for every page to FILE ('-' = stdout) and exit")
    parser.add_argument("--search-limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"index at most N pages for search (default {DEFAULT_LIMIT})")
    parser.add_argument("--reader", action="append", default=[], metavar="KIND=MODULE:FUNCTION",
                        help="register an extra corpus reader kind (may be repeated)")
    parser.add_argument("--access-log", metavar="FILE",
                        help="append one line per request for a corpus page (its URL) to FILE")
    parser.add_argument("--parent-pid", type=int, default=0, metavar="PID", help=argparse.SUPPRESS)


def watch_parent(pid: int, stop) -> None:
    """Die with process ``pid`` (the crawler that started the lab, even after a kill -9): Linux's
    parent-death signal (SIGTERM, handled like a Ctrl-C), and everywhere the end of stdin, a pipe
    only the parent writes to (``stop`` is called from a reader thread)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != pid:  # the parent died before the signal was armed
        stop()
        return

    def read_until_eof() -> None:
        try:  # the raw descriptor: a daemon thread holding sys.stdin's lock would abort the exit
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        stop()

    threading.Thread(target=read_until_eof, name="parent-watch", daemon=True).start()


def _say(text: str) -> None:
    # one write with its newline: stderr shares the parent's file, and print() writes the end apart,
    # so a log line could land between the text and its newline
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run(opts: argparse.Namespace) -> int:
    """Run the lab for parsed options (``opts.corpus`` is the spec); return the exit code."""
    # the parent's death ends the process: at once while the corpus loads, then by stopping the reactor
    stopper = [lambda: os._exit(0)]
    if getattr(opts, "parent_pid", 0):
        watch_parent(opts.parent_pid, lambda: stopper[0]())
    try:
        for item in opts.reader:
            kind, eq, target = item.partition("=")
            if not eq or ":" not in target:
                raise CorpusError(f"--reader {item!r}: expected KIND=MODULE:FUNCTION")
            READERS[kind.strip().lower()] = target.strip()
        plan = parse_faults(opts.faults) if opts.faults else None
        if opts.labels_out:
            from topiccrawl.weblab.api import write_labels

            count = write_labels(opts.corpus, opts.labels_out)
            if opts.labels_out != "-":
                _say(f"wrote labels of {count} pages of {opts.corpus} to {opts.labels_out}")
            return 0
        corpus = open_corpus(opts.corpus)
        index = SearchIndex.for_spec(corpus, opts.corpus, opts.search_limit)
    except BrokenPipeError:  # --labels-out - | head: the reader had enough; no message, as for cat
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit fails no more
        return 0
    except (CorpusError, FaultSpecError, OSError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        return 130

    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError, ReactorNotRunning

    from topiccrawl.weblab.server import LabServer

    try:
        access_log = open(opts.access_log, "a", buffering=1, encoding="utf-8") if opts.access_log else None
    except OSError as exc:
        print(f"error: --access-log: {exc}", file=sys.stderr, flush=True)
        return 2
    server = LabServer(corpus, index, plan, opts.corpus, access_log=access_log)
    try:
        server.listen(opts.port, opts.bind)
    except CannotListenError as exc:
        print(f"error: cannot listen on {opts.bind}:{opts.port}: {exc.socketError}", file=sys.stderr, flush=True)
        return 2

    def stop_now() -> None:
        try:
            reactor.stop()
        except ReactorNotRunning:  # a second Ctrl-C while stopping
            pass

    # Ctrl-C and SIGTERM stop the reactor from the moment the lab says it is ready, also before
    # reactor.run() has installed Twisted's own handlers (a KeyboardInterrupt raised inside the
    # reactor's startup could be caught and logged there, leaving the lab running)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: reactor.callFromThread(stop_now))
    stopper[0] = lambda: reactor.callFromThread(stop_now)
    proxy = f"http://{opts.bind}:{server.port}"
    size = f"{len(corpus)} pages"
    _say(f"topiccrawl web lab: {opts.corpus} ({corpus.name}, {size})")
    _say(f"  proxy:  {proxy}  (Scrapy: request.meta['proxy'] or http_proxy={proxy})")
    _say(f"  search: {proxy}/search?q=...&format=json  (through the proxy: http://{SEARCH_HOST}/search)")
    if index.ready:
        _say(f"  search index: {index.indexed} pages, cached in {index.path}")
    else:
        sampled = f" (a bounded sample: corpus has {size})" if index.sampled else ""
        _say(f"  search index: building over up to {min(len(corpus), index.limit)} pages{sampled} "
             f"in the background; cache {index.path}")
    if plan:
        _say(f"  faults: {plan.spec}")
    _say(f"topiccrawl-weblab ready proxy={proxy} search={proxy}/search pages={len(corpus)}")

    started = time.monotonic()
    if not index.ready:
        server.start_index().addCallback(lambda _: index.ready and _say(
            f"search index ready: {index.indexed} pages in {time.monotonic() - started:.1f} s"))
    reactor.run(installSignalHandlers=False)
    server.stop_index()
    _say("topiccrawl web lab stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topiccrawl.weblab", description=(
        "Serve a corpus on loopback as an HTTP forward proxy with a search engine, or write its "
        "ground-truth labels with --labels-out (docs/offline-web.md)."))
    parser.add_argument("corpus", nargs="?", default=DEFAULT_SPEC,
                        help=f"corpus spec, e.g. {DEFAULT_SPEC}?pages=2000 (default {DEFAULT_SPEC})")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
