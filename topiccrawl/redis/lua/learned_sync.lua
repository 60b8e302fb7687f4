-- After leases.lua. A learned worker's step: append its training events, take (or keep) the
-- trainer lease, and read what it has not applied yet (topiccrawl.redis.learned).
-- KEYS: events LIST, model HASH, the trainer's lease set (ZSET, HASH), state HASH, the frontier's stats HASH
-- ARGV: first entry not applied yet, worker, lease seconds (> 0: take or renew the trainer lease
-- when free or ours; 0: leave it; -1: give it up), events to append...
-- -> {1 if worker is the trainer, published model version, global dp, entries from the first not applied...}
local EVENTS, MODEL, TLEASES, TOWNERS, LSTATE, STATS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local first, worker, seconds = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if #ARGV > 3 then redis.call('RPUSH', EVENTS, unpack(ARGV, 4)) end
local now = lease_now()
lease_reclaim(TLEASES, TOWNERS, now, function(m) return false end, LSTATE, 'trainer_expired')
local owner = redis.call('HGET', TOWNERS, 'trainer')
if seconds > 0 and (not owner or owner == worker) then
  lease(TLEASES, TOWNERS, 'trainer', worker, seconds, now)
  owner = worker
elseif seconds < 0 and owner == worker then
  lease_settle(TLEASES, TOWNERS, 'trainer', worker)
  owner = nil
end
local out = {owner == worker and 1 or 0, tonumber(redis.call('HGET', MODEL, 'version') or '0'),
             tonumber(redis.call('HGET', STATS, 'dp') or '0')}
local entries = redis.call('LRANGE', EVENTS, first, first + 9999)
for i = 1, #entries do out[#out + 1] = entries[i] end
return out
