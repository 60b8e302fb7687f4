-- After frontier.lua and the hooks. Pop and lease the first member of the queue.
-- ARGV: lease seconds, budget, worker
-- -> {1, dp, reclaimed, queued, member, json} or {0 (empty) | -1 (budget), dp, reclaimed, queued}
local seconds, budget, worker = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local now, expired, dp = reclaim()
if over_budget(dp, budget) then return {-1, dp, #expired, redis.call('ZCARD', REQUESTS)} end
local popped = redis.call('ZPOPMIN', REQUESTS)
if #popped == 0 then return {0, dp, #expired, 0} end
local m = popped[1]
lease(LEASES, OWNERS, m, worker, seconds, now)
return {1, dp, #expired, redis.call('ZCARD', REQUESTS), m, redis.call('HGET', DATA, m)}
