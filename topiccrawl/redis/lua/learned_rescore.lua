-- After frontier.lua and learned.lua. New values of queued links after a retrain (or new anchor
-- association shifts, or new holder P): a member still queued gets its new score; one popped
-- meanwhile is left alone (it is leased or done).
-- ARGV: counter (the state field to add to), then member, score (-priority), association field
-- ('' = unchanged), row field ('' = unchanged), member, ... -> how many were re-scored
local n = 0
for i = 2, #ARGV, 4 do
  if redis.call('ZSCORE', REQUESTS, ARGV[i]) then
    redis.call('ZADD', REQUESTS, ARGV[i + 1], ARGV[i])
    redis.call('HSET', PRIO, ARGV[i], ARGV[i + 1])
    if ARGV[i + 2] ~= '' then redis.call('HSET', ASSOC, ARGV[i], ARGV[i + 2]) end
    if ARGV[i + 3] ~= '' then redis.call('HSET', ROWS, ARGV[i], ARGV[i + 3]) end
    n = n + 1
  end
end
if n > 0 then redis.call('HINCRBY', LSTATE, ARGV[1], n) end
return n
