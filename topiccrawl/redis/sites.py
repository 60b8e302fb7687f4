"""The site finder on Redis: search queries and candidate sites as leased *tasks*.

Verifying a site is a short sequential walk (a page, its score F, the next page chosen by
H(A_k); docs/sitefinder.md), so workers share whole sites, not pages: a worker claims a site,
verifies it alone with its own :class:`~topiccrawl.sitefinder.core.SiteVerifier` and writes the verdict
to Redis. Keys under ``topiccrawl:<crawl_id>:`` (docs/deploy.md, "Redis settings"):

``sites:tasks``     LIST of waiting tasks (JSON): ``{"kind": "search", ...}`` or ``{"kind": "site", ...}``
``sites:seen``      SET of offered task keys (``q|backend|query|page``, ``s|site``): each once per crawl
``sites:leases``    ZSET task → lease expiry (Redis ``TIME``); ``sites:owner`` HASH task → worker
``sites:entries``   HASH site → entry URL; ``sites:found_by`` HASH site → its queries, one per line
``sites:aliases``   HASH host → site, for a host a site's pages redirected to (``x.com`` → ``www.x.com``
                    is the site ``x.com``): such a host is not a candidate of its own
``sites:hits:<site>`` LIST of the search hits that named the site (at most :data:`MAX_HITS`), in the
                    order found: those written before the site is offered are its first entry pages;
                    the worker holding the site reads the later ones from where it stopped
                    (:meth:`RedisSiteTasks.hits_since`) and requests them as entry pages too
``sites:results``   HASH site → verdict (JSON, ``SiteVerifier.result``), written once (``HSETNX``)
``sites:counts``    HASH query → search results; ``sites:stats`` HASH of counters
``sites:swept``     SET of sites offered again by :meth:`RedisSiteTasks.sweep` (each at most once)

A task whose lease expires (its worker died) goes back to the head of the list and is done again
from the start: a site's verification restarts, and the pages its dead worker fetched are fetched
again (counted in ``sites:stats`` ``reclaimed``). The leases are those of the frontier's requests
(:mod:`topiccrawl.redis.leases`); the Lua is ``lua/sites.lua`` and ``lua/sites_*.lua``.
``Scrapy``-free; the scheduler is :class:`topiccrawl.redis.sitefinder.RedisSiteScheduler`.
"""

from __future__ import annotations

import json

from topiccrawl.redis.leases import Leases

#: the site finder's keys, in the order ``lua/sites.lua`` names them: every sites script gets all of them
KEYS = ("sites:tasks", "sites:seen", "sites:leases", "sites:owner", "sites:entries", "sites:found_by",
        "sites:aliases", "sites:results", "sites:counts", "sites:stats", "sites:seq", "sites:swept")


#: search hits kept per site (the entry pages its verification starts from)
MAX_HITS = 20


def site_keys(prefix: str) -> dict[str, str]:
    """``{"sites:tasks": "<prefix>sites:tasks", ...}`` for ``prefix`` = ``topiccrawl:<crawl_id>:``."""
    return {name: prefix + name for name in KEYS}


class RedisSiteTasks:
    """The shared task list of one site-finder crawl, as one worker sees it (atomic Lua scripts)."""

    def __init__(self, client, prefix: str, *, worker: str, lease_seconds: float) -> None:
        self.r, self.k, self.worker, self.lease_seconds = client, site_keys(prefix), worker, lease_seconds
        self.prefix = prefix
        self.leases = Leases(client, self.k["sites:leases"], self.k["sites:owner"])
        self._keys = [self.k[name] for name in KEYS]
        self._claim = self._script("sites_claim.lua")
        self._status = self._script("sites_status.lua")
        self._offer = self._script("sites_offer.lua")
        self._offer_site = self._script("sites_offer_site.lua")
        self._done = self._script("sites_done.lua")
        self._release = self._script("sites_release.lua")
        self._sweep = self._script("sites_sweep.lua")

    def _script(self, name: str):
        """The sites script ``name``: leases.lua, sites.lua (the keys), ``name``; KEYS = :data:`KEYS`."""
        return self.leases.script("sites.lua", name)

    # -- offering -----------------------------------------------------------------------------------
    def offer_search(self, backend: str, query: dict, pageno: int) -> bool:
        """Queue one search result page, once per crawl; False if any worker offered it before."""
        task = json.dumps({"kind": "search", "backend": backend, "query": query, "pageno": pageno},
                          ensure_ascii=False)[:-1]
        return bool(self._offer(keys=self._keys, args=[f"q|{backend}|{query['text']}|{pageno}", task]))

    def offer_site(self, site: str, entry: str, query: str = "") -> bool:
        """Queue the verification of ``site`` from its ``entry`` page once per crawl (True the first
        time) and note that ``query`` found it (every time). A host known as an alias of a site
        counts for that site."""
        return bool(self._offer_site(keys=self._keys, args=[site, entry, query.replace("\n", " ")]))

    def add_hit(self, site: str, url: str) -> None:
        """Note a search hit of ``site`` (call before :meth:`offer_site`, so that the worker that
        claims the site finds it); the first :data:`MAX_HITS` are kept."""
        key = f"{self.prefix}sites:hits:{site}"
        with self.r.pipeline(transaction=True) as pipe:
            pipe.rpush(key, url).ltrim(key, 0, MAX_HITS - 1).execute()

    def hits(self, site: str) -> list[str]:
        """The search hits of ``site`` in the order they were found (repeats possible)."""
        return list(self.r.lrange(f"{self.prefix}sites:hits:{site}", 0, -1))

    def hits_since(self, offsets: dict[str, int]) -> dict[str, list[str]]:
        """For each site, its hits after the first ``offsets[site]`` (one round trip for all;
        the list only grows at its end, so an offset stays valid)."""
        sites = list(offsets)
        if not sites:
            return {}
        with self.r.pipeline(transaction=False) as pipe:
            for site in sites:
                pipe.lrange(f"{self.prefix}sites:hits:{site}", offsets[site], -1)
            return {site: list(new) for site, new in zip(sites, pipe.execute(), strict=True)}

    def waiting(self) -> list[tuple[dict, list[str]]]:
        """The waiting tasks in list order, each with its site's hits ([] for a search task)."""
        tasks = [json.loads(m) for m in self.r.lrange(self.k["sites:tasks"], 0, -1)]
        sites = [t["site"] for t in tasks if t["kind"] == "site"]
        with self.r.pipeline(transaction=False) as pipe:
            for site in sites:
                pipe.lrange(f"{self.prefix}sites:hits:{site}", 0, -1)
            hits = iter(pipe.execute() if sites else ())
        return [(t, list(next(hits)) if t["kind"] == "site" else []) for t in tasks]

    # -- leasing --------------------------------------------------------------------------------------
    def claim(self) -> tuple[str | None, int]:
        """The next waiting task (leased to this worker) or None, and how many expired leases of
        other workers went back to the list on the way."""
        member, reclaimed = self._claim(keys=self._keys, args=[self.lease_seconds, self.worker])
        return member or None, int(reclaimed)

    def renew(self, members) -> int:
        """Extend this worker's leases by ``lease_seconds`` from now; the number still owned."""
        return self.leases.renew(members, worker=self.worker, seconds=self.lease_seconds)

    def done(self, member: str, site: str = "", result: dict | None = None) -> bool:
        """End a task; for a site, store its verdict. False when the verdict was stored before (by a
        worker whose lease had expired) or a search task was no longer this worker's."""
        payload = json.dumps(result, ensure_ascii=False) if result is not None else ""
        return bool(self._done(keys=self._keys, args=[member, self.worker, site, payload]))

    def release(self, members) -> int:
        """Give this worker's unfinished tasks back to the head of the list (a clean stop), in
        the order they were claimed (each goes to the head, so the last is pushed first)."""
        members = list(members)
        if not members:
            return 0
        return int(self._release(keys=self._keys, args=[self.worker, *reversed(members)]))

    def sweep(self) -> list[str]:
        """When no task waits and none is leased: offer again every candidate site that has no
        verdict (its task ended without one), each at most once per crawl; the sites offered."""
        return list(self._sweep(keys=self._keys))

    def status(self) -> dict:
        waiting, leased, reclaimed = self._status(keys=self._keys)
        return {"waiting": int(waiting), "leased": int(leased), "reclaimed": int(reclaimed),
                "results": int(self.r.hlen(self.k["sites:results"]))}

    # -- aliases ----------------------------------------------------------------------------------------
    def add_alias(self, host: str, site: str) -> None:
        """``host`` is where pages of ``site`` redirected to (first mapping wins)."""
        self.r.hsetnx(self.k["sites:aliases"], host, site)

    def alias_of(self, host: str) -> str | None:
        return self.r.hget(self.k["sites:aliases"], host)

    def merge(self, member: str, host: str, site: str) -> None:
        """End the task of candidate ``host``, an alias of ``site``: its queries count for ``site``
        and it is no candidate of its own (as one process files such a search hit)."""
        k = self.k
        for query in self.found_by(host):
            self.offer_site(site, "", query)
        self.r.hdel(k["sites:entries"], host)
        self.r.hdel(k["sites:found_by"], host)
        self.r.hincrby(k["sites:stats"], "aliases_merged", 1)
        self.done(member)

    # -- what all workers found ------------------------------------------------------------------------
    def found_by(self, site: str) -> list[str]:
        raw = self.r.hget(self.k["sites:found_by"], site) or ""
        return [q for q in raw.split("\n") if q]

    def count_search(self, query: str, n: int) -> None:
        self.r.hincrby(self.k["sites:counts"], query, n)

    def search_counts(self) -> dict[str, int]:
        return {q: int(n) for q, n in self.r.hgetall(self.k["sites:counts"]).items()}

    def candidates(self) -> dict[str, dict]:
        """Every offered site: ``{site: {"entry": url, "found_by": [queries]}}``."""
        entries = self.r.hgetall(self.k["sites:entries"])
        found = self.r.hgetall(self.k["sites:found_by"])
        return {s: {"entry": e, "found_by": [q for q in (found.get(s) or "").split("\n") if q]}
                for s, e in entries.items()}

    def results(self) -> dict[str, dict]:
        return {s: json.loads(v) for s, v in self.r.hgetall(self.k["sites:results"]).items()}

    def counters(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.r.hgetall(self.k["sites:stats"]).items()}
