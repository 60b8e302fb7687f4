-- After sites.lua. When no task waits and none is leased, every candidate site without a verdict
-- (its task ended without one) is offered again as a new task, at most once per crawl (SWEPT),
-- counted in 'swept'.
-- -> the sites offered again
if redis.call('LLEN', TASKS) > 0 or redis.call('ZCARD', LEASES) > 0 then return {} end
local again = {}
local entries = redis.call('HGETALL', ENTRIES)
for i = 1, #entries, 2 do
  local site, entry = entries[i], entries[i + 1]
  if redis.call('HEXISTS', RESULTS, site) == 0 and redis.call('SADD', SWEPT, site) == 1 then
    local id = redis.call('INCR', SEQ)
    redis.call('RPUSH', TASKS, cjson.encode({kind = 'site', site = site, entry = entry, id = id}))
    again[#again + 1] = site
  end
end
if #again > 0 then redis.call('HINCRBY', STATS, 'swept', #again) end
return again
