-- After frontier.lua. The queue hooks of learned (topiccrawl.redis.learned): the requests ZSET is
-- scored with the negated priority (ties: member order, i.e. seq), the priority is kept for a
-- requeue, the encoded feature row for the worker that fetches the link, and (anchor association)
-- the link's shift and anchor terms for a later re-scoring. Its keys after the frontier's, in the
-- order of learned.py's NAMES:
local PRIO, ROWS, LSTATE, ASSOC = KEYS[STRATEGY_KEYS], KEYS[STRATEGY_KEYS + 1], KEYS[STRATEGY_KEYS + 2],
                                  KEYS[STRATEGY_KEYS + 3]

-- ARGV[j]: the ZSET score (-priority, %.17g), ARGV[j + 1]: base64 row, a space, the holder URL;
-- ARGV[j + 2]: the association field ('' = none)
function on_push(m, j)
  redis.call('HSET', PRIO, m, ARGV[j])
  redis.call('HSET', ROWS, m, ARGV[j + 1])
  if ARGV[j + 2] ~= '' then redis.call('HSET', ASSOC, m, ARGV[j + 2]) end
end
function drop() end
function requeue(m) redis.call('ZADD', REQUESTS, redis.call('HGET', PRIO, m) or '0', m) end
function forget(m)
  redis.call('ZREM', REQUESTS, m)
  redis.call('HDEL', PRIO, m)
  redis.call('HDEL', ROWS, m)
  redis.call('HDEL', ASSOC, m)
end
