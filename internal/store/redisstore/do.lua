-- guardian: evaluate a batch of limit ops and, in "do" mode, spend them.
-- When every hard enforced op fits, every enforced op that fits is spent
-- (soft ones too); when one does not, no enforced op is. A soft op never
-- denies the batch. Shadow ops are spent whenever they fit on their own.
-- Every time value is whole microseconds.
--
-- KEYS[i]      the key of op i (all share one cluster slot); ARGV[1] is the
--              time (see prelude.lua)
-- ARGV[base+1] "do" spends, "peek" only evaluates
-- ARGV[base+2+7(i-1)..]  op i: kind ("r" rate, "c" counter, "f"
--              familiar, see familiar.lua, "d" distinct, see distinct.lua,
--              followed by five "h" entries, its sub-windows, which reply
--              nothing; a rate, counter or distinct kind followed
--              by "+" counts only when the batch's familiar op found its
--              member, by "-" only when it did not), role ("enforce",
--              "toll", "soft" or "shadow"), cost, interval, burst (a
--              familiar or distinct op's member), limit, hold
--
-- A toll op is enforced and also spent, when every toll op of the batch
-- fits, even if another op denies the batch. A conditional op that does not count is skipped: it
-- fits, spends nothing and replies allowed alone.
--
-- A rate key holds its theoretical arrival time (TAT). A counter key holds
-- "count:deadline", the deadline being when the count is forgotten; a spend
-- keeps the later of that deadline and now + hold.
--
-- Reply: six integers per op: allowed, spent, remaining, retry after,
-- reset after, count.

local spend = ARGV[base + 1] == 'do'

-- The batch's familiar op, if it has one, decides its conditional ops.
local familiar, fams = false, {}
for i = 1, #KEYS do
  local a = base + 1 + (i - 1) * 7
  if ARGV[a + 1] == 'f' then
    fams[i] = familiarOp(i, ARGV[a + 5])
    familiar = fams[i].found
  end
end

local ops = {}
local all, tolls = true, true
for i = 1, #KEYS do
  local a = base + 1 + (i - 1) * 7
  local kind, cond = string.sub(ARGV[a + 1], 1, 1), string.sub(ARGV[a + 1], 2, 2)
  local o = {
    rate = kind == 'r',
    role = ARGV[a + 2],
    cost = tonumber(ARGV[a + 3]),
  }
  local v = false
  if kind == 'h' then
    o.sub = true
  elseif kind == 'f' then
    o.fam = fams[i]
  elseif (cond == '+' and not familiar) or (cond == '-' and familiar) then
    o.skip = true
  elseif kind == 'd' then
    o.step = tonumber(ARGV[a + 4])
    o.member = ARGV[a + 5]
    o.limit = tonumber(ARGV[a + 6])
    o.dist = distinctOp(i, o.step)
  else
    v = get(i)
  end
  if o.fam or o.skip or o.sub then
    o.fits = true
  elseif o.dist then
    o.fits = o.dist.count <= o.limit
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
  if (o.role == 'enforce' or o.role == 'toll') and not o.fits then
    all = false
    if o.role == 'toll' then
      tolls = false
    end
  end
  ops[i] = o
end

local out = {}
for i, o in ipairs(ops) do
  local spent = spend and o.fits and o.cost > 0 and not o.skip and not o.fam and not o.sub and
    (o.role == 'shadow' or (o.role == 'toll' and tolls) or all)
  local fits = o.fits
  local remaining, retry, reset, count = 0, 0, 0, 0
  if o.sub then
    -- a distinct op's sub-window: no reply of its own
  elseif o.dist then
    local d = o.dist
    local newest = d.newest
    if spent then
      newest = distinctAdd(i, d, o.step, o.member)
    end
    count = d.count
    remaining = o.limit - count
    if remaining < 0 then
      remaining = 0
    end
    if newest >= 0 then
      reset = (newest + 5) * o.step - now
    end
    if not fits and d.oldest >= 0 then
      retry = (d.oldest + 5) * o.step - now
    end
  elseif o.fam then
    fits = o.fam.found
    reset, count = o.fam.reset, o.fam.count
  elseif o.skip then
    -- skipped: allowed alone
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
  if not o.sub then
  local n = #out
  out[n + 1] = fits and 1 or 0
  out[n + 2] = spent and 1 or 0
  out[n + 3] = remaining
  out[n + 4] = retry
  out[n + 5] = reset
  out[n + 6] = count
  end
end
return out
