-- After anneal.lua. fcsa-host: the host memory and the two-level heap, kept in step by the queue
-- hooks; p(l) = (1 - w) R(l) + w q(h). Its keys after the state, in the order of annealing.py's NAMES:
local QUAL, LINK, HLINKS, HOSTS, HBEST = unpack(KEYS, STRATEGY_KEYS + 1)
local par
local function prio(r, h)
  if not par then
    par = redis.call('HMGET', STATE, 'w', 'q0', 'a')
    for i = 1, 3 do par[i] = tonumber(par[i]) end
  end
  if par[1] == 0 then return r end
  local good, seen = 0, 0
  local q = redis.call('HGET', QUAL, h)
  if q then
    local g, s = string.match(q, '^(.+)|(%d+)$')
    good, seen = tonumber(g), tonumber(s)
  end
  return (1.0 - par[1]) * r + par[1] * ((good + par[3] * par[2]) / (seen + par[3]))
end
local function hbest(h)
  local e = redis.call('ZRANGEBYLEX', HLINKS, '[' .. h .. ' ', '(' .. h .. '!', 'LIMIT', 0, 1)[1]
  return e and string.sub(e, #h + 2)
end
local function rekey(h)
  local old = redis.call('HGET', HBEST, h)
  if old then redis.call('ZREM', HOSTS, old) end
  local m = hbest(h)
  if m then
    local key = string.sub(m, -12) .. ' ' .. h
    redis.call('ZADD', HOSTS, string.format('%.17g', -prio(rscore(m), h)), key)
    redis.call('HSET', HBEST, h, key)
  elseif old then
    redis.call('HDEL', HBEST, h)
  end
end
function on_push(m, j) redis.call('HSET', LINK, m, ARGV[j]) end
function drop() end
function requeue(m)
  if redis.call('ZSCORE', REQUESTS, m) then return end
  local h = redis.call('HGET', LINK, m)
  redis.call('ZADD', REQUESTS, 0, m)
  redis.call('ZADD', HLINKS, 0, h .. ' ' .. m)
  if hbest(h) == m then rekey(h) end
end
local function unqueue(m)
  local h = redis.call('HGET', LINK, m)
  local first = hbest(h) == m
  redis.call('ZREM', REQUESTS, m)
  redis.call('ZREM', HLINKS, h .. ' ' .. m)
  if first then rekey(h) end
  return h
end
function forget(m)
  if redis.call('ZSCORE', REQUESTS, m) then unqueue(m) end
  redis.call('HDEL', LINK, m)
end
function take()
  local h = string.sub(redis.call('ZRANGE', HOSTS, 0, 0)[1], 14)
  local m = hbest(h)
  unqueue(m)
  return m, prio(rscore(m), h)
end
