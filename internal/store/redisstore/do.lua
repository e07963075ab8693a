-- guardian: evaluate batches of limit ops and, in "do" mode, spend them.
-- One call carries one check's batch or several (group commit); each batch
-- is decided on its own, in order, so a later batch sees what an earlier
-- one spent. Within a batch: when every hard enforced op fits, every
-- enforced op that fits is spent (soft ones too); when one does not, no
-- enforced op is. A soft op never denies its batch. Shadow ops are spent
-- whenever they fit on their own. Every time value is whole microseconds.
--
-- KEYS         the keys of every batch's ops, batch after batch (all share
--              one cluster slot); ARGV[1] is the time (see prelude.lua)
-- ARGV[base+1] how many batches follow; then each batch:
--   mode       "do" spends, "peek" only evaluates
--   n          how many ops
--   4 per op   code (kind and role: "r" rate or "c" counter, then "e"
--              enforce, "s" soft or "h" shadow), cost, then the kind's two
--              numbers x and y: a rate's interval and burst, a counter's
--              limit and hold
--
-- A rate key holds its theoretical arrival time (TAT). A counter key holds
-- "count:deadline", the deadline being when the count is forgotten; a spend
-- keeps the later of that deadline and now + hold.
--
-- Reply: six integers per op, batch after batch: allowed, spent, remaining,
-- retry after, reset after, count. A batch with a key whose value is not
-- guardian's state spends nothing and replies -1 for each of its integers,
-- so that the other batches of the call stand.

-- An op is a table: kind and role (the bytes of its code), cost, and the
-- kind's numbers x and y. Each kind is one branch of read, write and settle.
local RATE, COUNTER = string.byte('r'), string.byte('c')
local ENFORCE, SHADOW = string.byte('e'), string.byte('h')

-- read fills o from its key's value v (false when absent) and returns
-- whether o's cost fits, or nil when v is not o's kind of state.
local function read(o, v)
  if o.kind == RATE then
    o.tau = o.x * o.y
    o.tat = now
    if v then
      local tat = tonumber(v)
      if not tat then
        return nil
      end
      if tat > now then
        o.tat = tat
      end
    end
    o.new = o.tat + o.cost * o.x
    return o.new - now <= o.tau
  elseif o.kind == COUNTER then
    o.count, o.deadline = 0, now
    if v then
      local c, d = counterState(v)
      if not c then
        return nil
      end
      if d > now then
        o.count, o.deadline = c, d
      end
    end
    return o.count + o.cost <= o.x
  end
  return nil
end

-- write spends o on key i.
local function write(o, i)
  if o.kind == RATE then
    o.tat = o.new
    put(i, int(o.tat), o.tat)
  else
    o.count = o.count + o.cost
    if now + o.y > o.deadline then
      o.deadline = now + o.y
    end
    put(i, string.format('%d:%d', o.count, o.deadline), o.deadline)
  end
end

-- settle returns o's remaining units, retry after, reset after and count.
local function settle(o)
  if o.kind == RATE then
    local remaining = math.floor((now + o.tau - o.tat) / o.x)
    if remaining < 0 then
      remaining = 0
    elseif remaining > o.y then
      remaining = o.y
    end
    local retry = 0
    if not o.fits then
      retry = o.new - now - o.tau
    end
    return remaining, retry, o.tat - now, 0
  end
  local remaining = o.x - o.count
  if remaining < 0 then
    remaining = 0
  end
  return remaining, 0, o.deadline - now, o.count
end

local out = {}

-- batch decides the n ops of one batch, keys from KEYS[first] and
-- arguments from ARGV[a], and appends their replies to out. It reads every
-- op before it writes any, and returns false, having written nothing, when
-- a key's state cannot be read.
local function batch(spend, first, a, n)
  local ops = {}
  local all = true
  for j = 1, n do
    local kind, role = string.byte(ARGV[a], 1, 2)
    local o = {kind = kind, role = role, cost = tonumber(ARGV[a + 1]), x = tonumber(ARGV[a + 2]), y = tonumber(ARGV[a + 3])}
    local fits = read(o, get(first + j - 1))
    if fits == nil then
      return false
    end
    o.fits = fits
    if role == ENFORCE and not fits then
      all = false
    end
    ops[j] = o
    a = a + 4
  end
  for j = 1, n do
    local o = ops[j]
    local spent = spend and o.fits and o.cost > 0 and (o.role == SHADOW or all)
    if spent then
      write(o, first + j - 1)
    end
    local remaining, retry, reset, count = settle(o)
    local m = #out
    out[m + 1] = o.fits and 1 or 0
    out[m + 2] = spent and 1 or 0
    out[m + 3] = remaining
    out[m + 4] = retry
    out[m + 5] = reset
    out[m + 6] = count
  end
  return true
end

local a = base + 2
local first = 1
for _ = 1, tonumber(ARGV[base + 1]) do
  local n = tonumber(ARGV[a + 1])
  if not batch(ARGV[a] == 'do', first, a + 2, n) then
    for _ = 1, 6 * n do
      out[#out + 1] = -1
    end
  end
  first = first + n
  a = a + 2 + 4 * n
end
return out
