-- After frontier.lua and the hooks. A worker's leases back to the queue, with their priority.
-- ARGV: worker, members... -> how many went back
return lease_release(LEASES, OWNERS, ARGV[1], ARGV, 2, back, STATS, 'released')
