-- guardian: Distinct ops (store.Distinct), run after prelude.lua and before
-- the script's own text.
--
-- A distinct op's key holds "w1,w2,w3,w4,w5": the window number each of
-- its five sub-window HyperLogLogs holds (0 for none); the HyperLogLogs are
-- the five keys after it in KEYS, slot j holding window w when w % 5 == j.
-- The window counted is the current sub-window and the four before it.

-- distinctOp evaluates the distinct op at key i whose sub-windows are step
-- microseconds: its window number, the slots' windows, the estimate of the
-- live ones, and the oldest and newest live window (-1 for none); nil when
-- the key holds something else.
local function distinctOp(i, step)
  local d = { w = math.floor(now / step), windows = {}, count = 0, oldest = -1, newest = -1 }
  local v = get(i) or ''
  if v ~= '' and not string.match(v, '^%d+,%d+,%d+,%d+,%d+$') then
    return nil
  end
  local j = 0
  for n in string.gmatch(v, '(%d+)') do
    d.windows[j] = tonumber(n)
    j = j + 1
  end
  local live = {}
  for s = 0, 4 do
    local w = d.windows[s] or 0
    if w > d.w - 5 and w <= d.w and w > 0 then
      live[#live + 1] = KEYS[i + 1 + s]
      if d.oldest < 0 or w < d.oldest then
        d.oldest = w
      end
      if w > d.newest then
        d.newest = w
      end
    end
  end
  if #live > 0 then
    -- A sub-window that is not a HyperLogLog fails its batch alone; any
    -- other error (a command the ACL refuses) fails the call.
    local c = redis.pcall('PFCOUNT', unpack(live))
    if type(c) == 'table' and c.err then
      if string.find(c.err, 'WRONGTYPE', 1, true) or string.find(c.err, 'INVALIDOBJ', 1, true) then
        return nil
      end
      error(c)
    end
    d.count = c
  end
  return d
end

-- distinctAdd adds member to the current sub-window of the distinct op at
-- key i, evaluated as d, emptying the slot first when it holds an older
-- window. It returns the newest live window. The slot's expiry and the
-- index are written only when the slot starts a window: within one, both
-- stay as they are.
local function distinctAdd(i, d, step, member)
  local s = d.w % 5
  local key = KEYS[i + 1 + s]
  if d.windows[s] == d.w then
    redis.call('PFADD', key, member)
    return d.w
  end
  redis.call('DEL', key)
  d.windows[s] = d.w
  redis.call('PFADD', key, member)
  local deadline = (d.w + 5) * step
  redis.call('PEXPIRE', key, math.ceil((deadline - now) / 1000) + 1)
  local parts = {}
  for j = 0, 4 do
    parts[j + 1] = int(d.windows[j] or 0)
  end
  put(i, table.concat(parts, ','), deadline)
  return d.w
end
