"""The one place that reads Scrapy internals (written for Scrapy 2.19).

Scrapy has no public API for a few things the schedulers need; like Scrapy's own
``scrapy.pqueues.DownloaderInterface``, this adapter names them in one module, so a Scrapy upgrade
is checked here and nowhere else (``tests/test_architecture.py`` keeps it so):

* which requests the engine still works on (the downloader's and the scraper's live sets, what
  ``scrapy.utils.engine.get_engine_status`` reports);
* the default callback of a spider (``Spider._parse``, used when a request has none);
* a header's raw value list (``Headers`` is a dict of normalised keys; ``Headers.get`` normalises
  the key and returns the last value only);
* the fingerprints ``RFPDupeFilter.__init__`` read from a JOBDIR's ``requests.seen``;
* whether the engine is still reading ``Spider.start()``, and a delayed "ask the scheduler again"
  (the engine's ``nextcall``), for harvest-aware dispatch.
"""

from __future__ import annotations

from scrapy.utils.asyncio import call_later

#: the Scrapy release these accessors were written and tested for
SCRAPY_VERSION = "2.19"


def live_requests(crawler) -> set | None:
    """Requests in the downloader (middlewares included) or whose response is in the scraper;
    None when the crawler has no engine yet (benchmarks and unit tests drive schedulers directly)."""
    try:
        engine = crawler.engine
    except RuntimeError:  # Scrapy 2.19 raises before the engine exists
        return None
    if engine is None:
        return None
    live = set(engine.downloader.active)
    slot = engine.scraper.slot
    if slot is not None:
        live |= slot.active
    return live


def default_callback(spider):
    """What Scrapy calls for a response whose request has no callback."""
    return spider._parse


def raw_header(headers, name: bytes) -> list | None:
    """The value list of ``name`` (already normalised, e.g. ``b"Referer"``) without Headers'
    key normalisation."""
    return dict.get(headers, name)


def set_raw_header(headers, name: bytes, values: list) -> None:
    """Set the value list of an already normalised header name."""
    dict.__setitem__(headers, name, values)


def take_loaded_fingerprints(dupefilter) -> set:
    """The fingerprints an ``RFPDupeFilter`` loaded from JOBDIR; its set is emptied."""
    loaded = dupefilter._fingerprints
    dupefilter._fingerprints = set()
    return loaded


def start_pending(crawler) -> bool:
    """The engine is still reading the spider's ``start()`` (``ExecutionEngine._start``)."""
    try:
        engine = crawler.engine
    except RuntimeError:
        return False
    return engine is not None and getattr(engine, "_start", None) is not None


def wake_engine(crawler, delay: float) -> None:
    """Make the engine ask the scheduler again in ``delay`` seconds (besides its own triggers: a
    request done, a request queued, the 5 s heartbeat). Not ``nextcall.schedule(delay)``, which
    would swallow every sooner ``schedule()`` until it fires."""
    try:
        engine = crawler.engine
    except RuntimeError:
        return
    slot = getattr(engine, "_slot", None) if engine is not None else None
    if slot is not None:
        call_later(delay, slot.nextcall.schedule)
