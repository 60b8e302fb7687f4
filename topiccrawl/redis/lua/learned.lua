-- After frontier.lua. The queue hooks of learned (topiccrawl.redis.learned): the requests ZSET is
-- scored with the negated link value (ties: member order, i.e. seq), the value is kept for a
-- requeue and the encoded feature row for the worker that fetches the link. Its keys after the
-- frontier's, in the order of learned.py's NAMES:
local PRIO, ROWS, LSTATE = KEYS[STRATEGY_KEYS], KEYS[STRATEGY_KEYS + 1], KEYS[STRATEGY_KEYS + 2]

-- ARGV[j]: the ZSET score (-value, %.17g), ARGV[j + 1]: base64 row, a space, the holder URL
function on_push(m, j)
  redis.call('HSET', PRIO, m, ARGV[j])
  redis.call('HSET', ROWS, m, ARGV[j + 1])
end
function drop() end
function requeue(m) redis.call('ZADD', REQUESTS, redis.call('HGET', PRIO, m) or '0', m) end
function forget(m)
  redis.call('ZREM', REQUESTS, m)
  redis.call('HDEL', PRIO, m)
  redis.call('HDEL', ROWS, m)
end
