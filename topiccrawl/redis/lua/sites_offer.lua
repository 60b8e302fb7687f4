-- After sites.lua. Offer a search task once per crawl; it gets its id here (one round trip per offer).
-- ARGV: key, task JSON without its closing brace -> 1 when new
local key, task = ARGV[1], ARGV[2]
if redis.call('SADD', SEEN, key) == 0 then return 0 end
local id = redis.call('INCR', SEQ)
redis.call('RPUSH', TASKS, task .. ', "id": ' .. id .. '}')
redis.call('HINCRBY', STATS, 'offered', 1)
return 1
