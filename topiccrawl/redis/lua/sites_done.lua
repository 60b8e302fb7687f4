-- After sites.lua. End a task (its lease, whoever holds it); for a site, store its verdict once.
-- A task whose lease expired while its worker still finished it is back in the list: removed.
-- ARGV: task, worker, site ('' for a search), result JSON
-- -> 1 done by this worker, 0 the task was no longer this worker's / the site had a verdict already
local task, worker, site, result = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local mine = lease_settle(LEASES, OWNERS, task, worker)
redis.call('LREM', TASKS, 0, task)
if site ~= '' then
  if redis.call('HSETNX', RESULTS, site, result) == 0 then
    redis.call('HINCRBY', STATS, 'duplicate_verdicts', 1)
    return 0
  end
  return 1
end
if mine then return 1 end
return 0
