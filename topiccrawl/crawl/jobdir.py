"""Crash-safe JOBDIR for the memory scheduler: a snapshot plus a journal of what happened since.

``JOBDIR/topiccrawl.state`` is a *snapshot*: the frontier (:meth:`Frontier.state`), the requests
chosen or in flight, the :class:`~topiccrawl.crawl.runtime.TopicCrawl` state, the duplicate filter's
fingerprints and Scrapy's counters. It is written whole to a temporary file, flushed to disk and
renamed over the old one (atomic), at open, every ``TOPICCRAWL_CHECKPOINT_INTERVAL`` seconds and
on close.

``JOBDIR/topiccrawl.journal`` is an append-only log of the frontier's events since that snapshot,
one pickled record each, headed by the snapshot's *epoch* (a random token written in both):

* ``push`` — a link entered the frontier (its request packed as in the queue);
* ``chosen`` — a request was put before the frontier (a start request, a request kept over budget);
* ``pop`` — a link was handed to the engine;
* ``count`` — a page was counted (URL, R(P)): the harvest pipeline counts it (it calls the
  frontier's ``feedback``), and the record is written when its item is through the pipelines —
  after its feed line is flushed (:mod:`topiccrawl.crawl.feeds`), or when the item is dropped;
* ``done`` — a request handed out left the engine (the downloader and the spider are through).

Records are flushed at each ``pop``, ``count`` and ``done``, so a kill -9 (or an out-of-memory
kill) loses at most an unfinished tail, and a resume knows every request that may have been sent.
A page killed between its count and its feed line is not counted in the journal: its request is
in flight, fetched and counted again on resume, so no feed loses it (a kill between the flushed
line and the record writes that page's line twice). A snapshot waits while a counted page's record
is pending (its count is in the crawl state the snapshot saves); a record pending for 5 s (an item
whose signals never named its URL) is written anyway.
Resuming replays the journal over the snapshot: the links pushed since are queued again, the pages
counted since are counted again (once per URL), the links handed out and done are skipped when
the strategy reaches them, and the ones handed out and not done — the requests in flight at the
kill — are fetched first. A page counted is done as far as a resume
goes (the project's spiders yield a page's links before its item, so they are queued by then):
it is never fetched and counted again, also when the snapshot caught its request still in the
engine. So no queued link is lost and at most the requests in flight are fetched again.

The duplicate filter is rebuilt from the snapshot's fingerprints and the journal's requests, so it
agrees with the frontier; ``requests.seen`` is no longer appended to (Scrapy's line-by-line file
ran ahead of the frontier saved on close, which made a resume after a crash see every link as
already seen).

Between snapshots the document frequencies, the link graph, the page classifier and the
strategy's own variables (WL's ln g, a learned model) are not journaled: a resume continues them
from the snapshot, at most one interval old. The metrics (DP, LP, the harvest rows) are exact.
A journal whose epoch is not the snapshot's is stale (the kill fell between renaming a snapshot and
starting its journal) and is ignored: the snapshot already holds its records.
"""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import secrets
import time
from pathlib import Path

from scrapy.utils.request import request_from_dict

from topiccrawl.crawl.codec import _ABSENT  # the packed requests' "no such key" marker
from topiccrawl.crawl.errors import ConfigError
from topiccrawl.crawl.meta import META_KEY
from topiccrawl.strategies.base import Link

STATE_FILE = "topiccrawl.state"
JOURNAL_FILE = "topiccrawl.journal"
JOB_FILE = "topiccrawl.job"
PROTOCOL = pickle.HIGHEST_PROTOCOL


# -- packed requests in a pickle -----------------------------------------------------------------
#: stands for the codec's ``_ABSENT`` (a bare ``object()``, which would unpickle as another object)
_MARK = "\x00topiccrawl:absent"


def _swap(value, old, new):
    if value is old:
        return new
    if type(value) is tuple and any(v is old for v in value):
        return tuple(new if v is old else v for v in value)
    return value


def _cached(cache: dict, shape, make):
    """``make(shape)``, once per distinct shape (so a pickle shares it); shapes are keyed by value."""
    try:
        done = cache.get(shape)
    except TypeError:  # an unhashable meta value: no sharing
        return make(shape)
    if done is None:
        done = cache[shape] = make(shape)
    return done


def portable(payload, cache: dict):
    """A queue payload that pickles: a packed request with the absent-key marker as text."""
    if type(payload) is not tuple:
        return payload
    shape, parent, anchor = payload
    extra = shape[1]
    if parent is not _ABSENT and anchor is not _ABSENT and extra is not _ABSENT and type(extra) is not tuple:
        return payload  # the usual case: nothing to replace
    shape = _cached(cache, shape, lambda s: (s[0], _swap(s[1], _ABSENT, _MARK), *s[2:]))
    return (shape, _MARK if parent is _ABSENT else parent, _MARK if anchor is _ABSENT else anchor)


def _restore_extra(extra):
    if type(extra) is tuple:
        return tuple(_ABSENT if type(v) is str and v == _MARK else v for v in extra)
    return _ABSENT if type(extra) is str and extra == _MARK else extra


def unportable(payload, cache: dict):
    """:func:`portable` undone."""
    if type(payload) is not tuple:
        return payload
    shape, parent, anchor = payload
    extra = shape[1]
    if type(extra) is not tuple and extra != _MARK and parent != _MARK and anchor != _MARK:
        return payload
    shape = _cached(cache, shape, lambda s: (s[0], _restore_extra(s[1]), *s[2:]))
    return (shape, _ABSENT if parent == _MARK else parent, _ABSENT if anchor == _MARK else anchor)


def load(fh):
    return pickle.load(fh)


#: snapshots read by the ``crawl`` command's check, by (path, mtime, size): the scheduler of the same
#: process takes it instead of reading the file again
_read: dict[tuple, dict] = {}


def _file_key(path: Path) -> tuple:
    st = path.stat()
    return str(path.resolve()), st.st_mtime_ns, st.st_size


def read_state(path: str | os.PathLike, keep: bool = False) -> dict:
    """The snapshot at ``path``; a one-line :class:`ConfigError` when it cannot be read (a damaged
    or partly copied JOBDIR), so the crawl is refused and the JOBDIR left as it is. ``keep``: hold
    it for the next call in this process (the command's check, then the scheduler)."""
    path = Path(path)
    try:
        key = _file_key(path)
        data = _read.pop(key, None)
        if data is None:
            with path.open("rb") as fh:
                data = load(fh)
            if not isinstance(data, dict) or not {"frontier", "chosen", "crawl"} <= data.keys():
                raise ValueError("not a crawl state")
    except Exception as exc:  # unpickling a damaged file can raise almost any exception
        raise ConfigError(f"JOBDIR {path.parent}: its crawl state {path.name} cannot be read "
                          f"({type(exc).__name__}: {str(exc)[:120]}); the JOBDIR is left as it is: resume "
                          "from a copy made before the damage, or use another JOBDIR") from None
    if keep:
        _read[key] = data
    return data


def write_atomic(path: Path, obj) -> None:
    """Pickle ``obj`` to ``path``: a temporary file, flushed to disk, renamed over ``path`` (a write
    that fails, e.g. on a full disk, leaves ``path`` as it was and no temporary file)."""
    tmp = path.with_suffix(".tmp")
    try:
        with tmp.open("wb") as fh:
            pickle.dump(obj, fh, protocol=PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)


#: Scrapy counters a resumed crawl continues (summed over its runs, as of the last snapshot)
CARRIED = ("downloader/", "scheduler/", "retry/", "dupefilter/", "httperror/", "robotstxt/", "offsite/",
           "log_count/", "spider_exceptions/", "item_scraped_count", "item_dropped_count",
           "response_received_count", "topiccrawl/examples/",
           # the crawl's own counters of responses and pages (not those its state gives at close)
           "topiccrawl/non_html", "topiccrawl/outside_corpus", "topiccrawl/refused_private",
           "topiccrawl/redirect_refiltered", "topiccrawl/classifier/guarded_pages",
           "topiccrawl/semantic/closeness_links", "topiccrawl/dispatch/page_link_timeouts",
           # the site finder's search answers (spiders.sitefinder; its other figures come from its state)
           "topiccrawl/sites/search_results", "topiccrawl/sites/site_search_hits", "topiccrawl/sites/search_errors",
           # 1: saved while the example pages' verdict was awaited (spiders.focused)
           "topiccrawl/examples_pending")
#: text stats a resumed crawl keeps as they were (the words derived from its example pages)
CARRIED_TEXT = ("topiccrawl/examples/words",)


def counters(stats) -> dict:
    """The counters of ``stats`` a resumed crawl adds to its own (:data:`CARRIED`), and the text
    stats it keeps (:data:`CARRIED_TEXT`)."""
    return {k: v for k, v in stats.get_stats().items()
            if (k.startswith(CARRIED) and type(v) is int) or (k in CARRIED_TEXT and isinstance(v, str))}


def new_epoch() -> str:
    return secrets.token_hex(8)


def key(link) -> tuple[int, str]:
    return link.seq, link.url


def request_seq(request) -> int:
    return int((request.meta.get(META_KEY) or {}).get("seq", -1))


# -- the crawl a JOBDIR belongs to ---------------------------------------------------------------
def job_identity(spider: str, config) -> dict:
    """What a JOBDIR must agree on to be resumed: the spider, the topic and the web, and for a topic
    of words what judges its pages (``judged``: language, β, words; an edited topic file judged the
    pages after a resume otherwise than those before it)."""
    if config.scorer == "vsm" and not config.topic_tree:
        from topiccrawl.scoring.topic import judged_by, load_topic

        loaded = load_topic(config.topic)
        return {"spider": spider, "topic": loaded.name, "web": config.web.strip(), "judged": judged_by(loaded)}
    topic = f"{config.topic_node}@{config.topic_tree} ({config.scorer})"
    return {"spider": spider, "topic": topic, "web": config.web.strip()}


def check_jobdir(jobdir: str | os.PathLike, spider: str, config) -> dict:
    """Raise a one-line :class:`ConfigError` when ``jobdir`` was written by another crawl (another
    spider, topic or web); return this crawl's identity. A JOBDIR without a record is accepted."""
    identity = job_identity(spider, config)
    path = Path(jobdir) / JOB_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return identity
    except (OSError, ValueError) as exc:
        raise ConfigError(f"JOBDIR {jobdir}: unreadable {JOB_FILE} ({exc}); use another JOBDIR") from None
    differ = [f"{k} {recorded.get(k)!r} (this crawl: {v!r})" for k, v in identity.items()
              if k != "judged" and recorded.get(k) != v]
    if differ:
        raise ConfigError(f"JOBDIR {jobdir} belongs to another crawl: {', '.join(differ)}; "
                          "use another JOBDIR (or delete it to start over)")
    judged = recorded.get("judged")  # a JOBDIR of an earlier release lacks it
    if isinstance(judged, dict) and "judged" in identity and judged != identity["judged"]:
        from topiccrawl.scoring.topic import judged_difference

        raise ConfigError(f"JOBDIR {jobdir} {judged_difference(judged, identity['judged'], 'this crawl')}: its "
                          "pages so far were judged by that topic; use another JOBDIR for the edited one")
    return identity


def mend_spider_state(jobdir: str | os.PathLike) -> str | None:
    """Scrapy's SpiderState extension pickles ``spider.state`` to ``JOBDIR/spider.state``; one cut
    short (a full disk) made every later resume log an EOFError traceback. The project's spiders
    keep nothing there, so one that cannot be read is started anew: returns the warning to log."""
    path = Path(jobdir) / "spider.state"
    if not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            pickle.load(fh)
        return None
    except Exception as exc:  # whatever unpickling a damaged file raises
        try:
            path.write_bytes(pickle.dumps({}, protocol=4))
        except OSError as err:
            raise ConfigError(f"JOBDIR {jobdir}: spider.state can neither be read nor replaced "
                              f"({err.strerror or err})") from None
        return (f"JOBDIR {jobdir}: spider.state could not be read ({type(exc).__name__}: a write cut short?); "
                "started anew (the project's spiders keep nothing there)")


def record_jobdir(jobdir: str | os.PathLike, identity: dict) -> None:
    path = Path(jobdir) / JOB_FILE
    if not path.exists():
        Path(jobdir).mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(identity, ensure_ascii=False) + "\n", encoding="utf-8")


# -- the journal ---------------------------------------------------------------------------------
class Journal:
    """The append-only log of one snapshot epoch (module docstring). It also keeps the links
    handed to the engine and not yet ``done`` (by key: insertion number and URL), to write their
    ``done``, and which of them are counted already."""

    def __init__(self, path: Path, epoch: str, outstanding=(), spider=None, live=lambda: None,
                 on_fail=lambda exc: None) -> None:
        self.path = path
        self.spider = spider
        #: the engine's live requests (:func:`topiccrawl.crawl.engine.live_requests`)
        self.live = live
        #: the first write that failed (a full disk): nothing is written after it, so what was
        #: written stays a valid journal to resume from; ``on_fail`` hears of it once
        self.failed: OSError | None = None
        self.on_fail = on_fail
        self.fh: io.BufferedWriter | None = path.open("wb")
        self._write(("epoch", epoch))
        self._flush()
        self.outstanding: set[tuple] = set(outstanding)
        #: handed out, counted, and still in the engine: done as far as a resume goes
        self.counted: set[tuple] = set()
        self._seq_of = {url: seq for seq, url in self.outstanding}
        #: pages counted whose item is not through the pipelines yet: URL -> (relevance, since when)
        self.pending: dict[str, tuple[float, float]] = {}

    def _write(self, record) -> None:
        if self.failed is None:
            try:
                pickle.dump(record, self.fh, protocol=PROTOCOL)
            except OSError as exc:
                self._fail(exc)

    def _flush(self) -> None:
        if self.failed is None:
            try:
                self.fh.flush()
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self.failed = exc
        self.on_fail(exc)

    def push(self, link) -> None:
        self._write(("push", self._portable(link)))

    def chosen(self, link) -> None:
        self._write(("chosen", self._portable(link)))

    def pop(self, link) -> None:
        self.settle()  # before the new one: every request handed out earlier is live or through
        self.outstanding.add(key(link))
        self._seq_of[link.url] = link.seq
        self._write(("pop", link.seq, link.url))
        self._flush()  # before the request leaves: a resume knows every request that may be in flight

    def count(self, url: str, relevance: float) -> None:
        """The page ``url`` was counted (the harvest pipeline): its record waits for the item
        (:meth:`through`)."""
        self.pending[url] = (relevance, time.monotonic())

    def through(self, url: str) -> None:
        """The item of ``url`` left the pipelines (its feed line flushed, or dropped): write the
        ``count`` record of its page, if it was counted."""
        entry = self.pending.pop(url, None)
        if entry is None or self.fh is None:
            return
        relevance = entry[0]
        seq = self._seq_of.get(url)
        if seq is not None:
            self.counted.add((seq, url))
        self._write(("count", seq, url, relevance))
        self._flush()

    def through_all(self, older_than: float | None = None) -> None:
        """Write every pending ``count`` record (the crawl closes: the items are through), or those
        pending for more than ``older_than`` seconds (an item gets through in milliseconds: one
        whose signal never named its URL, e.g. a user's pipeline that changed it, must not hold
        the snapshots back for good)."""
        now = time.monotonic()
        for url, (_, since) in list(self.pending.items()):
            if older_than is None or now - since > older_than:
                self.through(url)

    def settle(self) -> None:
        """Write ``done`` for every handed-out request no longer in the engine (the downloader's
        and the scraper's live requests). Never called between a pop and the engine taking the
        request, so every request handed out is live until it is through."""
        if not self.outstanding or self.fh is None:
            return
        live = self.live()
        if live is None:  # no engine (a scheduler driven directly)
            return
        busy = {(request_seq(r), r.url) for r in live}
        done = [k for k in self.outstanding if k not in busy]
        if not done:
            return
        for k in done:
            self._write(("done", *k))
            self.outstanding.discard(k)
            self.counted.discard(k)
            if self._seq_of.get(k[1]) == k[0]:
                del self._seq_of[k[1]]
        self._flush()

    def close(self) -> None:
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:  # its buffer could not be written: the records before it stand
                pass
            self.fh = None

    def _portable(self, link) -> tuple:
        return link_tuple(link, {}, self.spider)


def link_tuple(link, cache: dict, spider) -> tuple:
    """``link`` as a plain tuple that pickles fast (a dataclass with slots does not): its fields,
    the payload packed (:func:`portable`) or a Request as its ``to_dict``."""
    payload = link.payload
    if type(payload) is tuple:
        payload = portable(payload, cache)
    elif payload is not None and not isinstance(payload, dict):
        payload = payload.to_dict(spider=spider)
    return (link.url, link.score, link.depth, link.domain, link.potential, payload, link.seq)


def tuple_link(stored, cls=Link):
    """A link from :func:`link_tuple` as ``cls`` (a snapshot of an older version holds Links)."""
    return cls(*stored) if type(stored) is tuple else stored


def read_journal(path: Path, epoch: str) -> list[tuple] | None:
    """The records of the journal of snapshot ``epoch`` (None: no journal, or a stale one). A torn
    last record (the kill fell inside a write) ends the list."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    fh = io.BytesIO(data)
    records = []
    while fh.tell() < len(data):
        try:
            records.append(load(fh))
        except Exception:  # a truncated record: everything before it holds
            break
    if not records or records[0] != ("epoch", epoch):
        return None
    return records[1:]


class Replay:
    """The journal's effect on a snapshot: what to queue, skip, fetch first and count again."""

    def __init__(self, records: list[tuple], inflight_keys) -> None:
        #: pushed since the snapshot and not handed out
        self.pushed: dict[tuple, object] = {}
        #: put before the frontier since the snapshot and not handed out
        self.chosen: dict[tuple, object] = {}
        #: handed out and not done: the journal's link, or None for a link of the snapshot
        self.popped: dict[tuple, object] = {k: None for k in inflight_keys}
        #: links of the snapshot that are done (or queued again under the same key): skip them
        self.gone: set[tuple] = set()
        #: pages counted, in order: (url, relevance)
        self.counted: list[tuple[str, float]] = []
        #: every request the journal saw enter the scheduler (for the duplicate filter)
        self.requests: list = []
        for record in records:
            getattr(self, f"_{record[0]}")(*record[1:])

    def _push(self, stored) -> None:
        link = tuple_link(stored)
        k = key(link)
        if k in self.popped and self.popped.pop(k) is None:
            self.gone.add(k)  # handed out, then queued again: the journal's copy is the live one
        self.pushed[k] = link
        self.requests.append(link)

    def _chosen(self, stored) -> None:
        link = tuple_link(stored)
        self.chosen[key(link)] = link
        self.requests.append(link)

    def _pop(self, seq: int, url: str) -> None:
        k = (seq, url)
        self.popped[k] = self.chosen.pop(k, None) if k in self.chosen else self.pushed.pop(k, None)

    def _count(self, seq: int | None, url: str, relevance: float) -> None:
        # a counted page is done: its links were queued before it (the spiders yield a page's
        # links first), and fetching it again would count it twice
        self.counted.append((url, relevance))
        if seq is not None:
            self._done(seq, url)

    def _done(self, seq: int, url: str) -> None:
        k = (seq, url)
        if k in self.popped and self.popped.pop(k) is None:
            self.gone.add(k)

    def inflight(self) -> dict[tuple, object]:
        """Handed out and not done: fetched first on resume (at most the requests in flight)."""
        return self.popped


def to_request(link, packer, spider, cache: dict):
    """The Request of a stored link (payload :func:`portable`-packed, a Request, or a dict)."""
    payload = link.payload
    if isinstance(payload, dict):
        return request_from_dict(payload, spider=spider)
    if type(payload) is tuple:
        link = copy.copy(link)
        link.payload = unportable(payload, cache)
        return packer.unpack(link)
    return payload


def to_packed(link, packer, spider, cache: dict):
    """The queue form of a stored link's request."""
    payload = link.payload
    if type(payload) is tuple:
        return unportable(payload, cache)
    return packer.pack(to_request(link, packer, spider, cache))


class JournaledFrontier:
    """The crawl's frontier with each push and pop journaled, and the links the journal says are
    done (or re-queued elsewhere) dropped when the strategy reaches them. Every other member is
    the strategy's own."""

    def __init__(self, inner, journal: Journal | None = None, skip=()) -> None:
        self.inner = inner
        self.journal = journal
        self.skip: set[tuple] = set(skip)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return max(len(self.inner) - len(self.skip), 0)

    def push(self, link) -> None:
        self.inner.push(link)
        if self.journal is not None:
            self.journal.push(link)

    def pop(self):
        link = self.inner.pop()
        while link is not None and self.skip and key(link) in self.skip:
            self.skip.discard(key(link))
            self.inner.forget_inflight([link.url])  # done before the crash: never fetched again
            link = self.inner.pop()
        if link is not None and self.journal is not None:
            self.journal.pop(link)
        return link

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None:
        """A counted page (the harvest pipeline calls this right after counting): journaled."""
        if self.journal is not None:
            self.journal.count(url, relevance)
        self.inner.feedback(url, domain, relevance, beta)

    def peek(self):
        head = self.inner.peek()
        while head is not None and self.skip and key(head[1]) in self.skip:
            self.skip.discard(key(head[1]))
            self.inner.pop()
            self.inner.forget_inflight([head[1].url])
            head = self.inner.peek()
        return head


class JournaledChosen(list):
    """The scheduler's list of requests fetched before the frontier, journaled."""

    journal: Journal | None = None

    def append(self, link) -> None:
        super().append(link)
        if self.journal is not None:
            self.journal.chosen(link)

    def pop(self, index: int = -1):
        link = super().pop(index)
        if self.journal is not None:
            self.journal.pop(link)
        return link
