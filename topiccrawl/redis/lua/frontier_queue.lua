-- After frontier.lua. The queue hooks of bfs / bestfirst / oracle: the requests ZSET is the whole queue.
function on_push(m, j) end
function drop() end
function requeue(m) redis.call('ZADD', REQUESTS, 0, m) end
function forget(m) redis.call('ZREM', REQUESTS, m) end
