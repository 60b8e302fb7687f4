-- After frontier.lua. The annealing chains (topiccrawl.redis.annealing): the chain's state key
-- (the first of annealing.py's NAMES) and p(l) = R(l) read back from a member.
local STATE = KEYS[STRATEGY_KEYS]

-- take() -> the best queued member, out of the queue, and its priority p; defined by the chain's
-- file that comes next (sa.lua, fcsa.lua)
local take

-- R(l) from a member: undoes sortable_hex(-R) on its first 16 hex digits (exact, via struct)
local function rscore(m)
  local neg, b = tonumber(string.sub(m, 1, 1), 16) < 8, {}
  for i = 1, 8 do
    local x = tonumber(string.sub(m, 2 * i - 1, 2 * i), 16)
    if neg then x = 255 - x elseif i == 1 then x = x - 128 end
    b[i] = string.char(x)
  end
  return -struct.unpack('>d', table.concat(b))
end
