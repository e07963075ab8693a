-- guardian: Distinct ops (store.Distinct), run after prelude.lua and before
-- the script's own text.
--
-- A distinct op's key holds "w1,w2,w3,w4,w5": the window number each of
-- its five sub-window HyperLogLogs holds (0 for none); the HyperLogLogs are
-- the five keys after it in KEYS, slot j holding window w when w % 5 == j.
-- The window counted is the current sub-window and the four before it. An
-- Add settlement (distinctSettle) is a give-back entry on the key followed
-- by five entries "-" on its sub-windows.

-- distinctLive returns the live sub-window keys of the distinct key i in
-- window w, its slots' windows, and the oldest and newest live window (-1
-- for none); nil when the key holds something else.
local function distinctLive(i, w)
  local v = get(i) or ''
  if v ~= '' and not string.match(v, '^%d+,%d+,%d+,%d+,%d+$') then
    return nil
  end
  local windows, live, oldest, newest = {}, {}, -1, -1
  local j = 0
  for n in string.gmatch(v, '(%d+)') do
    windows[j] = tonumber(n)
    j = j + 1
  end
  for s = 0, 4 do
    local sw = windows[s] or 0
    if sw > w - 5 and sw <= w and sw > 0 then
      live[#live + 1] = KEYS[i + 1 + s]
      if oldest < 0 or sw < oldest then
        oldest = sw
      end
      if sw > newest then
        newest = sw
      end
    end
  end
  return live, windows, oldest, newest
end

-- pfcount estimates the members of keys; nil when one is not a
-- HyperLogLog (its batch fails alone); any other error (a command the ACL
-- refuses) fails the call.
local function pfcount(keys)
  local c = redis.pcall('PFCOUNT', unpack(keys))
  if type(c) == 'table' and c.err then
    if string.find(c.err, 'WRONGTYPE', 1, true) or string.find(c.err, 'INVALIDOBJ', 1, true) then
      return nil
    end
    error(c)
  end
  return c
end

-- distinctOp evaluates the distinct op at key i whose sub-windows are step
-- microseconds, not counting the members of the distinct key at except (nil
-- for none): its window number, the slots' windows, the estimate of the
-- live ones less except's (|own ∪ except| − |except|), and the oldest and
-- newest live window (-1 for none); nil when a key holds something else.
local function distinctOp(i, step, except)
  local d = { w = math.floor(now / step), count = 0 }
  local live
  live, d.windows, d.oldest, d.newest = distinctLive(i, d.w)
  if not live then
    return nil
  end
  if #live == 0 then
    return d
  end
  local c = pfcount(live)
  if not c then
    return nil
  end
  d.count = c
  if not except then
    return d
  end
  local other = distinctLive(except, d.w)
  if not other then
    return nil
  end
  if #other == 0 then
    return d
  end
  local left = pfcount(other)
  for _, k in ipairs(other) do
    live[#live + 1] = k
  end
  local union = left and pfcount(live)
  if not union then
    return nil
  end
  d.count = math.max(union - left, 0)
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

-- distinctSettle applies an Add entry to the distinct key i, whose
-- sub-windows are the five keys after it, spec being "step:member": the
-- member joins its current sub-window.
distinctSettle = function(i, spec)
  local step, member = string.match(spec or '', '^(%d+):([%w_-]+)$')
  if not step then
    return nil, 'guardian: bad distinct entry'
  end
  step = tonumber(step)
  local d = distinctOp(i, step, nil)
  if not d then
    return nil, 'guardian: bad distinct state'
  end
  distinctAdd(i, d, step, member)
  return true
end
