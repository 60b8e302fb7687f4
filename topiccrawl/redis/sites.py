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
``sites:results``   HASH site → verdict (JSON, ``SiteVerifier.result``), written once (``HSETNX``)
``sites:counts``    HASH query → search results; ``sites:stats`` HASH of counters

A task whose lease expires (its worker died) goes back to the head of the list and is done again
from the start: a site's verification restarts, and the pages its dead worker fetched are fetched
again (counted in ``sites:stats`` ``reclaimed``). ``Scrapy``-free; the scheduler is
:class:`topiccrawl.redis.sitefinder.RedisSiteScheduler`.
"""

from __future__ import annotations

import json

from topiccrawl.redis.frontier import _RENEW  # the request leases' renewal: KEYS leases, owners

#: moves expired leases back to the head of the task list; defines ``now`` and ``expired``
_RECLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
for _, m in ipairs(expired) do
  redis.call('ZREM', KEYS[2], m)
  redis.call('HDEL', KEYS[3], m)
  redis.call('LPUSH', KEYS[1], m)
end
if #expired > 0 then redis.call('HINCRBY', KEYS[4], 'reclaimed', #expired) end
"""

# KEYS: tasks, leases, owner, stats; ARGV: lease seconds, worker -> {task or false, reclaimed}
_CLAIM = _RECLAIM + """
local m = redis.call('LPOP', KEYS[1])
if m then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), m)
  redis.call('HSET', KEYS[3], m, ARGV[2])
end
return {m or false, #expired}
"""

# KEYS: tasks, leases, owner, stats -> {waiting, leased, reclaimed}
_STATUS = _RECLAIM + """
return {redis.call('LLEN', KEYS[1]), redis.call('ZCARD', KEYS[2]), #expired}
"""

# KEYS: seen, tasks, stats, seq; ARGV: key, task JSON without its closing brace -> 1 when new
# (the task gets its id here: one round trip per offer)
_OFFER = """
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
local id = redis.call('INCR', KEYS[4])
redis.call('RPUSH', KEYS[2], ARGV[2] .. ', "id": ' .. id .. '}')
redis.call('HINCRBY', KEYS[3], 'offered', 1)
return 1
"""

# KEYS: seen, tasks, stats, seq, entries, found_by, aliases; ARGV: site, entry, query -> 1 when new.
# A host known as an alias of a site counts for that site.
_OFFER_SITE = """
local site, entry = ARGV[1], ARGV[2]
local target = redis.call('HGET', KEYS[7], site)
if target and target ~= site then
  site, entry = target, redis.call('HGET', KEYS[5], target) or entry
end
local new = redis.call('SADD', KEYS[1], 's|' .. site)
if new == 1 then
  redis.call('HSET', KEYS[5], site, entry)
  local id = redis.call('INCR', KEYS[4])
  redis.call('RPUSH', KEYS[2], cjson.encode({kind = 'site', site = site, entry = entry, id = id}))
  redis.call('HINCRBY', KEYS[3], 'sites', 1)
end
if ARGV[3] ~= '' then
  local q = redis.call('HGET', KEYS[6], site) or ''
  if not string.find('\\n' .. q .. '\\n', '\\n' .. ARGV[3] .. '\\n', 1, true) then
    if q == '' then q = ARGV[3] else q = q .. '\\n' .. ARGV[3] end
    redis.call('HSET', KEYS[6], site, q)
  end
end
return new
"""

# KEYS: leases, owner, results, stats, tasks; ARGV: task, worker, site ('' for a search), result JSON
# -> 1 done by this worker, 0 the task was no longer this worker's / the site had a verdict already.
# A task whose lease expired while its worker still finished it is back in the list: removed.
_DONE = """
local mine = redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2]
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('LREM', KEYS[5], 0, ARGV[1])
if ARGV[3] ~= '' then
  if redis.call('HSETNX', KEYS[3], ARGV[3], ARGV[4]) == 0 then
    redis.call('HINCRBY', KEYS[4], 'duplicate_verdicts', 1)
    return 0
  end
  return 1
end
if mine then return 1 end
return 0
"""

# KEYS: tasks, leases, owner, stats; ARGV: worker, tasks... -> how many went back to the queue
_RELEASE = """
local n = 0
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[3], ARGV[i]) == ARGV[1] then
    redis.call('ZREM', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    redis.call('LPUSH', KEYS[1], ARGV[i])
    n = n + 1
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[4], 'released', n) end
return n
"""

KEYS = ("sites:tasks", "sites:seen", "sites:leases", "sites:owner", "sites:entries", "sites:found_by",
        "sites:aliases", "sites:results", "sites:counts", "sites:stats", "sites:seq")


def site_keys(prefix: str) -> dict[str, str]:
    """``{"sites:tasks": "<prefix>sites:tasks", ...}`` for ``prefix`` = ``topiccrawl:<crawl_id>:``."""
    return {name: prefix + name for name in KEYS}


class RedisSiteTasks:
    """The shared task list of one site-finder crawl, as one worker sees it (atomic Lua scripts)."""

    def __init__(self, client, prefix: str, *, worker: str, lease_seconds: float) -> None:
        self.r, self.k, self.worker, self.lease_seconds = client, site_keys(prefix), worker, lease_seconds
        self._claim = client.register_script(_CLAIM)
        self._status = client.register_script(_STATUS)
        self._renew = client.register_script(_RENEW)
        self._offer = client.register_script(_OFFER)
        self._offer_site = client.register_script(_OFFER_SITE)
        self._done = client.register_script(_DONE)
        self._release = client.register_script(_RELEASE)
        k = self.k
        self._queue = [k["sites:tasks"], k["sites:leases"], k["sites:owner"], k["sites:stats"]]

    # -- offering -----------------------------------------------------------------------------------
    def offer_search(self, backend: str, query: dict, pageno: int) -> bool:
        """Queue one search result page, once per crawl; False if any worker offered it before."""
        k = self.k
        task = json.dumps({"kind": "search", "backend": backend, "query": query, "pageno": pageno},
                          ensure_ascii=False)[:-1]
        return bool(self._offer(keys=[k["sites:seen"], k["sites:tasks"], k["sites:stats"], k["sites:seq"]],
                                args=[f"q|{backend}|{query['text']}|{pageno}", task]))

    def offer_site(self, site: str, entry: str, query: str = "") -> bool:
        """Queue the verification of ``site`` from its ``entry`` page once per crawl (True the first
        time) and note that ``query`` found it (every time). A host known as an alias of a site
        counts for that site."""
        k = self.k
        return bool(self._offer_site(
            keys=[k["sites:seen"], k["sites:tasks"], k["sites:stats"], k["sites:seq"], k["sites:entries"],
                  k["sites:found_by"], k["sites:aliases"]],
            args=[site, entry, query.replace("\n", " ")]))

    # -- leasing --------------------------------------------------------------------------------------
    def claim(self) -> tuple[str | None, int]:
        """The next waiting task (leased to this worker) or None, and how many expired leases of
        other workers went back to the list on the way."""
        member, reclaimed = self._claim(keys=self._queue, args=[self.lease_seconds, self.worker])
        return member or None, int(reclaimed)

    def renew(self, members) -> int:
        members = list(members)
        if not members:
            return 0
        return int(self._renew(keys=[self.k["sites:leases"], self.k["sites:owner"]],
                               args=[self.lease_seconds, self.worker, *members]))

    def done(self, member: str, site: str = "", result: dict | None = None) -> bool:
        """End a task; for a site, store its verdict. False when the verdict was stored before (by a
        worker whose lease had expired) or a search task was no longer this worker's."""
        payload = json.dumps(result, ensure_ascii=False) if result is not None else ""
        k = self.k
        return bool(self._done(keys=[k["sites:leases"], k["sites:owner"], k["sites:results"], k["sites:stats"],
                                     k["sites:tasks"]],
                               args=[member, self.worker, site, payload]))

    def release(self, members) -> int:
        """Give this worker's unfinished tasks back to the head of the list (a clean stop)."""
        members = list(members)
        if not members:
            return 0
        return int(self._release(keys=self._queue, args=[self.worker, *members]))

    def status(self) -> dict:
        waiting, leased, reclaimed = self._status(keys=self._queue)
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
