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
--              limit and hold; a guesses op ("gs", at most one a batch)
--              has its guess (16 hex digits) as x and
--              "limit:hold:indexes" as y, the indexes (in the batch,
--              comma-separated) of the ops a repeat of it does not spend
--
-- A rate key holds its theoretical arrival time (TAT). A counter key holds
-- "count:deadline", the deadline being when the count is forgotten; a spend
-- keeps the later of that deadline and now + hold.
--
-- A guesses key holds an account's remembered guesses (see prelude.lua).
--
-- Reply: six integers per op, batch after batch: allowed, spent, remaining,
-- retry after, reset after, count. A guesses op replies 1 as remaining when
-- it found its guess remembered, the guesses it found as count, and when the
-- last of them is forgotten as reset after. A batch with a key whose value is not
-- guardian's state spends nothing and replies -1 for each of its integers,
-- so that the other batches of the call stand.

-- An op is a table: kind and role (the bytes of its code), cost, and the
-- kind's numbers x and y. Each kind is one branch of read, write and settle.
local RATE, COUNTER, GUESSES = string.byte('r'), string.byte('c'), string.byte('g')
local ENFORCE, SHADOW = string.byte('e'), string.byte('h')

-- readGuess fills a guesses op o from its key's value v: its list, whether
-- it found its guess, and the ops a repeat waives. It always fits; it
-- returns nil when v is not a guesses value.
local function readGuess(o, v)
  o.list = guessList(v)
  if not o.list then
    return nil
  end
  local limit, hold, free = string.match(o.ys, '^(%d+):(%d+):([%d,]*)$')
  if not limit then
    return nil
  end
  o.x, o.y = tonumber(limit), tonumber(hold)
  o.found = guessIndex(o.list, o.xs, o.x) ~= nil
  -- what the op replies: what it found, before any write
  o.count, o.reset = math.min(#o.list, o.x), 0
  for _, e in ipairs(o.list) do
    if e.d - now > o.reset then
      o.reset = e.d - now
    end
  end
  o.waives = {}
  if o.found then
    for j in string.gmatch(free, '%d+') do
      o.waives[tonumber(j)] = true
    end
  end
  return true
end

-- writeGuess records a guesses op's guess at key i as the most recent,
-- remembered for its hold at least (a later deadline it had stays),
-- keeping its limit of guesses and one more.
local function writeGuess(o, i)
  local d = now + o.y
  local j = guessIndex(o.list, o.xs, #o.list)
  if j then
    if o.list[j].d > d then
      d = o.list[j].d
    end
    table.remove(o.list, j)
  end
  while #o.list > o.x do
    table.remove(o.list, 1)
  end
  o.list[#o.list + 1] = {g = o.xs, d = d}
  putGuesses(i, o.list)
end

-- settleGuess returns what a guesses op found: 1 for its guess, how long
-- until the last guess is forgotten, and how many.
local function settleGuess(o)
  return o.found and 1 or 0, 0, o.reset, o.count
end

-- read fills o from its key's value v (false when absent) and returns
-- whether o's cost fits, or nil when v is not o's kind of state.
local function read(o, v)
  if o.kind == GUESSES then
    return readGuess(o, v)
  elseif o.kind == RATE then
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
  if o.kind == GUESSES then
    writeGuess(o, i)
  elseif o.kind == RATE then
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
  if o.kind == GUESSES then
    return settleGuess(o)
  elseif o.kind == RATE then
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
  -- the ops a remembered guess does not spend
  local waived = {}
  for j = 1, n do
    local kind, role = string.byte(ARGV[a], 1, 2)
    local o = {kind = kind, role = role, cost = tonumber(ARGV[a + 1]), x = tonumber(ARGV[a + 2]), y = tonumber(ARGV[a + 3])}
    if kind == GUESSES then
      o.xs, o.ys = ARGV[a + 2], ARGV[a + 3]
    end
    local fits = read(o, get(first + j - 1))
    if fits == nil then
      return false
    end
    o.fits = fits
    if role == ENFORCE and not fits then
      all = false
    end
    if o.waives then
      waived = o.waives
    end
    ops[j] = o
    a = a + 4
  end
  for j = 1, n do
    local o = ops[j]
    local spent = spend and o.fits and o.cost > 0 and not waived[j] and (o.role == SHADOW or all)
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
