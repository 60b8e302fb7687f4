-- After sites.lua. Expired leases back to the list, then the counts.
-- -> {waiting, leased, reclaimed}
local _, expired = reclaim()
return {redis.call('LLEN', TASKS), redis.call('ZCARD', LEASES), #expired}
