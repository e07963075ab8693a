-- guardian: Distinct ops (store.Distinct), run after prelude.lua and before
-- the script's own text.
--
-- A distinct op's key, its index, holds "w:e,w:e,w:e,w:e,w:e": for each of
-- its five sub-window HyperLogLogs, the five keys after it in KEYS, slot j
-- holding window w when w % 5 == j, the window it holds and when it ends
-- (e, microseconds): when its window leaves, (w + 5) × step, or sooner
-- while only unconfirmed spends added to it (store's distinct.go). A slot
-- that holds nothing is "0". An index written before sub-windows had ends
-- of their own ("w,w,w,w,w") reads as slots that end when their window
-- leaves. The window counted is the current sub-window and the four
-- before it, the slots that have not ended. The index expires with its
-- last slot, each slot's key at its end. An Add settlement (distinctSettle)
-- and a ConfirmDistinct (distinctConfirm) are give-back entries on the
-- index followed by five entries "-" on its sub-windows.
--
-- A busy network's count. Counting merges the live sub-windows (PFCOUNT of
-- several keys), and the except key's, on every check: a few microseconds
-- while they hold a few members, hundreds once a network that thousands
-- share fills them. So a distinct op's seventh key, after its sub-windows,
-- remembers its count, "count:at", when the window held busyMembers or more
-- (its own members and except's together) and its check added no member
-- (distinctCounted, once the batch is decided): for countFor microseconds
-- of the store's clock after at, unless a check adds a member to its own
-- sub-windows (which forgets it), distinctOp reads that count instead of
-- merging again. The key is kept countKept, longer than it means anything,
-- so that a test's clock, not Redis's, decides. What the count may miss in
-- that second: a slot of its own or of the except key that leaves the
-- window or ends, members joining the except key (an Add settlement, which
-- forgets nothing: guardian adds only to except keys, whose count no op
-- reads), a window emptied under the count key (an eviction or a delete),
-- and what an instance running an earlier script added. A peek reads a
-- remembered count and remembers none.
local busyMembers, countFor, countKept = 256, 1000000, 10000000

-- emptyIndex is the index of a key that holds no sub-window.
local function emptyIndex()
  local slots = {}
  for s = 0, 4 do
    slots[s] = {w = 0, e = 0}
  end
  return slots
end

-- parseIndex reads the index v of sub-windows of step: a table of five
-- slots {w = window, e = end}, 0-based; nil when v is no index.
local function parseIndex(v, step)
  local slots, s = {}, 0
  for part in string.gmatch(v, '[^,]+') do
    local w, e = string.match(part, '^(%d+):?(%d*)$')
    if not w or s > 4 then
      return nil
    end
    w = tonumber(w)
    slots[s] = {w = w, e = tonumber(e) or (w + 5) * step}
    s = s + 1
  end
  if s ~= 5 then
    return nil
  end
  return slots
end

-- distinctIndex reads the index at key i of sub-windows of step: its
-- slots, and whether the key holds another kind's state (prelude.lua's
-- ruleState), which reads as empty; nil when the key holds something
-- else.
local function distinctIndex(i, step)
  local v = get(i)
  if not v then
    return emptyIndex()
  end
  local slots = parseIndex(v, step)
  if slots then
    return slots
  end
  if ruleState(v) then
    return emptyIndex(), true
  end
  return nil
end

-- distinctLive reports whether slot of the window ending with w is live.
local function distinctLive(slot, w)
  return slot.w > w - 5 and slot.w <= w and slot.w > 0 and slot.e > now
end

-- putIndex writes the index slots at key i, expiring with its last live
-- slot, or forgets it when none is live in window w.
local function putIndex(i, slots, w)
  local parts, last = {}, -1
  for s = 0, 4 do
    local slot = slots[s]
    if distinctLive(slot, w) then
      parts[s + 1] = int(slot.w) .. ':' .. int(slot.e)
      if slot.e > last then
        last = slot.e
      end
    else
      parts[s + 1] = '0'
    end
  end
  if last < 0 then
    forget(i)
    return
  end
  put(i, table.concat(parts, ','), last)
end

-- expireAt makes key k expire at e (microseconds, after now).
local function expireAt(k, e)
  redis.call('PEXPIRE', k, int(math.ceil((e - now) / 1000) + 1))
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

-- distinctRead reads the distinct key i of sub-windows of step: its window
-- number w, its slots, its live sub-window keys, when the first and the
-- last live slot ends (-1 for none), and whether the key holds another
-- kind's state (ruleState); nil when the key holds something else.
local function distinctRead(i, step)
  local d = { w = math.floor(now / step), first = -1, last = -1 }
  d.slots, d.other = distinctIndex(i, step)
  if not d.slots then
    return nil
  end
  d.live = {}
  for s = 0, 4 do
    local slot = d.slots[s]
    if distinctLive(slot, d.w) then
      d.live[#d.live + 1] = KEYS[i + 1 + s]
      if d.first < 0 or slot.e < d.first then
        d.first = slot.e
      end
      if slot.e > d.last then
        d.last = slot.e
      end
    end
  end
  return d
end

-- rememberedCount returns the count the count key at i remembers for now,
-- or nil.
local function rememberedCount(i)
  local v = get(i)
  local c, at = string.match(v or '', '^(%d+):(%d+)$')
  if c and tonumber(at) <= now and now < tonumber(at) + countFor then
    return tonumber(c)
  end
  return nil
end

-- distinctOp evaluates the distinct op at key i whose sub-windows are step
-- microseconds, not counting the members of the distinct key at except (nil
-- for none): distinctRead's table with the estimate of the live members
-- less except's (|own ∪ except| − |except|) as count, whether the count key
-- remembers it (remembered) and whether the window is busy enough to
-- remember it (busy); nil when a key holds something else. It writes
-- nothing.
local function distinctOp(i, step, except)
  local d = distinctRead(i, step)
  if not d then
    return nil
  end
  d.count = 0
  if #d.live == 0 then
    return d
  end
  local known = rememberedCount(i + 6)
  if known then
    d.count, d.remembered = known, true
    return d
  end
  local c = pfcount(d.live)
  if not c then
    return nil
  end
  d.count = c
  local seen = c
  if except then
    local other = distinctRead(except, step)
    if not other then
      return nil
    end
    if #other.live > 0 then
      local left = pfcount(other.live)
      local union = {}
      for _, k in ipairs(d.live) do
        union[#union + 1] = k
      end
      for _, k in ipairs(other.live) do
        union[#union + 1] = k
      end
      local both = left and pfcount(union)
      if not both then
        return nil
      end
      d.count, seen = math.max(both - left, 0), both
    end
  end
  d.busy = seen >= busyMembers
  return d
end

-- distinctCounted settles the count key of the distinct op at key i,
-- evaluated as d, once its batch is decided: a check that added a member
-- (added) forgets a remembered count, one that added none remembers a busy
-- window's.
local function distinctCounted(i, d, added)
  if added then
    if d.remembered then
      forget(i + 6)
    end
  elseif d.busy and not d.remembered then
    put(i + 6, int(d.count) .. ':' .. int(now), now + countKept)
  end
end

-- distinctAdd adds member to the current sub-window of the distinct op at
-- key i, evaluated as d, emptying the slot first when it holds an older
-- window or has ended. The slot ends at now + hold (never past its window;
-- hold 0: when its window leaves) unless it already ends no more than
-- hold/8 before that; it never ends sooner. The index is written only when
-- a slot's end changes, the slot's expiry then and whenever the
-- HyperLogLog changed (so that a slot evicted under the index comes back
-- with an expiry). It returns when the last live slot ends, and whether
-- the HyperLogLog changed.
local function distinctAdd(i, d, step, member, hold)
  local s = d.w % 5
  local key = KEYS[i + 1 + s]
  local slot = d.slots[s]
  local e = (d.w + 5) * step
  if hold > 0 and now + hold < e then
    e = now + hold
  end
  local changed = true
  if not distinctLive(slot, d.w) then
    redis.call('DEL', key)
    slot.w, slot.e = d.w, e
  elseif e - slot.e > math.floor(hold / 8) then
    slot.e = e
  else
    changed = false
  end
  local added = redis.call('PFADD', key, member) == 1
  if added or changed then
    expireAt(key, slot.e)
  end
  if changed then
    putIndex(i, d.slots, d.w)
  end
  return math.max(d.last, slot.e), added
end

-- distinctSettle applies an Add entry to the distinct key i, whose
-- sub-windows are the five keys after it, spec being "step:member": the
-- member joins its current sub-window, confirmed. It returns whether it
-- applied: a key that holds another kind's state is left alone.
distinctSettle = function(i, spec)
  local step, member = string.match(spec or '', '^(%d+):([%w_-]+)$')
  if not step then
    return nil, 'guardian: bad distinct entry'
  end
  step = tonumber(step)
  local d = distinctRead(i, step)
  if not d then
    return nil, 'guardian: bad distinct state'
  end
  if d.other then
    return false
  end
  distinctAdd(i, d, step, member, 0)
  return true
end

-- distinctConfirm applies a ConfirmDistinct entry to the distinct key i,
-- spec being its sub-windows' step: each live slot ends when its window
-- leaves. It returns whether it applied: a key that holds another kind's
-- state is left alone.
distinctConfirm = function(i, spec)
  local step = tonumber(spec)
  if not step then
    return nil, 'guardian: bad distinct entry'
  end
  local d = distinctRead(i, step)
  if not d then
    return nil, 'guardian: bad distinct state'
  end
  if d.other then
    return false
  end
  local changed = false
  for s = 0, 4 do
    local slot = d.slots[s]
    local e = (slot.w + 5) * step
    if distinctLive(slot, d.w) and slot.e < e then
      slot.e, changed = e, true
      expireAt(KEYS[i + 1 + s], e)
    end
  end
  if changed then
    putIndex(i, d.slots, d.w)
  end
  return true
end
