-- After frontier.lua and the hooks. Queue a batch of links, with the duplicate filter's SADDs.
-- KEYS: the frontier's, then the dupefilter SET (last). ARGV: stride, then per link: fingerprint
-- ('' = no duplicate check), member prefix, seq (-1: next), json ('' = not queued: drop()),
-- strategy arguments... -> {queued, per link: member | '' (not queued) | nil (fingerprint already in the SET)}
local DUPEFILTER = KEYS[#KEYS]
local stride, out = tonumber(ARGV[1]), {0}
for i = 2, #ARGV, stride do
  if ARGV[i] ~= '' and redis.call('SADD', DUPEFILTER, ARGV[i]) == 0 then
    out[#out + 1] = false
  elseif ARGV[i + 3] == '' then
    drop()
    out[#out + 1] = ''
  else
    local seq = tonumber(ARGV[i + 2])
    if seq < 0 then seq = redis.call('INCR', SEQ) - 1 end
    local m = ARGV[i + 1] .. string.format('%012d', seq)
    redis.call('HSET', DATA, m, ARGV[i + 3])
    on_push(m, i + 4)
    requeue(m)
    out[#out + 1] = m
  end
end
out[1] = redis.call('ZCARD', REQUESTS)
return out
