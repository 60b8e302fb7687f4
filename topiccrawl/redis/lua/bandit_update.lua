-- One play of the shared UCB1 bandit (topiccrawl.redis.bandit.RedisBandit.update): read the
-- snapshot, n_op += 1, total_op += reward, n += 1, append the record.
-- ARGV: op, reward (repr), seeds JSON, new pages JSON -> the record (JSON)
local BANDIT, LOG = KEYS[1], KEYS[2]
local op, reward, seeds, new_pages = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ops = cjson.decode(redis.call('HGET', BANDIT, 'operators'))
local plays, totals = {}, {}
for i, o in ipairs(ops) do
  local key = cjson.encode(o) .. ':'
  plays[i] = key .. (redis.call('HGET', BANDIT, 'plays:' .. o) or '0')
  totals[i] = key .. (redis.call('HGET', BANDIT, 'totals:' .. o) or '0')
end
local old = tonumber(redis.call('HGET', BANDIT, 'totals:' .. op) or '0')
redis.call('HINCRBY', BANDIT, 'plays:' .. op, 1)
redis.call('HSET', BANDIT, 'totals:' .. op, string.format('%.17g', old + tonumber(reward)))
local n = redis.call('HINCRBY', BANDIT, 'n', 1)
local rec = '{"iteration":' .. n .. ',"operator":' .. cjson.encode(op) .. ',"seeds":' .. seeds ..
  ',"new_pages":' .. new_pages .. ',"reward":' .. reward .. ',"plays":{' .. table.concat(plays, ',') ..
  '},"totals":{' .. table.concat(totals, ',') .. '}}'
redis.call('RPUSH', LOG, rec)
return rec
