-- A worker joins its crawl: the first worker's strategy and topic tag the crawl id; a worker with
-- another strategy or topic is refused; one that joins is counted in `joins` (crawl_withdraw.lua).
-- One script, so a withdraw cannot come between the checks and the count.
-- KEYS[1] meta. ARGV[1] strategy, ARGV[2] topic tag ('' for none) -> {ok, strategy, topic}
local meta = KEYS[1]
redis.call('HSETNX', meta, 'strategy', ARGV[1])
local strategy = redis.call('HGET', meta, 'strategy')
if strategy ~= ARGV[1] then return {0, strategy, ''} end
if ARGV[2] ~= '' then
  redis.call('HSETNX', meta, 'topic', ARGV[2])
  local topic = redis.call('HGET', meta, 'topic')
  if topic ~= ARGV[2] then return {0, strategy, topic} end
end
redis.call('HINCRBY', meta, 'joins', 1)
return {1, strategy, ''}
