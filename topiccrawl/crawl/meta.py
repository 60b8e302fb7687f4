"""The request-meta layout: what topiccrawl keeps in ``Request.meta``, written down once.

A request of the project's spiders carries ``meta[META_KEY]``, a dict with these keys (all
optional; the scheduler fills the defaults):

========== ======= =====================================================================
key        type    meaning
========== ======= =====================================================================
score      float   the link's priority R(l) (WL paper eq. 5); 1.0 for seeds
depth      int     links followed from a seed (0 = seed)
parent     str     URL of the page the link was found on (also its Referer)
anchor     str     the link's anchor text (at most 200 characters)
potential  bool    found on a page whose unnormalised PageRank >= the potential threshold
seq        int     the frontier's insertion number, set by the scheduler when it hands the
                   request out (a requeued or redirected request keeps its place)
lease      str     Redis store only: the queue member this worker leases (settled when the
                   page is counted or the request ends)
========== ======= =====================================================================

Beside it, Scrapy's own ``meta["depth"]`` and :data:`TRAP_META` (the spider-trap guard's count
of consecutive same-shape URLs) travel with a queued request; :data:`LOCAL_META` marks a request
that never enters a shared queue. The memory packing and the Redis
JSON form (:mod:`topiccrawl.crawl.codec`) store exactly these keys.
"""

from __future__ import annotations

#: the key of ``Request.meta`` holding the dict above
META_KEY = "topiccrawl"

#: the spider-trap guard's chain length (``crawl.middlewares.TrapGuardMiddleware``)
TRAP_META = "topiccrawl_trap_chain"

#: ``meta[LOCAL_META] = True``: a request only the process that made it may fetch (a topic's
#: example pages and their background pages): the Redis scheduler keeps it out of the shared queue
LOCAL_META = "topiccrawl_local"

#: ``meta[EXAMPLE_META] = i``: a request of a topic's example phase (its i-th example, counter-example
#: or background page; ``spiders.focused``), always :data:`LOCAL_META` too. Such a request left
#: queued in JOBDIR by a stop before the examples' verdict is not restored: a resume asks for them again
EXAMPLE_META = "example_index"

#: keys of ``meta[META_KEY]`` the spiders set
LINK_KEYS = ("score", "depth", "potential", "parent", "anchor")
#: keys the schedulers add: the insertion number and, on Redis, the lease
SCHEDULER_KEYS = ("seq", "lease")


def link_meta(meta: dict) -> dict:
    """``meta[META_KEY]`` of a request, or an empty dict."""
    return meta.get(META_KEY) or {}
