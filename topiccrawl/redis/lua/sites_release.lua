-- After sites.lua. A worker's unfinished tasks back to the head of the list (a clean stop).
-- ARGV: worker, tasks... -> how many went back
return lease_release(LEASES, OWNERS, ARGV[1], ARGV, 2, back, STATS, 'released')
