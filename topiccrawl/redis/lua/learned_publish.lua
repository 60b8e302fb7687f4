-- After leases.lua. The trainer publishes a model version (topiccrawl.redis.learned).
-- KEYS: model HASH, the trainer's lease set (ZSET, HASH), the frontier's stats HASH
-- ARGV: worker, version, budget, weights, meta
-- -> 1 published; 0 refused: worker is not the trainer any more, the version is not newer, or the
--    global budget is spent (a model trained after the last page would order nothing)
local MODEL, TOWNERS, STATS = KEYS[1], KEYS[3], KEYS[4]
if redis.call('HGET', TOWNERS, 'trainer') ~= ARGV[1] then return 0 end
local budget = tonumber(ARGV[3])
if budget > 0 and tonumber(redis.call('HGET', STATS, 'dp') or '0') >= budget then return 0 end
if tonumber(ARGV[2]) <= tonumber(redis.call('HGET', MODEL, 'version') or '0') then return 0 end
redis.call('HSET', MODEL, 'version', ARGV[2], 'weights', ARGV[4], 'meta', ARGV[5])
return 1
