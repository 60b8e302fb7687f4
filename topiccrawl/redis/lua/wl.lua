-- After frontier.lua. The Wang-Landau frontier's queue structures (topiccrawl.redis.wanglandau) and
-- the queue hooks over them. Its keys, in the order of wanglandau.py's WL_KEYS:
local S, LNG, HIST, FETCH, QUEUED, LINK, POS, SLOT, TREE, DSUM, DCOUNT, DMEAN, DOMAINS, STAGES =
  unpack(KEYS, STRATEGY_KEYS)
local function lowbit(i) return bit.band(i, -i) end
local function node(d, i) return tonumber(redis.call('HGET', TREE, d .. ':' .. i) or '0') end
local function prefix(d, i)
  local s = 0
  while i > 0 do s = s + node(d, i); i = i - lowbit(i) end
  return s
end
local function info(m)
  local d, w, b = string.match(redis.call('HGET', LINK, m), '^(%d+)|(%d+)|(%d+)$')
  return d, tonumber(w), b
end
local function set_mean(d, n, total)
  local key = string.format('%010d', d)
  if n == 0 then
    redis.call('ZREM', DMEAN, key); redis.call('HDEL', DCOUNT, d); redis.call('HDEL', DSUM, d)
  else
    redis.call('ZADD', DMEAN, (n - total) / n, key); redis.call('HSET', DCOUNT, d, n)
  end
end
function on_push(m, j)
  local d = redis.call('HGET', DOMAINS, ARGV[j])
  if not d then
    d = redis.call('HLEN', DOMAINS)
    redis.call('HSET', DOMAINS, ARGV[j], d)
  end
  redis.call('HSET', LINK, m, d .. '|' .. ARGV[j + 1] .. '|' .. ARGV[j + 2])
end
function drop() redis.call('HINCRBY', S, 'dropped', 1) end
function requeue(m)
  if redis.call('ZSCORE', REQUESTS, m) then return end
  local d, w, b = info(m)
  local n = tonumber(redis.call('HGET', DCOUNT, d) or '0')
  local i = n + 1
  redis.call('HSET', SLOT, d .. ':' .. n, m)
  redis.call('HSET', POS, m, n)
  redis.call('HSET', TREE, d .. ':' .. i, w + prefix(d, i - 1) - prefix(d, i - lowbit(i)))
  set_mean(d, i, redis.call('HINCRBY', DSUM, d, w))
  redis.call('HINCRBY', QUEUED, b, 1)
  redis.call('ZADD', REQUESTS, 0, m)
end
local function unqueue(m)
  local d, w, b = info(m)
  local p = tonumber(redis.call('HGET', POS, m))
  local n = tonumber(redis.call('HGET', DCOUNT, d))
  local last = redis.call('HGET', SLOT, d .. ':' .. (n - 1))
  if last ~= m then
    local _, lw = info(last)
    local i = p + 1
    while i <= n do redis.call('HINCRBY', TREE, d .. ':' .. i, lw - w); i = i + lowbit(i) end
    redis.call('HSET', SLOT, d .. ':' .. p, last)
    redis.call('HSET', POS, last, p)
  end
  redis.call('HDEL', SLOT, d .. ':' .. (n - 1))
  redis.call('HDEL', POS, m)
  redis.call('HDEL', TREE, d .. ':' .. n)
  set_mean(d, n - 1, redis.call('HINCRBY', DSUM, d, -w))
  redis.call('HINCRBY', QUEUED, b, -1)
  redis.call('ZREM', REQUESTS, m)
end
function forget(m)
  if redis.call('ZSCORE', REQUESTS, m) then unqueue(m) end
  redis.call('HDEL', LINK, m)
end
