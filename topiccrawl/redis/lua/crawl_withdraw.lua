-- A worker that stopped before its seeds (no topic words) withdraws its crawl when it was the
-- crawl's only worker, no page was counted and nothing is queued or leased: every key of the crawl
-- is deleted, so the next worker starts it afresh (with its own options). KEYS[1] meta, KEYS[2]
-- stats, KEYS[3] the strategy's claimed state ('' for none), KEYS[4] the queue, KEYS[5] the leases,
-- KEYS[6..] every key of the crawl. -> 1 withdrawn, 0 kept
if tonumber(redis.call('HGET', KEYS[1], 'joins') or '0') > 1 then return 0 end
if KEYS[3] ~= '' and tonumber(redis.call('HGET', KEYS[3], 'claims') or '0') > 1 then return 0 end
if tonumber(redis.call('HGET', KEYS[2], 'dp') or '0') > 0 then return 0 end
if redis.call('ZCARD', KEYS[4]) > 0 or redis.call('ZCARD', KEYS[5]) > 0 then return 0 end
redis.call('DEL', unpack(KEYS, 6))
return 1
