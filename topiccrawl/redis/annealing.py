"""The annealing baselines ``sa`` and ``fcsa-host`` in Redis: one shared chain for N workers.

The memory strategies :mod:`topiccrawl.strategies.annealing` (docs/wl.md, "Baselines") with their state under
the crawl's key prefix (``topiccrawl:<crawl_id>:``). The queue is the frontier's ``requests`` ZSET
with bestfirst members (``hex(−R(l))`` + seq, R clipped to [0, 1] as in memory), inherited with
the push and the lease scripts from :class:`~topiccrawl.redis.frontier.RedisFrontier`. One
decision is ONE Lua script (``lua/anneal_decide.lua``): expired leases back to the queue and the
global budget check (the frontier's ``reclaim`` and ``over_budget``), then the SA step of
``SAFrontier.pop`` — r = ⌊u₁·min(k, n)⌋, the best and the (r+1)-th best link, the candidate
accepted when ln(1 − u₂) ≤ −Δ/T (Metropolis, Δ = p(best) − p(candidate); taken on a tie),
T ← max(α·T, T_min) — and the lease of the chosen member (:mod:`topiccrawl.redis.leases`).
Redis's ``math.random`` is not random, so u₁, u₂ come from the worker's Python RNG; the script
answers how many it used (u₂ only when Δ > 0), so with one worker and the same uniforms the
decisions equal the memory strategy's.
For ``sa`` the priority is p(l) = R(l), the link relevance of WL paper eq. 5, read back exactly
from the member's first 16 hex digits.

Keys besides the frontier's (``sa:`` + name):

``state``    HASH t (temperature, ``%.17g``), decisions, worse (lower candidates accepted), the
             parameters alpha, tmin, k, w, q0, a, and options (JSON; a worker with others is refused)

``fcsa-host`` adds the host memory and the memory strategy's two-level heap:

``quality``  HASH host -> ``good|seen`` (Σ v and pages reported, every worker's counted pages)
``link``     HASH member -> host (until the member is done)
``hlinks``   ZSET ``host member``, score 0: each host's queued links in order (a lex range)
``hosts``    ZSET ``seq host`` scored −p(best link of the host), p(l) = (1 − w)·R(l) + w·q(h),
             so ZRANGE 0 0 is the host of the best link, ties to the lower seq (the memory heap)
``hbest``    HASH host -> its member in ``hosts``

Feedback re-scores one host entry in O(log hosts), as in memory.
"""

from __future__ import annotations

import random
from collections import deque

from topiccrawl.redis.frontier import RedisFrontier, sortable_hex
from topiccrawl.redis.learned import RedisLearnedFrontier
from topiccrawl.redis.wanglandau import RedisWLFrontier
from topiccrawl.strategies.annealing import FCSAHostOptions, SAOptions, make_fcsa_host, make_sa
from topiccrawl.strategies.base import Link
from topiccrawl.strategies.wanglandau import clip01


class RedisSAFrontier(RedisFrontier):
    """``sa`` over Redis (module docstring); the arguments are those of
    :class:`~topiccrawl.strategies.annealing.SAFrontier` plus RedisFrontier's lease arguments.

    ``rng`` gives this worker's uniforms (default ``random.Random(f"{seed}|{worker}")``: workers
    draw independent streams). :attr:`last` also holds ``used`` (uniforms consumed) and ``worse``
    (the lower candidate was accepted) of the last decision; ``host`` is fcsa-host's parameters.
    """

    STRATEGIES = ("sa",)
    #: the queue hooks and ``take()`` (files of ``topiccrawl/redis/lua/``)
    LIB = ("frontier_queue.lua", "anneal.lua", "sa.lua")
    #: the chain's keys (``sa:`` + name) after the frontier's, in the order the Lua names them
    NAMES = ("state",)

    def __init__(self, client, keys: dict[str, str], *, t0: float = 0.1, alpha: float = 0.999, tmin: float = 1e-3,
                 top_k: int = 16, seed: int = 0, rng: random.Random | None = None, lease_seconds: float = 30.0,
                 budget: int = 0, worker: str = "worker", host: dict | None = None) -> None:
        self._base = keys["requests"][: -len("requests")] + "sa:"
        self.sa_keys = {name: self._base + name for name in self.NAMES}
        super().__init__(client, keys, self.STRATEGIES[0], None, lease_seconds, budget, worker)
        self.t0, self.alpha, self.tmin, self.top_k = t0, alpha, tmin, top_k
        host = host or {}
        self.options = {"t0": t0, "alpha": alpha, "tmin": tmin, "top_k": top_k, **host}
        self.rng = rng if rng is not None else random.Random(f"{seed}|{worker}")
        self._uniforms: deque[float] = deque()
        self._decide = self._script("anneal_decide.lua")
        self.claim({"alpha": alpha, "tmin": tmin, "k": top_k, "w": host.get("host_weight", 0.0),
                    "q0": host.get("host_prior", 0.5), "a": host.get("host_strength", 2.0)})

    @classmethod
    def from_options(cls, client, keys: dict[str, str], options: dict, **lease) -> RedisSAFrontier:
        """From the ``TOPICCRAWL_SA_*`` options, checked by the memory factory (one-line errors)."""
        options = SAOptions.coerce(options)
        m = make_sa(options)
        return cls(client, keys, t0=m.t0, alpha=m.alpha, tmin=m.tmin, top_k=m.top_k,
                   seed=options.sa_seed, **lease)

    def extra_keys(self) -> list[str]:
        return list(self.sa_keys.values())

    def claim(self, params: dict) -> None:
        """Join the crawl's chain: the first worker sets T = t0 and the options; a worker with
        other options is refused (one chain cannot cool on two schedules)."""
        state = self.sa_keys["state"]
        self.claim_options(state, f"the {self.name} chain")
        self.r.hsetnx(state, "t", repr(float(self.t0)))
        self.r.hset(state, mapping={k: repr(float(v)) for k, v in params.items()})

    # -- order and the Frontier protocol ----------------------------------------------------------
    def prefix(self, link: Link) -> str:
        return sortable_hex(-clip01(link.score))

    def pop(self) -> Link | None:
        """One SA decision (atomic, leased); None when the queue is empty or the budget is used up."""
        while len(self._uniforms) < 2:
            self._uniforms.append(self.rng.random())
        res = self._decide(keys=self._keys, args=[self.lease_seconds, self.budget, self.worker, *self._uniforms])
        self.last = {"blocked": res[0] == -1, "dp": int(res[1]), "reclaimed": int(res[2]), "queued": int(res[3])}
        if res[0] != 1:
            return None
        for _ in range(int(res[6])):
            self._uniforms.popleft()
        self.last.update(used=int(res[6]), worse=bool(res[7]))
        return self._link(res[4], res[5])

    # -- reporting ---------------------------------------------------------------------------------
    @property
    def temperature(self) -> float:
        return float(self.r.hget(self.sa_keys["state"], "t"))

    def stats(self) -> dict:
        """The memory strategy's ``sa/*`` statistics, global over all workers."""
        t, decisions, worse = self.r.hmget(self.sa_keys["state"], "t", "decisions", "worse")
        return {"sa/temperature": float(t), "sa/decisions": int(decisions or 0), "sa/accepted_worse": int(worse or 0)}


class RedisFCSAHostFrontier(RedisSAFrontier):
    """``fcsa-host`` over Redis: the SA chain with the shared host memory q(h) (module docstring).
    :meth:`feedback` is what the HarvestPipeline calls for every counted page of every worker."""

    STRATEGIES = ("fcsa-host",)
    LIB = ("anneal.lua", "fcsa.lua")
    NAMES = ("state", "quality", "link", "hlinks", "hosts", "hbest")

    def __init__(self, client, keys: dict[str, str], *, host_weight: float = 0.3, host_prior: float = 0.5,
                 host_strength: float = 2.0, **kw) -> None:
        super().__init__(client, keys, **kw, host={"host_weight": host_weight, "host_prior": host_prior,
                                                   "host_strength": host_strength})
        self.host_weight, self.host_prior, self.host_strength = host_weight, host_prior, host_strength
        self._feedback = self._script("fcsa_feedback.lua")

    @classmethod
    def from_options(cls, client, keys: dict[str, str], options: dict, **lease) -> RedisFCSAHostFrontier:
        options = FCSAHostOptions.coerce(options)
        m = make_fcsa_host(options)
        return cls(client, keys, t0=m.t0, alpha=m.alpha, tmin=m.tmin, top_k=m.top_k, host_weight=m.host_weight,
                   host_prior=m.host_prior, host_strength=m.host_strength,
                   seed=options.sa_seed, **lease)

    def push_args(self, link: Link) -> list:
        return [link.domain or ""]

    def feedback(self, url: str, domain: str, relevance: float, beta: float | None = None) -> None:
        """A counted page of ``domain`` had ``relevance``; v = 1 if relevance ≥ β else 0 (or the
        clipped relevance without β), added to the host's shared memory and its links re-ranked."""
        v = (1.0 if relevance >= beta else 0.0) if beta is not None else clip01(relevance)
        self._feedback(keys=self._keys, args=[domain, repr(float(v))])

    def host_quality(self, domain: str) -> float:
        """q(h) = (Σ v + a·q₀) / (n_h + a) from the shared host memory."""
        raw = self.r.hget(self.sa_keys["quality"], domain)
        good, seen = (float(raw.rsplit("|", 1)[0]), int(raw.rsplit("|", 1)[1])) if raw else (0.0, 0)
        return (good + self.host_strength * self.host_prior) / (seen + self.host_strength)

    def stats(self) -> dict:
        return {**super().stats(), "sa/hosts_with_feedback": self.r.hlen(self.sa_keys["quality"])}


def make_redis_frontier(client, keys: dict[str, str], strategy: str, options, is_relevant=None,
                        shared: dict | None = None, **lease) -> RedisFrontier:
    """The shared frontier of ``strategy`` (``options``: its options object, from
    ``crawl.settings.strategy_options``, or a settings mapping); ``lease``: lease_seconds, budget,
    worker; ``shared``: crawl settings that ``learned`` claims beside its options
    (:meth:`RedisLearnedFrontier.from_options`). Bad options raise the memory factories' one-line
    errors (FrontierError / ConfigError)."""
    if strategy == "learned":  # the only one that claims crawl settings beside its options
        return RedisLearnedFrontier.from_options(client, keys, options, shared=shared, **lease)
    kinds = {"wl": RedisWLFrontier, "sa": RedisSAFrontier, "fcsa-host": RedisFCSAHostFrontier}
    if strategy in kinds:
        return kinds[strategy].from_options(client, keys, options, **lease)
    return RedisFrontier(client, keys, strategy, is_relevant, **lease)
