"""The shared frontier in Redis: the memory strategies' order, leases and the global DP budget.

Scrapy-free. Keys (``topiccrawl:<crawl_id>:`` + name, see :mod:`topiccrawl.redis.connection`):

``requests``       ZSET of queued members, all with score 0, so Redis orders them by member
``requests:data``  HASH member -> JSON ``[url, score, depth, domain, potential, payload]`` (queued or leased)
``requests:seq``   insertion counter (the ``seq`` of :class:`~topiccrawl.strategies.simple.Link`)
``leases``         ZSET member -> lease expiry (Redis server time, seconds)
``leases:owner``   HASH member -> worker id
``done``           HASH member -> ``outcome|worker`` (counted, failed:…, nopage)
``stats``          HASH of global counters: dp, lp, truth, lease_expired, released, failed

Every script gets the same KEYS: requests, requests:data, leases, leases:owner, stats, done,
requests:seq, then the strategy's own keys (:meth:`RedisFrontier.extra_keys`); the push script
also gets the crawl's ``dupefilter`` SET, last. :attr:`LIB` is Lua prepended to each script with the
hooks ``on_push(m, j)`` (a new member; its strategy arguments are ARGV[j] onwards), ``drop()`` (a
new link the strategy does not queue), ``requeue(m)`` (put a member in the queue) and ``forget(m)``
(a member is done for good), so a subclass (the WL frontier, :mod:`topiccrawl.redis.wanglandau`) keeps its
own queue structures in step with the lease scripts.

:meth:`RedisFrontier.push_many` queues any number of links in ONE script call (one round trip);
given their request fingerprints it also does the duplicate filter's SADD of each, so the
RedisScheduler sends a page's ~40 new links as one batch instead of 2 × 40 round trips.

The member *is* the sort key, so one ZPOPMIN gives exactly the memory strategy's next link:
``bfs`` = ``seq`` (12 digits); ``bestfirst`` = ``hex(-R(l))`` + ``seq``; ``oracle`` = ``0|1`` (truly
relevant target first) + ``hex(-R(l))`` + ``seq``. ``hex`` is the IEEE-754 bit pattern made
order-preserving, so ties and tiny score differences order exactly as the heap's float tuples —
a score of ``-R(l)`` (the scrapy-redis way) could not carry the oracle tier without rounding.

A pop moves the member to ``leases`` in the same Lua script; the member leaves ``leases`` when
the page is counted (``count``) or finished uncounted (``finish``), or goes back to ``requests``
(``release``, or any script finding the lease expired). Data is deleted only then, so every
accepted link is always in exactly one of: ``requests``, ``leases``, ``done``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Sequence

from topiccrawl.strategies.simple import Link

#: the queue hooks of bfs / bestfirst / oracle: the ``requests`` ZSET is the whole queue
LIB = """
local function on_push(m, j) end
local function drop() end
local function requeue(m) redis.call('ZADD', KEYS[1], 0, m) end
local function forget(m) redis.call('ZREM', KEYS[1], m) end
"""

#: moves expired leases back to the queue; defines ``now`` and ``expired`` for the rest of a script
_RECLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
for _, m in ipairs(expired) do
  redis.call('ZREM', KEYS[3], m)
  redis.call('HDEL', KEYS[4], m)
  if redis.call('HEXISTS', KEYS[2], m) == 1 then requeue(m) end
end
if #expired > 0 then redis.call('HINCRBY', KEYS[5], 'lease_expired', #expired) end
local dp = tonumber(redis.call('HGET', KEYS[5], 'dp') or '0')
"""

#: after _RECLAIM: no pop while budget <= counted + leased (ARGV[2] = budget, 0 = none)
BUDGET = """
local budget = tonumber(ARGV[2])
if budget > 0 and dp + redis.call('ZCARD', KEYS[3]) >= budget then
  return {-1, dp, #expired, redis.call('ZCARD', KEYS[1])}
end
"""

#: leases member ``m`` to ARGV[3] for ARGV[1] seconds and answers the pop
LEASE = """
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[1]), m)
redis.call('HSET', KEYS[4], m, ARGV[3])
"""

# ARGV: lease seconds, budget, worker -> {1, dp, reclaimed, queued, member, json} or {0|-1, dp, reclaimed, queued}
_POP = _RECLAIM + BUDGET + """
local popped = redis.call('ZPOPMIN', KEYS[1])
if #popped == 0 then return {0, dp, #expired, 0} end
local m = popped[1]
""" + LEASE + """
return {1, dp, #expired, redis.call('ZCARD', KEYS[1]), m, redis.call('HGET', KEYS[2], m)}
"""

# ARGV: -> {queued, leased, dp, reclaimed}
_STATUS = _RECLAIM + """
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[3]), dp, #expired}
"""

# KEYS: the frontier's, then the dupefilter SET (last). ARGV: stride, then per link: fingerprint
# ('' = no duplicate check), member prefix, seq (-1: next), json ('' = not queued: drop()), strategy
# arguments... -> {queued, per link: member | '' (not queued) | nil (fingerprint already in the SET)}
_PUSH = """
local stride, out = tonumber(ARGV[1]), {0}
for i = 2, #ARGV, stride do
  if ARGV[i] ~= '' and redis.call('SADD', KEYS[#KEYS], ARGV[i]) == 0 then
    out[#out + 1] = false
  elseif ARGV[i + 3] == '' then
    drop()
    out[#out + 1] = ''
  else
    local seq = tonumber(ARGV[i + 2])
    if seq < 0 then seq = redis.call('INCR', KEYS[7]) - 1 end
    local m = ARGV[i + 1] .. string.format('%012d', seq)
    redis.call('HSET', KEYS[2], m, ARGV[i + 3])
    on_push(m, i + 4)
    requeue(m)
    out[#out + 1] = m
  end
end
out[1] = redis.call('ZCARD', KEYS[1])
return out
"""

# ARGV: member, outcome, worker, count (0/1), lp (0/1), truth (0/1), budget
# -> new global dp (counted or finished), -1 over budget (nothing changed), -2 already done
_FINISH = """
local m = ARGV[1]
if redis.call('HEXISTS', KEYS[2], m) == 0 then return -2 end
local dp = tonumber(redis.call('HGET', KEYS[5], 'dp') or '0')
if ARGV[4] == '1' then
  local budget = tonumber(ARGV[7])
  if budget > 0 and dp >= budget then return -1 end
  dp = redis.call('HINCRBY', KEYS[5], 'dp', 1)
  if ARGV[5] == '1' then redis.call('HINCRBY', KEYS[5], 'lp', 1) end
  if ARGV[6] == '1' then redis.call('HINCRBY', KEYS[5], 'truth', 1) end
else
  redis.call('HINCRBY', KEYS[5], 'uncounted', 1)
end
redis.call('HDEL', KEYS[2], m)
redis.call('ZREM', KEYS[3], m)
redis.call('HDEL', KEYS[4], m)
forget(m)
redis.call('HSET', KEYS[6], m, ARGV[2] .. '|' .. ARGV[3])
return dp
"""

# ARGV: worker, members... -> released
_RELEASE = """
local n = 0
for i = 2, #ARGV do
  local m = ARGV[i]
  if redis.call('HGET', KEYS[4], m) == ARGV[1] then
    redis.call('ZREM', KEYS[3], m)
    redis.call('HDEL', KEYS[4], m)
    if redis.call('HEXISTS', KEYS[2], m) == 1 then requeue(m); n = n + 1 end
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[5], 'released', n) end
return n
"""

# KEYS: leases, owners   ARGV: lease seconds, worker, members... -> renewed
_RENEW = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) + tonumber(t[2]) / 1e6 + tonumber(ARGV[1])
local n = 0
for i = 3, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[2] then
    redis.call('ZADD', KEYS[1], 'XX', until_, ARGV[i]); n = n + 1
  end
end
return n
"""


def sortable_hex(x: float) -> str:
    """16 hex digits whose string order is the numeric order of the float ``x`` (-0.0 == 0.0)."""
    bits = struct.unpack(">Q", struct.pack(">d", x + 0.0))[0]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63
    return f"{bits:016x}"


class RedisFrontier:
    """bfs / bestfirst / oracle over Redis with leases (see the module docstring).

    ``pop`` leases the link to ``worker`` for ``lease_seconds`` and returns None when the queue is
    empty or when ``budget`` (global DP, 0 = none) minus counted minus leased pages is used up;
    :attr:`last` holds the script's answer (``blocked``, ``dp``, ``queued``, ``reclaimed``).
    """

    STRATEGIES = ("bfs", "bestfirst", "oracle")
    LIB = LIB

    def __init__(self, client, keys: dict[str, str], strategy: str = "bestfirst",
                 is_relevant: Callable[[str], bool] | None = None, lease_seconds: float = 30.0,
                 budget: int = 0, worker: str = "worker") -> None:
        if strategy not in self.STRATEGIES:
            raise ValueError(f"the Redis frontier has no strategy {strategy!r}")
        if strategy == "oracle" and is_relevant is None:
            raise ValueError("strategy 'oracle' needs is_relevant (ground truth)")
        self.name = strategy
        self.r, self.keys = client, keys
        self.is_relevant = is_relevant
        self.lease_seconds, self.budget, self.worker = float(lease_seconds), int(budget), worker
        self.last: dict = {"blocked": False, "dp": 0, "queued": 0, "reclaimed": 0}
        k = keys
        self._keys = [k["requests"], k["requests:data"], k["leases"], k["leases:owner"], k["stats"], k["done"],
                      k["requests:seq"], *self.extra_keys()]
        self._push_keys = [*self._keys, k["dupefilter"]]
        self._pop = client.register_script(self.LIB + _POP)
        self._status = client.register_script(self.LIB + _STATUS)
        self._push = client.register_script(self.LIB + _PUSH)
        self._finish = client.register_script(self.LIB + _FINISH)
        self._release = client.register_script(self.LIB + _RELEASE)
        self._renew = client.register_script(_RENEW)

    def extra_keys(self) -> list[str]:
        """The strategy's own keys, KEYS[8] onwards of every script (none here)."""
        return []

    # -- order ----------------------------------------------------------------------------------
    def prefix(self, link: Link) -> str:
        """The member without its seq: the strategy key of ``link``."""
        if self.name == "bfs":
            return ""
        key = sortable_hex(-link.score)
        if self.name == "oracle":
            return ("0" if self.is_relevant(link.url) else "1") + key
        return key

    def member(self, link: Link) -> str:
        return f"{self.prefix(link)}{link.seq:012d}"

    # -- Frontier protocol ------------------------------------------------------------------------
    def push(self, link: Link) -> str | None:
        """Queue ``link`` (its payload must be JSON-serialisable); a link with ``seq >= 0`` keeps
        it (a re-queued request), others get the next insertion number. Returns the member (None:
        the strategy did not queue it)."""
        return self.push_many([(link, self.entry(link))])[0] or None

    def entry(self, link: Link, fingerprint: str = "") -> list:
        """The push script's arguments for ``link``: its request ``fingerprint`` ('' = none), the
        member prefix, seq, the JSON of ``requests:data`` and :meth:`push_args`. Serialised now, so
        a payload changed later is stored as it was; TypeError/ValueError for a non-JSON payload."""
        data = json.dumps([link.url, link.score, link.depth, link.domain, link.potential, link.payload],
                          ensure_ascii=False, separators=(",", ":"))
        return [fingerprint, self.prefix(link), link.seq, data, *self.push_args(link)]

    def push_many(self, items: Sequence[tuple[Link, list]]) -> list[str | None]:
        """Queue ``(link, entry(link, fingerprint))`` pairs in order, in one atomic script call:
        a link whose fingerprint the crawl's ``dupefilter`` SET already holds (another worker's, or
        an earlier one of the same batch) is not queued (None), the others get their member ('' =
        new, but the strategy drops it) and their seq; :attr:`last` ``queued`` is updated."""
        if not items:
            return []
        args = [len(items[0][1])]
        for _, entry in items:
            args += entry
        res = self._push(keys=self._push_keys, args=args)
        self.last["queued"] = int(res[0])
        for (link, _), member in zip(items, res[1:]):
            if member:
                link.seq = int(member[-12:])
        return res[1:]

    def push_args(self, link: Link) -> list:
        """What the strategy's ``on_push`` hook needs beyond the member (ARGV[j] onwards)."""
        return []

    def pop(self) -> Link | None:
        res = self._pop(keys=self._keys, args=[self.lease_seconds, self.budget, self.worker])
        self.last = {"blocked": res[0] == -1, "dp": int(res[1]), "reclaimed": int(res[2]), "queued": int(res[3])}
        if res[0] != 1:
            return None
        return self._link(res[4], res[5])

    @staticmethod
    def _link(member: str, data: str) -> Link:
        d = json.loads(data)
        if isinstance(d, dict):  # queued before the compact array (an older topiccrawl's crawl)
            d = [d[k] for k in ("url", "score", "depth", "domain", "potential", "payload")]
        url, score, depth, domain, potential, payload = d
        return Link(url, score, depth, domain, potential, payload, int(member[-12:]))

    def __len__(self) -> int:
        return self.r.zcard(self.keys["requests"])

    def state(self) -> dict:
        """The queued links (not the leased ones) in order, as the memory strategies' ``state``."""
        members = self.r.zrange(self.keys["requests"], 0, -1)
        data = self.r.hmget(self.keys["requests:data"], members) if members else []
        return {"links": [self._link(m, d) for m, d in zip(members, data)],
                "next_seq": int(self.r.get(self.keys["requests:seq"]) or 0)}

    def load_state(self, state: dict) -> None:
        """Queue the links of a ``state`` (e.g. of a memory strategy), keeping their seq."""
        self.r.setnx(self.keys["requests:seq"], 0)
        seq = int(self.r.get(self.keys["requests:seq"]))
        if state["next_seq"] > seq:
            self.r.incrby(self.keys["requests:seq"], state["next_seq"] - seq)
        for link in sorted(state["links"], key=lambda l: l.seq):
            self.push(link)

    # -- leases -----------------------------------------------------------------------------------
    def count(self, member: str, lp: bool = False, truth: bool = False) -> int:
        """Count the page of a leased member in the global DP and release its lease: the new
        global DP, -1 when the budget is already spent (the lease stays), -2 when the member was
        already finished (a re-delivered copy: not counted twice)."""
        return self._done(member, "counted", True, lp, truth)

    def finish(self, member: str, outcome: str) -> int:
        """The member ended without a counted page (``failed:…``, ``nopage``): drop it for good."""
        return self._done(member, outcome, False, False, False)

    def _done(self, member, outcome, count, lp, truth) -> int:
        dp = int(self._finish(keys=self._keys,
                              args=[member, outcome, self.worker, int(count), int(lp), int(truth), self.budget]))
        if dp >= 0:
            self.last["dp"] = dp
        return dp

    def release(self, members: Iterable[str]) -> int:
        """Give this worker's leases back to the queue with their original priority."""
        members = list(members)
        return int(self._release(keys=self._keys, args=[self.worker, *members])) if members else 0

    def renew(self, members: Iterable[str]) -> int:
        """Extend this worker's leases by ``lease_seconds`` from now; the number still owned."""
        members = list(members)
        if not members:
            return 0
        return int(self._renew(keys=[self.keys["leases"], self.keys["leases:owner"]],
                               args=[self.lease_seconds, self.worker, *members]))

    def status(self) -> dict:
        """``queued``, ``leased``, ``dp`` (global) after returning expired leases to the queue."""
        queued, leased, dp, reclaimed = self._status(keys=self._keys)
        self.last.update(dp=int(dp), queued=int(queued))
        return {"queued": int(queued), "leased": int(leased), "dp": int(dp), "reclaimed": int(reclaimed)}

    def counters(self) -> dict[str, int]:
        """The global counters (``stats`` hash)."""
        return {k: int(v) for k, v in self.r.hgetall(self.keys["stats"]).items()}
