-- The anchor association's shared term statistics (topiccrawl.redis.association): a fetched page's
-- distinct terms counted, then the statistics of the terms asked for, read in the same call.
-- KEYS: n HASH (term -> fetched pages holding it), s HASH (term -> their summed relevance, in
-- millionths), state HASH (fields assoc_pages, assoc_total)
-- ARGV: most terms kept, the page's relevance in millionths (-1: no page to count), a field of the
-- state HASH that marks the page counted ('' = none: count it; set already: do not count it again),
-- how many page terms follow, the page's terms..., the terms to read...
-- -> {pages, summed relevance (millionths), then n and s of each term read (0 and 0 if never seen)}
local N, S, STATE = KEYS[1], KEYS[2], KEYS[3]
local limit, rel, once, count = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
if rel >= 0 and once ~= '' and redis.call('HSETNX', STATE, once, 1) == 0 then rel = -1 end
if rel >= 0 then
  local size = redis.call('HLEN', N)
  for i = 5, 4 + count do
    local t = ARGV[i]
    -- once the vocabulary is full, terms first seen after it are not counted (as in memory)
    if size < limit or redis.call('HEXISTS', N, t) == 1 then
      if redis.call('HINCRBY', N, t, 1) == 1 then size = size + 1 end
      redis.call('HINCRBY', S, t, rel)
    end
  end
  redis.call('HINCRBY', STATE, 'assoc_pages', 1)
  redis.call('HINCRBY', STATE, 'assoc_total', rel)
end
local out = {tonumber(redis.call('HGET', STATE, 'assoc_pages') or '0'),
             tonumber(redis.call('HGET', STATE, 'assoc_total') or '0')}
for i = 5 + count, #ARGV do
  out[#out + 1] = tonumber(redis.call('HGET', N, ARGV[i]) or '0')
  out[#out + 1] = tonumber(redis.call('HGET', S, ARGV[i]) or '0')
end
return out
