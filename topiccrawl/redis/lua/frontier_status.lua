-- After frontier.lua and the hooks. Expired leases back to the queue, then the counts.
-- -> {queued, leased, dp, reclaimed}
local _, expired, dp = reclaim()
return {redis.call('ZCARD', REQUESTS), redis.call('ZCARD', LEASES), dp, #expired}
