-- After frontier.lua and learned.lua. One decision of learned and the lease of the chosen member:
-- the best queued link, or (exploration) the link of rank floor(u * n).
-- ARGV: lease seconds, budget, worker, u (-1: the best)
-- -> {1, dp, reclaimed, queued, member, json, row field} or {0 (empty) | -1 (budget), dp, reclaimed, queued}
local seconds, budget, worker, u = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local now, expired, dp = reclaim()
if over_budget(dp, budget) then return {-1, dp, #expired, redis.call('ZCARD', REQUESTS)} end
local n = redis.call('ZCARD', REQUESTS)
if n == 0 then return {0, dp, #expired, 0} end
local m
if u >= 0 then
  local r = math.min(math.floor(u * n), n - 1)
  m = redis.call('ZRANGE', REQUESTS, r, r)[1]
  redis.call('ZREM', REQUESTS, m)
  redis.call('HINCRBY', LSTATE, 'explored', 1)
else
  m = redis.call('ZPOPMIN', REQUESTS)[1]
end
lease(LEASES, OWNERS, m, worker, seconds, now)
return {1, dp, #expired, n - 1, m, redis.call('HGET', DATA, m), redis.call('HGET', ROWS, m) or ''}
