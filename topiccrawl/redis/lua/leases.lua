-- Leases: the one lease mechanism of the Redis store (topiccrawl.redis.leases).
-- A lease set is two keys: a ZSET member -> lease expiry (Redis TIME, seconds) and a HASH
-- member -> owner (worker id). The frontier's requests (leases, leases:owner) and the site
-- finder's tasks (sites:leases, sites:owner) are both lease sets. A library: the functions take
-- the two key names; `back(m)` puts a member back into its store's queue and answers whether it did.

-- Redis server time in seconds
local function lease_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

-- lease member m to worker until now + seconds
local function lease(leases, owners, m, worker, seconds, now)
  redis.call('ZADD', leases, now + seconds, m)
  redis.call('HSET', owners, m, worker)
end

-- extend the leases of list[first..] that worker still owns to now + seconds -> how many
local function lease_renew(leases, owners, worker, seconds, list, first)
  local until_ = lease_now() + seconds
  local n = 0
  for i = first, #list do
    if redis.call('HGET', owners, list[i]) == worker then
      redis.call('ZADD', leases, 'XX', until_, list[i]); n = n + 1
    end
  end
  return n
end

-- up to 1000 leases expired by now: unleased, back(m) each, counted in HASH stats' counter
-- -> the expired members
local function lease_reclaim(leases, owners, now, back, stats, counter)
  local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 1000)
  for _, m in ipairs(expired) do
    redis.call('ZREM', leases, m)
    redis.call('HDEL', owners, m)
    back(m)
  end
  if #expired > 0 then redis.call('HINCRBY', stats, counter, #expired) end
  return expired
end

-- worker gives its leases of list[first..] back: unleased, back(m) each; those put back are
-- counted in HASH stats' counter -> how many
local function lease_release(leases, owners, worker, list, first, back, stats, counter)
  local n = 0
  for i = first, #list do
    local m = list[i]
    if redis.call('HGET', owners, m) == worker then
      redis.call('ZREM', leases, m)
      redis.call('HDEL', owners, m)
      if back(m) then n = n + 1 end
    end
  end
  if n > 0 then redis.call('HINCRBY', stats, counter, n) end
  return n
end

-- member m is done: its lease (whoever holds it) ends -> whether it was worker's
local function lease_settle(leases, owners, m, worker)
  local mine = redis.call('HGET', owners, m) == worker
  redis.call('ZREM', leases, m)
  redis.call('HDEL', owners, m)
  return mine
end
