-- After sites.lua. Offer a site's verification once per crawl and note the query that found it.
-- A host known as an alias of a site counts for that site.
-- ARGV: site, entry, query ('' = none) -> 1 when new
local site, entry, query = ARGV[1], ARGV[2], ARGV[3]
local target = redis.call('HGET', ALIASES, site)
if target and target ~= site then
  site, entry = target, redis.call('HGET', ENTRIES, target) or entry
end
local new = redis.call('SADD', SEEN, 's|' .. site)
if new == 1 then
  redis.call('HSET', ENTRIES, site, entry)
  local id = redis.call('INCR', SEQ)
  redis.call('RPUSH', TASKS, cjson.encode({kind = 'site', site = site, entry = entry, id = id}))
  redis.call('HINCRBY', STATS, 'sites', 1)
end
if query ~= '' then
  local q = redis.call('HGET', FOUND_BY, site) or ''
  if not string.find('\n' .. q .. '\n', '\n' .. query .. '\n', 1, true) then
    if q == '' then q = query else q = q .. '\n' .. query end
    redis.call('HSET', FOUND_BY, site, q)
  end
end
return new
