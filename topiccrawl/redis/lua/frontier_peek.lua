-- After frontier.lua and the hooks. The queue head, not leased -> {member, data}, or {} when empty.
local head = redis.call('ZRANGE', REQUESTS, 0, 0)
if #head == 0 then return {} end
return {head[1], redis.call('HGET', DATA, head[1])}
