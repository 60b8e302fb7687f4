-- After frontier.lua and the hooks. A leased member is done: counted in the global DP or not.
-- ARGV: member, outcome, worker, count (0/1), lp (0/1), truth (0/1), budget
-- -> new global dp (counted or finished), -1 over budget (nothing changed), -2 already done
local m, outcome, worker = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', DATA, m) == 0 then return -2 end
local dp = tonumber(redis.call('HGET', STATS, 'dp') or '0')
if ARGV[4] == '1' then
  local budget = tonumber(ARGV[7])
  if budget > 0 and dp >= budget then return -1 end
  dp = redis.call('HINCRBY', STATS, 'dp', 1)
  if ARGV[5] == '1' then redis.call('HINCRBY', STATS, 'lp', 1) end
  if ARGV[6] == '1' then redis.call('HINCRBY', STATS, 'truth', 1) end
else
  redis.call('HINCRBY', STATS, 'uncounted', 1)
end
redis.call('HDEL', DATA, m)
lease_settle(LEASES, OWNERS, m, worker)
forget(m)
redis.call('HSET', DONE, m, outcome .. '|' .. worker)
return dp
