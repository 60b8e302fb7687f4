-- After leases.lua. The shared frontier (topiccrawl.redis.frontier.RedisFrontier): its keys, in
-- the order of frontier.py's FRONTIER_KEYS; a strategy's own keys follow from KEYS[STRATEGY_KEYS]
-- on, and the push script gets the crawl's dupefilter SET as its last key.
local REQUESTS, DATA, LEASES, OWNERS, STATS, DONE, SEQ = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local STRATEGY_KEYS = 8

-- The queue hooks, defined by the strategy's hooks file that comes next (frontier_queue.lua,
-- wl.lua, fcsa.lua): on_push(m, j) a new member (its strategy arguments are ARGV[j] onwards),
-- drop() a new link the strategy does not queue, requeue(m) put a member in the queue,
-- forget(m) a member is done for good.
local on_push, drop, requeue, forget

-- a member whose lease ended goes back to the queue, unless it is done (its data is gone)
local function back(m)
  if redis.call('HEXISTS', DATA, m) == 1 then requeue(m); return true end
  return false
end

-- expired leases back to the queue -> now, the expired members, the global dp
local function reclaim()
  local now = lease_now()
  local expired = lease_reclaim(LEASES, OWNERS, now, back, STATS, 'lease_expired')
  return now, expired, tonumber(redis.call('HGET', STATS, 'dp') or '0')
end

-- no pop while budget <= counted + leased pages (budget 0 = none)
local function over_budget(dp, budget)
  return budget > 0 and dp + redis.call('ZCARD', LEASES) >= budget
end
