-- After sites.lua. Lease the next waiting task to a worker.
-- ARGV: lease seconds, worker -> {task or false, reclaimed}
local seconds, worker = tonumber(ARGV[1]), ARGV[2]
local now, expired = reclaim()
local m = redis.call('LPOP', TASKS)
if m then lease(LEASES, OWNERS, m, worker, seconds, now) end
return {m or false, #expired}
