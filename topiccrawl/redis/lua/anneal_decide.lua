-- After anneal.lua and sa.lua or fcsa.lua. One SA decision and the lease of the chosen member.
-- ARGV: lease seconds, budget, worker, u1, u2
-- -> {1, dp, reclaimed, queued, member, json, uniforms used, 1 if a lower candidate was accepted}
--    or {0 (empty) | -1 (budget), dp, reclaimed, queued}
local seconds, budget, worker, u1, u2 = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local now, expired, dp = reclaim()
if over_budget(dp, budget) then return {-1, dp, #expired, redis.call('ZCARD', REQUESTS)} end
local n = redis.call('ZCARD', REQUESTS)
if n == 0 then return {0, dp, #expired, 0} end
local p = redis.call('HMGET', STATE, 't', 'alpha', 'tmin', 'k')
local T, alpha, tmin = tonumber(p[1]), tonumber(p[2]), tonumber(p[3])
local span = math.min(tonumber(p[4]), n)
local r = math.min(math.floor(tonumber(u1) * span), span - 1)
local taken, prio_, used, worse = {}, {}, 1, 0
for i = 1, r + 1 do taken[i], prio_[i] = take() end
local m = taken[r + 1]
local delta = prio_[1] - prio_[r + 1]
if delta > 0 then
  used = 2
  if math.log(1.0 - tonumber(u2)) <= -delta / T then worse = 1 else m = taken[1] end
end
for i = 1, r + 1 do if taken[i] ~= m then requeue(taken[i]) end end
redis.call('HSET', STATE, 't', string.format('%.17g', math.max(T * alpha, tmin)))
redis.call('HINCRBY', STATE, 'decisions', 1)
redis.call('HINCRBY', STATE, 'worse', worse)
lease(LEASES, OWNERS, m, worker, seconds, now)
return {1, dp, #expired, redis.call('ZCARD', REQUESTS), m, redis.call('HGET', DATA, m), used, worse}
