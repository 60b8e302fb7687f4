-- After frontier.lua and wl.lua. One WL decision and the lease of the chosen member.
-- ARGV: lease seconds, budget, worker, stage rule, visited, lnf floor, lnf min, max steps, T,
--       max rejections, uniforms... (2 per proposal: roulette, acceptance)
-- -> {1, dp, reclaimed, queued, member, json, uniforms used, start|accepted|forced}
--    or {0 (empty) | -1 (budget), dp, reclaimed, queued}
local seconds, budget, worker = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local now, expired, dp = reclaim()
if over_budget(dp, budget) then return {-1, dp, #expired, redis.call('ZCARD', REQUESTS)} end
if redis.call('ZCARD', REQUESTS) == 0 then return {0, dp, #expired, 0} end
local rule, visited = ARGV[4], ARGV[5]
local lnf_floor, lnf_min, max_steps, T, max_rej =
  tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local st = {}
local raw = redis.call('HGETALL', S)
for i = 1, #raw, 2 do st[raw[i]] = raw[i + 1] end
local lnf, x1 = tonumber(st.lnf), st.x1
local steps, stage, mrej = tonumber(st.steps or '0'), tonumber(st.stage or '0'), tonumber(st.m or '0')
local accepted, rejected = tonumber(st.accepted or '0'), tonumber(st.rejected or '0')
local forced = tonumber(st.forced or '0')
local frozen, inv_t = st.frozen == '1', st.inv_t == '1'
local used = 0  -- the uniforms are ARGV[11] onwards
local function uniform() used = used + 1; return tonumber(ARGV[10 + used]) end
local function lng(b) return tonumber(redis.call('HGET', LNG, b) or '0') end
local function setlng(b, x) redis.call('HSET', LNG, b, string.format('%.17g', x)) end
local function enter(b)
  if redis.call('HEXISTS', LNG, b) == 0 then redis.call('HSET', LNG, b, '0'); redis.call('HSET', HIST, b, 1) end
end
local function stage_done()
  local h = {}
  if visited == 'stage' then
    for _, x in ipairs(redis.call('HVALS', HIST)) do if tonumber(x) > 0 then h[#h + 1] = tonumber(x) end end
  else
    for _, b in ipairs(redis.call('HKEYS', LNG)) do
      if visited == 'ever' or tonumber(redis.call('HGET', QUEUED, b) or '0') > 0 then
        h[#h + 1] = tonumber(redis.call('HGET', HIST, b) or '0')
      end
    end
  end
  if #h == 0 then return false end
  local low, sum = math.huge, 0
  for _, x in ipairs(h) do low = math.min(low, x); sum = sum + x end
  if low <= 0 then return false end
  if rule == 'paper' then return low >= math.log(2) / lnf end
  if rule == 'flat' then return low >= 0.8 * sum / #h end
  if rule == 'zhou-bhatt' then return low >= 1.0 / math.sqrt(lnf) end
  return low >= 1
end
local function step()
  steps = steps + 1
  if frozen then return end
  if inv_t then
    lnf = math.max(redis.call('HLEN', LNG) / steps, lnf_floor)
  elseif steps % T == 0 and stage_done() then
    redis.call('RPUSH', STAGES, steps .. '|' .. redis.call('HLEN', LNG) .. '|' .. string.format('%.17g', lnf))
    lnf = math.max(lnf / 2, lnf_floor)
    stage = stage + 1
    redis.call('DEL', HIST)
    if rule == 'one-over-t' and lnf <= redis.call('HLEN', LNG) / steps then inv_t = true end
  end
  if steps > max_steps or lnf < lnf_min then frozen = true end
end
local function top() return redis.call('ZRANGE', REQUESTS, 0, 0)[1] end
local function move(e)
  local _, _, b = info(e)
  enter(b)
  setlng(b, lng(b) + lnf)
  redis.call('HINCRBY', HIST, b, 1)
  x1 = b
  mrej = 0
  step()
  return e
end
local m, kind
if not x1 then
  m, kind = top(), 'start'
  local _, _, b = info(m)
  enter(b)
  x1 = b
else
  while true do
    local d = tostring(tonumber(redis.call('ZRANGE', DMEAN, 0, 0)[1]))
    local total = tonumber(redis.call('HGET', DSUM, d))
    local n = tonumber(redis.call('HGET', DCOUNT, d))
    local u, pos, bstep = math.min(math.floor(uniform() * total), total - 1), 0, 1
    while bstep * 2 <= n do bstep = bstep * 2 end
    while bstep >= 1 do
      local t = pos + bstep <= n and node(d, pos + bstep) or nil
      if t and t <= u then pos = pos + bstep; u = u - t end
      bstep = bstep / 2
    end
    local e = redis.call('HGET', SLOT, d .. ':' .. pos)
    local _, _, b = info(e)
    enter(b)
    if math.log(1.0 - uniform()) <= lng(x1) - lng(b) then
      accepted = accepted + 1
      m, kind = move(e), 'accepted'
      break
    end
    setlng(x1, lng(x1) + lnf)
    redis.call('HINCRBY', HIST, x1, 1)
    rejected = rejected + 1
    mrej = mrej + 1
    step()
    if mrej >= max_rej then
      forced = forced + 1
      m, kind = move(top()), 'forced'
      break
    end
  end
end
local _, _, fb = info(m)
unqueue(m)
redis.call('HINCRBY', FETCH, fb, 1)
redis.call('HSET', S, 'lnf', string.format('%.17g', lnf), 'x1', x1, 'steps', steps, 'stage', stage, 'm', mrej,
  'accepted', accepted, 'rejected', rejected, 'forced', forced, 'frozen', frozen and 1 or 0, 'inv_t', inv_t and 1 or 0)
lease(LEASES, OWNERS, m, worker, seconds, now)
return {1, dp, #expired, redis.call('ZCARD', REQUESTS), m, redis.call('HGET', DATA, m), used, kind}
