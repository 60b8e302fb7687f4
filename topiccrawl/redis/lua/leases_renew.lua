-- After leases.lua. Renew a worker's leases (topiccrawl.redis.leases.Leases.renew).
-- KEYS: the lease set. ARGV: lease seconds, worker, members... -> how many are still the worker's
local LEASES, OWNERS = KEYS[1], KEYS[2]
return lease_renew(LEASES, OWNERS, ARGV[2], tonumber(ARGV[1]), ARGV, 3)
