-- guardian: evaluate a batch of limit ops and, in "do" mode, spend them.
-- When every hard enforced op fits, every enforced op that fits is spent
-- (soft ones too); when one does not, no enforced op is. A soft op never
-- denies the batch. Shadow ops are spent whenever they fit on their own.
-- Every time value is whole microseconds.
--
-- KEYS[i]      the key of op i (all share one cluster slot); ARGV[1] is the
--              time (see prelude.lua)
-- ARGV[base+1] "do" spends, "peek" only evaluates
-- ARGV[base+2+7(i-1)..]  op i: kind ("r" rate, "c" counter), role
--              ("enforce", "soft" or "shadow"), cost, interval, burst,
--              limit, hold; for kind "g" (guesses, at most one op) the
--              interval is the guess (16 hex digits) and the burst the
--              indexes of the ops a repeat of it does not spend,
--              comma-separated (see guessOp)
--
-- A rate key holds its theoretical arrival time (TAT). A counter key holds
-- "count:deadline", the deadline being when the count is forgotten; a spend
-- keeps the later of that deadline and now + hold.
--
-- Reply: six integers per op: allowed, spent, remaining, retry after,
-- reset after, count. A guesses op replies 1 as remaining when it found its
-- guess remembered, the guesses it found as count, and when the last of
-- them is forgotten as reset after.

local spend = ARGV[base + 1] == 'do'

-- waived holds the ops a remembered guess does not spend.
local waived = {}

-- guessOp evaluates a guesses op from ARGV at a and its key's value v: it
-- always fits, and when its guess is remembered the ops it names are
-- waived. It returns the op, or nil when v is not a guesses value.
local function guessOp(a, v)
  local o = {
    guess = ARGV[a + 4],
    role = ARGV[a + 2],
    cost = tonumber(ARGV[a + 3]),
    limit = tonumber(ARGV[a + 6]),
    hold = tonumber(ARGV[a + 7]),
    fits = true,
  }
  o.list = guessList(v)
  if not o.list then
    return nil
  end
  o.found = guessIndex(o.list, o.guess, o.limit) ~= nil
  if o.found then
    for j in string.gmatch(ARGV[a + 5], '%d+') do
      waived[tonumber(j)] = true
    end
  end
  return o
end

-- spendGuess records a guesses op's guess at key i as the most recent,
-- remembered for its hold at least (a later deadline it had stays),
-- keeping its limit of guesses and one more.
local function spendGuess(i, o)
  local d = now + o.hold
  local j = guessIndex(o.list, o.guess, #o.list)
  if j then
    if o.list[j].d > d then
      d = o.list[j].d
    end
    table.remove(o.list, j)
  end
  while #o.list > o.limit do
    table.remove(o.list, 1)
  end
  o.list[#o.list + 1] = {g = o.guess, d = d}
  putGuesses(i, o.list)
end

local ops = {}
local all = true
for i = 1, #KEYS do
  local a = base + 1 + (i - 1) * 7
  local o = {
    rate = ARGV[a + 1] == 'r',
    role = ARGV[a + 2],
    cost = tonumber(ARGV[a + 3]),
  }
  local v = get(i)
  if ARGV[a + 1] == 'g' then
    o = guessOp(a, v)
    if not o then
      return redis.error_reply('guardian: bad guesses state')
    end
  elseif o.rate then
    o.t = tonumber(ARGV[a + 4])
    o.burst = tonumber(ARGV[a + 5])
    o.tau = o.t * o.burst
    o.tat = now
    if v then
      local tat = tonumber(v)
      if not tat then
        return redis.error_reply('guardian: bad rate state')
      end
      if tat > now then
        o.tat = tat
      end
    end
    o.new = o.tat + o.cost * o.t
    o.fits = o.new - now <= o.tau
  else
    o.limit = tonumber(ARGV[a + 6])
    o.hold = tonumber(ARGV[a + 7])
    o.count = 0
    o.deadline = now
    if v then
      local c, d = counterState(v)
      if not c then
        return redis.error_reply('guardian: bad counter state')
      end
      if d > now then
        o.count, o.deadline = c, d
      end
    end
    o.fits = o.count + o.cost <= o.limit
  end
  if o.role == 'enforce' and not o.fits then
    all = false
  end
  ops[i] = o
end

local out = {}
for i, o in ipairs(ops) do
  local spent = spend and o.fits and o.cost > 0 and not waived[i] and (o.role == 'shadow' or all)
  local remaining, retry, reset, count = 0, 0, 0, 0
  if o.list then
    if o.found then
      remaining = 1
    end
    count = math.min(#o.list, o.limit)
    for _, e in ipairs(o.list) do
      if e.d - now > reset then
        reset = e.d - now
      end
    end
    if spent then
      spendGuess(i, o)
    end
  elseif o.rate then
    local tat = o.tat
    if spent then
      tat = o.new
      put(i, int(tat), tat)
    end
    remaining = math.floor((now + o.tau - tat) / o.t)
    if remaining < 0 then
      remaining = 0
    elseif remaining > o.burst then
      remaining = o.burst
    end
    if not o.fits then
      retry = o.new - now - o.tau
    end
    reset = tat - now
  else
    count = o.count
    local deadline = o.deadline
    if spent then
      count = o.count + o.cost
      if now + o.hold > deadline then
        deadline = now + o.hold
      end
      put(i, int(count) .. ':' .. int(deadline), deadline)
    end
    reset = deadline - now
    remaining = o.limit - count
    if remaining < 0 then
      remaining = 0
    end
  end
  local n = #out
  out[n + 1] = o.fits and 1 or 0
  out[n + 2] = spent and 1 or 0
  out[n + 3] = remaining
  out[n + 4] = retry
  out[n + 5] = reset
  out[n + 6] = count
end
return out
