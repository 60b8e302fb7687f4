-- After fcsa.lua. A counted page's v for its host: the host memory and its links' rank.
-- ARGV: host, v -> hosts with feedback
local h, good, seen = ARGV[1], 0, 0
local q = redis.call('HGET', QUAL, h)
if q then
  local g, s = string.match(q, '^(.+)|(%d+)$')
  good, seen = tonumber(g), tonumber(s)
end
redis.call('HSET', QUAL, h, string.format('%.17g|%d', good + tonumber(ARGV[2]), seen + 1))
rekey(h)
return redis.call('HLEN', QUAL)
