"""The shared frontier in Redis: the memory strategies' order, leases and the global DP budget.

Scrapy-free. Keys (``topiccrawl:<crawl_id>:`` + name, see :mod:`topiccrawl.redis.connection`):

``requests``       ZSET of queued members, all with score 0, so Redis orders them by member
``requests:data``  HASH member -> JSON ``[url, score, depth, domain, potential, payload]`` (queued or leased)
``requests:seq``   insertion counter (the ``seq`` of :class:`~topiccrawl.strategies.simple.Link`)
``leases``         ZSET member -> lease expiry (Redis server time, seconds)
``leases:owner``   HASH member -> worker id
``done``           HASH member -> ``outcome|worker`` (counted, failed:…, nopage)
``stats``          HASH of global counters: dp, lp, truth, lease_expired, released, failed

The Lua is in ``topiccrawl/redis/lua/``. A script is the files ``leases.lua`` (the lease mechanism,
:mod:`topiccrawl.redis.leases`), ``frontier.lua`` (the keys, in the order of :data:`FRONTIER_KEYS`,
then the strategy's own keys, :meth:`RedisFrontier.extra_keys`; the push script also gets the
crawl's ``dupefilter`` SET, last), the strategy's hooks files :attr:`RedisFrontier.LIB`, then the
script's own file (``frontier_pop.lua``, ...). The hooks are ``on_push(m, j)`` (a new member; its
strategy arguments are ARGV[j] onwards), ``drop()`` (a new link the strategy does not queue),
``requeue(m)`` (put a member in the queue) and ``forget(m)`` (a member is done for good), so a
subclass (the WL frontier, :mod:`topiccrawl.redis.wanglandau`) keeps its own queue structures in
step with the lease scripts.

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

from topiccrawl.crawl.errors import ConfigError
from topiccrawl.redis.connection import load_script
from topiccrawl.redis.leases import Leases
from topiccrawl.strategies.base import FrontierBase, Link

#: the frontier's keys, in the order ``lua/frontier.lua`` names them (KEYS[1..7] of every script);
#: the strategy's own keys (:meth:`RedisFrontier.extra_keys`) follow, the push script's dupefilter last
FRONTIER_KEYS = ("requests", "requests:data", "leases", "leases:owner", "stats", "done", "requests:seq")


def sortable_hex(x: float) -> str:
    """16 hex digits whose string order is the numeric order of the float ``x`` (-0.0 == 0.0)."""
    bits = struct.unpack(">Q", struct.pack(">d", x + 0.0))[0]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63
    return f"{bits:016x}"


def from_sortable_hex(h: str) -> float:
    """The float of :func:`sortable_hex`."""
    bits = int(h, 16)
    bits = bits ^ 1 << 63 if bits >> 63 else bits ^ 0xFFFFFFFFFFFFFFFF
    return struct.unpack(">d", struct.pack(">Q", bits))[0]


class RedisFrontier(FrontierBase):
    """bfs / bestfirst / oracle over Redis with leases (see the module docstring).

    ``pop`` leases the link to ``worker`` for ``lease_seconds`` and returns None when the queue is
    empty or when ``budget`` (global DP, 0 = none) minus counted minus leased pages is used up;
    :attr:`last` holds the script's answer (``blocked``, ``dp``, ``queued``, ``reclaimed``).
    """

    STRATEGIES = ("bfs", "bestfirst", "oracle")
    #: the member prefix of a start request: sorts before every strategy key (hex digits, 0/1, seq)
    FIRST = "!"
    #: the strategy's queue hooks (files of ``topiccrawl/redis/lua/``, after ``frontier.lua``)
    LIB: tuple[str, ...] = ("frontier_queue.lua",)

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
        self.popped = ""
        self.leases = Leases(client, keys["leases"], keys["leases:owner"])
        self._keys = [*(keys[name] for name in FRONTIER_KEYS), *self.extra_keys()]
        self._push_keys = [*self._keys, keys["dupefilter"]]
        self._pop = self._script("frontier_pop.lua")
        self._status = self._script("frontier_status.lua")
        self._push = self._script("frontier_push.lua")
        self._finish = self._script("frontier_finish.lua")
        self._release = self._script("frontier_release.lua")
        self._peek = self._script("frontier_peek.lua")

    def _script(self, name: str):
        """The frontier script ``name``: leases.lua, frontier.lua, the hooks :attr:`LIB`, ``name``."""
        return self.leases.script("frontier.lua", *self.LIB, name)

    def extra_keys(self) -> list[str]:
        """The strategy's own keys, after :data:`FRONTIER_KEYS` in every script (none here)."""
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

    @property
    def ordered(self) -> bool:
        """The queue is popped in member order (bfs, bestfirst, oracle; not the samplers that
        subclass this class), so start requests can go first and the head can be peeked."""
        return type(self) is RedisFrontier

    def first_entry(self, link: Link, fingerprint: str = "") -> list:
        """:meth:`entry` of a start request, queued before every link (:attr:`ordered` frontiers)."""
        entry = self.entry(link, fingerprint)
        entry[1] = self.FIRST
        return entry

    def member_value(self, member: str) -> float | None:
        """The dispatch value of a member (:meth:`value`'s scale); None for a start request or bfs."""
        if member.startswith(self.FIRST) or self.name == "bfs" or not self.ordered:
            return None
        if self.name == "oracle":
            return 1.0 if member[0] == "0" else 0.0
        return max(-from_sortable_hex(member[:16]), 0.0)

    def value(self, link: Link) -> float | None:
        if self.name == "bfs" or not self.ordered:
            return None
        if self.name == "oracle":
            return 1.0 if self.is_relevant(link.url) else 0.0
        return max(link.score, 0.0)

    def peek_head(self) -> tuple[float | None, str] | None:
        """The queue head's dispatch value and URL, without leasing it (one round trip); None
        when the queue is empty."""
        res = self._peek(keys=self._keys)
        if not res:
            return None
        member, data = res
        return self.member_value(member), self._link(member, data).url

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
        self.popped = res[4]  # the member (a start request's differs from member(link))
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
        return self.leases.renew(members, worker=self.worker, seconds=self.lease_seconds)

    def status(self) -> dict:
        """``queued``, ``leased``, ``dp`` (global) after returning expired leases to the queue."""
        queued, leased, dp, reclaimed = self._status(keys=self._keys)
        self.last.update(dp=int(dp), queued=int(queued))
        return {"queued": int(queued), "leased": int(leased), "dp": int(dp), "reclaimed": int(reclaimed)}

    def counters(self) -> dict[str, int]:
        """The global counters (``stats`` hash)."""
        return {k: int(v) for k, v in self.r.hgetall(self.keys["stats"]).items()}

    def claim_options(self, state: str, what: str) -> None:
        """Join a crawl's shared strategy state: the first worker writes its ``options`` (JSON) into
        the HASH ``state``; a worker with other options is refused in one line (one shared sampler,
        chain or model cannot run two configurations)."""
        mine = json.dumps(self.options, sort_keys=True)
        self.r.hsetnx(state, "options", mine)
        theirs = self.r.hget(state, "options")
        if theirs != mine:
            raise ConfigError(f"{what} of this crawl runs with options other than this worker's: "
                              f"{option_differences(json.loads(theirs), self.options)} "
                              "(set TOPICCRAWL_CRAWL_ID to start another crawl)")
        self.r.hincrby(state, "claims", 1)  # the workers that claimed it: see withdraw()
        self.claimed = state

    #: the HASH whose options this worker claimed (:meth:`claim_options`), if its strategy has one
    claimed = ""

    def unclaim(self) -> None:
        """This worker was refused after its claim (another topic, another spider): it is not one
        of the workers that claimed the options (:meth:`withdraw` counts them)."""
        if self.claimed:
            self.r.hincrby(self.claimed, "claims", -1)
            self.claimed = ""

    def own_keys(self) -> list[str]:
        """Every key of the strategy's own (:meth:`extra_keys` and any a script does not take)."""
        return self.extra_keys()

    def withdraw(self) -> bool:
        """This worker stopped before its seeds (no topic words): when it was its crawl's only worker
        (``joins`` of ``meta``, ``claims`` of the claimed state), no page was counted and nothing is
        queued or leased (a crawl of an older release counts no joins), delete every key of the
        crawl, so that a worker started next begins it afresh, with options of its own (they were
        claimed). True when withdrawn."""
        script = load_script(self.r, "crawl_withdraw.lua")
        keys = [self.keys["meta"], self.keys["stats"], self.claimed, self.keys["requests"], self.keys["leases"],
                *dict.fromkeys([*self.keys.values(), *self.own_keys()])]
        return bool(script(keys=keys))

    def leave(self) -> None:
        """This worker stops (the scheduler's close, after its leases went back): a strategy's last
        shared step; none here (``learned`` sends its last labels and gives up the trainer lease)."""


def _flat(options, prefix: str = "") -> dict:
    out = {}
    for key, value in (options.items() if isinstance(options, dict) else ()):
        path = f"{prefix}{key}"
        out.update(_flat(value, f"{path}.") if isinstance(value, dict) else {path: value})
    return out


def option_differences(theirs: dict, mine: dict) -> str:
    """The options in which a crawl's stored ``theirs`` and this worker's ``mine`` differ, e.g.
    ``learned_epsilon 0.05 (this worker: 0.2)`` (nested options by dotted path; the names are
    the ``TOPICCRAWL_*`` settings' in lower case, mostly)."""
    a, b = _flat(theirs), _flat(json.loads(json.dumps(mine)))
    return "; ".join(f"{k} {json.dumps(a.get(k))} (this worker: {json.dumps(b.get(k))})"
                     for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)) or "the same values, stored otherwise"
