-- After frontier_queue.lua and anneal.lua. sa: the frontier's queue, the best member first, p = R(l).
function take()
  local m = redis.call('ZPOPMIN', REQUESTS)[1]
  return m, rscore(m)
end
