"""The Wang–Landau frontier (``wl``) in Redis: one shared sampler for N workers.

The memory strategy :class:`topiccrawl.strategies.wanglandau.WangLandauFrontier` (docs/wl.md) with its state and its
queue structures under the crawl's key prefix (``topiccrawl:<crawl_id>:``), so that every worker
takes part in one WL chain. One decision — the start, or region competition + roulette, the
acceptance min(g(E1)/g(E2), 1) in log space, the g/H updates, the forced move after
``max_rejections``, the stage test every T steps — and the lease of the chosen link are ONE Lua
script, atomic like :class:`~topiccrawl.redis.frontier.RedisFrontier`'s pop (same lease keys and
budget check, so the RedisScheduler's lease machinery is unchanged). Redis's ``math.random`` is
seeded per script call, not random, so the uniforms come from each worker's Python RNG: every
decision passes 2 · max_rejections of them (roulette, acceptance per proposal) and the script
answers how many it used; the rest are passed again next time.

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

import json
import random
from collections import deque

from topiccrawl.crawl.settings import ConfigError
from topiccrawl.strategies.simple import Link
from topiccrawl.redis.frontier import BUDGET, LEASE, _RECLAIM, RedisFrontier, sortable_hex
from topiccrawl.strategies.wanglandau import BINS, QUANTUM, STAGE_RULES, VISITED, clip01, energy_bin, make_wl, option

WL_KEYS = ("state", "lng", "hist", "fetches", "queued", "link", "pos", "slot", "tree", "dsum", "dcount", "dmean",
           "domains", "stages")

#: the WL queue structures (KEYS[8..21]) and the frontier hooks over them
WL_LIB = """
local S, LNG, HIST, FETCH, QUEUED, LINK, POS, SLOT, TREE, DSUM, DCOUNT, DMEAN, DOMAINS, STAGES =
  KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17],
  KEYS[18], KEYS[19], KEYS[20], KEYS[21]
local function lowbit(i) return bit.band(i, -i) end
local function node(d, i) return tonumber(redis.call('HGET', TREE, d .. ':' .. i) or '0') end
local function prefix(d, i)
  local s = 0
  while i > 0 do s = s + node(d, i); i = i - lowbit(i) end
  return s
end
local function info(m)
  local d, w, b = string.match(redis.call('HGET', LINK, m), '^(%d+)|(%d+)|(%d+)$')
  return d, tonumber(w), b
end
local function set_mean(d, n, total)
  local key = string.format('%010d', d)
  if n == 0 then
    redis.call('ZREM', DMEAN, key); redis.call('HDEL', DCOUNT, d); redis.call('HDEL', DSUM, d)
  else
    redis.call('ZADD', DMEAN, (n - total) / n, key); redis.call('HSET', DCOUNT, d, n)
  end
end
local function on_push(m, j)
  local d = redis.call('HGET', DOMAINS, ARGV[j])
  if not d then
    d = redis.call('HLEN', DOMAINS)
    redis.call('HSET', DOMAINS, ARGV[j], d)
  end
  redis.call('HSET', LINK, m, d .. '|' .. ARGV[j + 1] .. '|' .. ARGV[j + 2])
end
local function drop() redis.call('HINCRBY', S, 'dropped', 1) end
local function requeue(m)
  if redis.call('ZSCORE', KEYS[1], m) then return end
  local d, w, b = info(m)
  local n = tonumber(redis.call('HGET', DCOUNT, d) or '0')
  local i = n + 1
  redis.call('HSET', SLOT, d .. ':' .. n, m)
  redis.call('HSET', POS, m, n)
  redis.call('HSET', TREE, d .. ':' .. i, w + prefix(d, i - 1) - prefix(d, i - lowbit(i)))
  set_mean(d, i, redis.call('HINCRBY', DSUM, d, w))
  redis.call('HINCRBY', QUEUED, b, 1)
  redis.call('ZADD', KEYS[1], 0, m)
end
local function unqueue(m)
  local d, w, b = info(m)
  local p = tonumber(redis.call('HGET', POS, m))
  local n = tonumber(redis.call('HGET', DCOUNT, d))
  local last = redis.call('HGET', SLOT, d .. ':' .. (n - 1))
  if last ~= m then
    local _, lw = info(last)
    local i = p + 1
    while i <= n do redis.call('HINCRBY', TREE, d .. ':' .. i, lw - w); i = i + lowbit(i) end
    redis.call('HSET', SLOT, d .. ':' .. p, last)
    redis.call('HSET', POS, last, p)
  end
  redis.call('HDEL', SLOT, d .. ':' .. (n - 1))
  redis.call('HDEL', POS, m)
  redis.call('HDEL', TREE, d .. ':' .. n)
  set_mean(d, n - 1, redis.call('HINCRBY', DSUM, d, -w))
  redis.call('HINCRBY', QUEUED, b, -1)
  redis.call('ZREM', KEYS[1], m)
end
local function forget(m)
  if redis.call('ZSCORE', KEYS[1], m) then unqueue(m) end
  redis.call('HDEL', LINK, m)
end
"""

# ARGV: lease seconds, budget, worker, stage rule, visited, lnf floor, lnf min, max steps, T,
#       max rejections, uniforms... (2 per proposal: roulette, acceptance)
# -> {1, dp, reclaimed, queued, member, json, uniforms used, start|accepted|forced}
#    or {0 (empty) | -1 (budget), dp, reclaimed, queued}
_DECIDE = _RECLAIM + BUDGET + """
if redis.call('ZCARD', KEYS[1]) == 0 then return {0, dp, #expired, 0} end
local rule, visited = ARGV[4], ARGV[5]
local lnf_floor, lnf_min, max_steps, T, max_rej =
  tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local st = {}
local raw = redis.call('HGETALL', S)
for i = 1, #raw, 2 do st[raw[i]] = raw[i + 1] end
local lnf, x1 = tonumber(st.lnf), st.x1
local steps, stage, mrej = tonumber(st.steps or '0'), tonumber(st.stage or '0'), tonumber(st.m or '0')
local accepted, rejected = tonumber(st.accepted or '0'), tonumber(st.rejected or '0')
local forced = tonumber(st.forced or '0')
local frozen, inv_t = st.frozen == '1', st.inv_t == '1'
local used = 0
local function uniform() used = used + 1; return tonumber(ARGV[10 + used]) end
local function lng(b) return tonumber(redis.call('HGET', LNG, b) or '0') end
local function setlng(b, x) redis.call('HSET', LNG, b, string.format('%.17g', x)) end
local function enter(b)
  if redis.call('HEXISTS', LNG, b) == 0 then redis.call('HSET', LNG, b, '0'); redis.call('HSET', HIST, b, 1) end
end
local function stage_done()
  local h = {}
  if visited == 'stage' then
    for _, x in ipairs(redis.call('HVALS', HIST)) do if tonumber(x) > 0 then h[#h + 1] = tonumber(x) end end
  else
    for _, b in ipairs(redis.call('HKEYS', LNG)) do
      if visited == 'ever' or tonumber(redis.call('HGET', QUEUED, b) or '0') > 0 then
        h[#h + 1] = tonumber(redis.call('HGET', HIST, b) or '0')
      end
    end
  end
  if #h == 0 then return false end
  local low, sum = math.huge, 0
  for _, x in ipairs(h) do low = math.min(low, x); sum = sum + x end
  if low <= 0 then return false end
  if rule == 'paper' then return low >= math.log(2) / lnf end
  if rule == 'flat' then return low >= 0.8 * sum / #h end
  if rule == 'zhou-bhatt' then return low >= 1.0 / math.sqrt(lnf) end
  return low >= 1
end
local function step()
  steps = steps + 1
  if frozen then return end
  if inv_t then
    lnf = math.max(redis.call('HLEN', LNG) / steps, lnf_floor)
  elseif steps % T == 0 and stage_done() then
    redis.call('RPUSH', STAGES, steps .. '|' .. redis.call('HLEN', LNG) .. '|' .. string.format('%.17g', lnf))
    lnf = math.max(lnf / 2, lnf_floor)
    stage = stage + 1
    redis.call('DEL', HIST)
    if rule == 'one-over-t' and lnf <= redis.call('HLEN', LNG) / steps then inv_t = true end
  end
  if steps > max_steps or lnf < lnf_min then frozen = true end
end
local function top() return redis.call('ZRANGE', KEYS[1], 0, 0)[1] end
local function move(e)
  local _, _, b = info(e)
  enter(b)
  setlng(b, lng(b) + lnf)
  redis.call('HINCRBY', HIST, b, 1)
  x1 = b
  mrej = 0
  step()
  return e
end
local m, kind
if not x1 then
  m, kind = top(), 'start'
  local _, _, b = info(m)
  enter(b)
  x1 = b
else
  while true do
    local d = tostring(tonumber(redis.call('ZRANGE', DMEAN, 0, 0)[1]))
    local total = tonumber(redis.call('HGET', DSUM, d))
    local n = tonumber(redis.call('HGET', DCOUNT, d))
    local u, pos, bstep = math.min(math.floor(uniform() * total), total - 1), 0, 1
    while bstep * 2 <= n do bstep = bstep * 2 end
    while bstep >= 1 do
      local t = pos + bstep <= n and node(d, pos + bstep) or nil
      if t and t <= u then pos = pos + bstep; u = u - t end
      bstep = bstep / 2
    end
    local e = redis.call('HGET', SLOT, d .. ':' .. pos)
    local _, _, b = info(e)
    enter(b)
    if math.log(1.0 - uniform()) <= lng(x1) - lng(b) then
      accepted = accepted + 1
      m, kind = move(e), 'accepted'
      break
    end
    setlng(x1, lng(x1) + lnf)
    redis.call('HINCRBY', HIST, x1, 1)
    rejected = rejected + 1
    mrej = mrej + 1
    step()
    if mrej >= max_rej then
      forced = forced + 1
      m, kind = move(top()), 'forced'
      break
    end
  end
end
local _, _, fb = info(m)
unqueue(m)
redis.call('HINCRBY', FETCH, fb, 1)
redis.call('HSET', S, 'lnf', string.format('%.17g', lnf), 'x1', x1, 'steps', steps, 'stage', stage, 'm', mrej,
  'accepted', accepted, 'rejected', rejected, 'forced', forced, 'frozen', frozen and 1 or 0, 'inv_t', inv_t and 1 or 0)
""" + LEASE + """
return {1, dp, #expired, redis.call('ZCARD', KEYS[1]), m, redis.call('HGET', KEYS[2], m), used, kind}
"""


class RedisWLFrontier(RedisFrontier):
    """The ``wl`` strategy over Redis (module docstring); the arguments are those of
    :class:`~topiccrawl.strategies.wanglandau.WangLandauFrontier` plus the lease arguments of RedisFrontier.

    ``rng`` gives this worker's uniforms (default ``random.Random(f"{seed}|{worker}")``: workers
    draw independent streams). :attr:`last` also holds ``kind`` (start, accepted, forced) and
    ``used`` (uniforms consumed) of the last decision. ``proposal="uniform"`` is refused with a
    one-line :class:`ConfigError`: the Redis store keeps no per-domain count tree for it.
    """

    STRATEGIES = ("wl",)
    LIB = WL_LIB

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
        self._decide = client.register_script(WL_LIB + _DECIDE)
        self.wl_keys = {name: self._base + name for name in WL_KEYS}
        self.claim()

    @classmethod
    def from_options(cls, client, keys: dict[str, str], options: dict, **lease) -> RedisWLFrontier:
        """From the ``TOPICCRAWL_WL_*`` options, checked by the memory factory (one-line errors)."""
        memory = make_wl(options)
        return cls(client, keys, stage_rule=memory.stage_rule, visited=memory.visited, proposal=memory.proposal,
                   lnf0=memory.stats()["wl/lnf"], lnf_floor=memory.lnf_floor, lnf_min=memory.lnf_min,
                   max_steps=memory.max_steps, stage_steps=memory.stage_steps,
                   max_rejections=memory.max_rejections, link_threshold=memory.link_threshold,
                   seed=option(options, "wl_seed", int, 0), **lease)

    def extra_keys(self) -> list[str]:
        return [self._base + name for name in WL_KEYS]

    def claim(self) -> None:
        """Join the crawl's sampler: the first worker sets ln f₀ and the options; a worker with
        other WL options is refused (one chain cannot run two schedules)."""
        state = self._base + "state"
        mine = json.dumps(self.options, sort_keys=True)
        self.r.hsetnx(state, "options", mine)
        self.r.hsetnx(state, "lnf", repr(float(self.options["lnf0"])))
        theirs = self.r.hget(state, "options")
        if theirs != mine:
            raise ConfigError(f"the WL sampler of this crawl runs with options {theirs}, not {mine} "
                              "(set TOPICCRAWL_CRAWL_ID to start another crawl)")

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
