"""The Wang–Landau frontier (``wl``) in Redis: one shared sampler for N workers.

The memory strategy :class:`topiccrawl.strategies.wanglandau.WangLandauFrontier` (docs/wl.md) with its state and its
queue structures under the crawl's key prefix (``topiccrawl:<crawl_id>:``), so that every worker
takes part in one WL chain. One decision — the start, or region competition + roulette, the
acceptance min(g(E1)/g(E2), 1) in log space, the g/H updates, the forced move after
``max_rejections``, the stage test every T steps — and the lease of the chosen link are ONE Lua
script, atomic like :class:`~topiccrawl.redis.frontier.RedisFrontier`'s pop (same lease keys and
budget check, so the RedisScheduler's lease machinery is unchanged; the Lua is ``lua/wl.lua``, the
queue structures and hooks, and ``lua/wl_decide.lua``). Redis's ``math.random`` is seeded per
script call, not random, so the uniforms come from each worker's Python RNG: every decision passes
2 · max_rejections of them (roulette, acceptance per proposal) and the script answers how many it
used; the rest are passed again next time.

Keys besides the frontier's (``wl:`` + name):

``state``    HASH lnf, x1 (bin of X1), stage, steps (L), m, accepted, rejected, forced, dropped,
             frozen, inv_t, options (the crawl's WL options, JSON; a worker with others is refused)
``lng``      HASH bin -> ln g (``%.17g``, exact); its fields are S, the visited bins
``hist``     HASH bin -> H (deleted at a stage change)
``fetches``  HASH bin -> links fetched;  ``queued``: HASH bin -> links queued
``link``     HASH member -> ``domain|weight|bin`` (until the member is done)
``pos``      HASH member -> its slot in its domain;  ``slot``: HASH ``domain:slot`` -> member
``tree``     HASH ``domain:i`` -> Fenwick node i of the domain's roulette weights
``dsum``     HASH domain -> Σ weights;  ``dcount``: HASH domain -> queued links
``dmean``    ZSET domain (10 digits) -> (n − Σw)/n, so ZRANGE 0 0 is the best mean, ties to the
             domain seen first
``domains``  HASH registered domain -> index (order of first push)
``stages``   LIST ``L|S|ln f`` at every completed stage (the ln f that stage used)

The queue itself is the frontier's ``requests`` ZSET with bestfirst members (``hex(−R(l))`` +
seq), so ZRANGE 0 0 is the highest-R link for the start and forced moves, and the per-domain slot
lists + Fenwick trees mirror the memory strategy's exactly (same swap-remove, same integer
weights): with one worker and the same uniforms the pops are identical. The roulette and every
update cost O(log n_domain) hash operations, not a scan of the domain.
"""

from __future__ import annotations

import random
from collections import deque

from topiccrawl.crawl.settings import ConfigError
from topiccrawl.redis.frontier import RedisFrontier, sortable_hex
from topiccrawl.strategies.base import Link
from topiccrawl.strategies.wanglandau import BINS, QUANTUM, STAGE_RULES, VISITED, WLOptions, clip01, energy_bin, make_wl

#: the WL keys (``wl:`` + name) after the frontier's, in the order ``lua/wl.lua`` names them
WL_KEYS = ("state", "lng", "hist", "fetches", "queued", "link", "pos", "slot", "tree", "dsum", "dcount", "dmean",
           "domains", "stages")


class RedisWLFrontier(RedisFrontier):
    """The ``wl`` strategy over Redis (module docstring); the arguments are those of
    :class:`~topiccrawl.strategies.wanglandau.WangLandauFrontier` plus the lease arguments of RedisFrontier.

    ``rng`` gives this worker's uniforms (default ``random.Random(f"{seed}|{worker}")``: workers
    draw independent streams). :attr:`last` also holds ``kind`` (start, accepted, forced) and
    ``used`` (uniforms consumed) of the last decision. ``proposal="uniform"`` is refused with a
    one-line :class:`ConfigError`: the Redis store keeps no per-domain count tree for it.
    """

    STRATEGIES = ("wl",)
    LIB = ("wl.lua",)

    def __init__(self, client, keys: dict[str, str], *, stage_rule: str = "paper", visited: str = "ever",
                 proposal: str = "region-roulette", lnf0: float = 1.0, lnf_floor: float = 0.0,
                 lnf_min: float = 1e-8, max_steps: int = 10**6, stage_steps: int = 1000, max_rejections: int = 5,
                 link_threshold: float = 0.0, seed: int = 0, rng: random.Random | None = None,
                 lease_seconds: float = 30.0, budget: int = 0, worker: str = "worker") -> None:
        if proposal != "region-roulette":
            raise ConfigError(f"TOPICCRAWL_WL_PROPOSAL={proposal!r} is not supported with TOPICCRAWL_STORE=redis "
                              "(only region-roulette)")
        if stage_rule not in STAGE_RULES or visited not in VISITED:
            raise ConfigError(f"unknown WL stage rule {stage_rule!r} or visited set {visited!r}")
        self._base = keys["requests"][: -len("requests")] + "wl:"
        super().__init__(client, keys, "wl", None, lease_seconds, budget, worker)
        self.options = {"stage_rule": stage_rule, "visited": visited, "lnf0": lnf0, "lnf_floor": lnf_floor,
                        "lnf_min": lnf_min, "max_steps": max_steps, "stage_steps": stage_steps,
                        "max_rejections": max_rejections, "link_threshold": link_threshold}
        self.link_threshold, self.max_rejections = link_threshold, max_rejections
        self._args = [stage_rule, visited, lnf_floor, lnf_min, max_steps, stage_steps, max_rejections]
        self.rng = rng if rng is not None else random.Random(f"{seed}|{worker}")
        self._uniforms: deque[float] = deque()
        self._decide = self._script("wl_decide.lua")
        self.wl_keys = {name: self._base + name for name in WL_KEYS}
        self.claim()

    @classmethod
    def from_options(cls, client, keys: dict[str, str], options: dict, **lease) -> RedisWLFrontier:
        """From the ``TOPICCRAWL_WL_*`` options, checked by the memory factory (one-line errors)."""
        options = WLOptions.coerce(options)
        memory = make_wl(options)
        return cls(client, keys, stage_rule=memory.stage_rule, visited=memory.visited, proposal=memory.proposal,
                   lnf0=memory.stats()["wl/lnf"], lnf_floor=memory.lnf_floor, lnf_min=memory.lnf_min,
                   max_steps=memory.max_steps, stage_steps=memory.stage_steps,
                   max_rejections=memory.max_rejections, link_threshold=memory.link_threshold,
                   seed=options.wl_seed, **lease)

    def extra_keys(self) -> list[str]:
        return [self._base + name for name in WL_KEYS]

    def claim(self) -> None:
        """Join the crawl's sampler: the first worker sets ln f₀ and the options; a worker with
        other WL options is refused (one chain cannot run two schedules)."""
        state = self._base + "state"
        self.claim_options(state, "the WL sampler")
        self.r.hsetnx(state, "lnf", repr(float(self.options["lnf0"])))

    # -- order and the Frontier protocol ----------------------------------------------------------
    def prefix(self, link: Link) -> str:
        return sortable_hex(-clip01(link.score))

    def push_args(self, link: Link) -> list:
        score = clip01(link.score)
        return [link.domain, round(score * QUANTUM) + 1, energy_bin(score)]

    def entry(self, link: Link, fingerprint: str = "") -> list:
        """A link below ``link_threshold`` without potential value is not queued (counted in
        ``dropped``; its fingerprint is still added, as in memory, where the dupefilter saw it)."""
        if link.score < self.link_threshold and not link.potential:
            return [fingerprint, "", -1, "", "", 0, 0]
        return super().entry(link, fingerprint)

    def pop(self) -> Link | None:
        """One WL decision (atomic, leased): the start, an accepted proposal or a forced move."""
        need = 2 * self.max_rejections
        while len(self._uniforms) < need:
            self._uniforms.append(self.rng.random())
        res = self._decide(keys=self._keys, args=[self.lease_seconds, self.budget, self.worker, *self._args,
                                                  *list(self._uniforms)[:need]])
        self.last = {"blocked": res[0] == -1, "dp": int(res[1]), "reclaimed": int(res[2]), "queued": int(res[3])}
        if res[0] != 1:
            return None
        for _ in range(int(res[6])):
            self._uniforms.popleft()
        self.last.update(used=int(res[6]), kind=res[7])
        return self._link(res[4], res[5])

    # -- reporting ---------------------------------------------------------------------------------
    def sampler(self) -> dict:
        """The shared sampler: ``lng`` and ``hist`` per bin, the ``state`` hash, ``fetches``,
        ``stages`` (list of (L, |S|, ln f) at each completed stage)."""
        k = self.wl_keys
        with self.r.pipeline(transaction=True) as p:
            p.hgetall(k["lng"]).hgetall(k["hist"]).hgetall(k["state"]).hgetall(k["fetches"]).lrange(k["stages"], 0, -1)
            lng, hist, state, fetches, stages = p.execute()
        return {"lng": {int(b): float(v) for b, v in lng.items()}, "hist": {int(b): int(v) for b, v in hist.items()},
                "state": state, "fetches": {int(b): int(v) for b, v in fetches.items()},
                "stages": [(int(a), int(b), float(c)) for a, b, c in (s.split("|") for s in stages)]}

    def ln_g(self) -> dict[int, float]:
        """ln g(E) of every visited bin."""
        return dict(sorted(self.sampler()["lng"].items()))

    def stats(self) -> dict:
        """The memory strategy's ``wl/*`` statistics, global over all workers."""
        s = self.sampler()
        st = s["state"]
        n = {key: int(st.get(key, 0)) for key in ("stage", "accepted", "rejected", "forced", "steps", "dropped")}
        return {"wl/lnf": float(st["lnf"]), **{f"wl/{key}": v for key, v in n.items()},
                "wl/visited_bins": len(s["lng"]), "wl/fetches_per_bin": [s["fetches"].get(b, 0) for b in range(BINS)]}
