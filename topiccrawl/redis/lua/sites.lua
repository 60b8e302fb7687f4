-- After leases.lua. The site finder's shared tasks (topiccrawl.redis.sites.RedisSiteTasks): its keys,
-- in the order of sites.py's KEYS (every sites script gets all of them).
local TASKS, SEEN, LEASES, OWNERS, ENTRIES, FOUND_BY, ALIASES, RESULTS, COUNTS, STATS, SEQ, SWEPT =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]

-- a task whose lease ended goes back to the head of the list
local function back(m)
  redis.call('LPUSH', TASKS, m)
  return true
end

-- expired leases back to the head of the list (counted in reclaimed) -> now, the expired tasks
local function reclaim()
  local now = lease_now()
  return now, lease_reclaim(LEASES, OWNERS, now, back, STATS, 'reclaimed')
end
