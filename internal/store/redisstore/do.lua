-- guardian: evaluate batches of limit ops and, in "do" mode, spend them.
-- One call carries one check's batch or several (group commit); each batch
-- is decided on its own, in order, so a later batch sees what an earlier
-- one spent. Within a batch: when every hard enforced op fits, every
-- enforced op that fits is spent (soft ones too); when one does not, no
-- enforced op is, but a toll op is still spent when every toll op of the
-- batch fits. A soft op never denies its batch. Shadow ops are spent
-- whenever they fit on their own. Every time value is whole microseconds.
--
-- KEYS         the keys of every batch's ops, batch after batch (all share
--              one cluster slot); a distinct op has seven, its own, its
--              five sub-windows' and its count's (distinct.lua); ARGV[1] is
--              the time (see prelude.lua)
-- ARGV[base+1] how many batches follow; then each batch:
--   mode       "do" spends, "peek" only evaluates, "once" is a report's
--              mark (below)
--   n          how many ops
--   per op     code, cost, then the kind's two arguments x and y, and a
--              distinct op's member after them. The code is the kind ("r"
--              rate, "c" counter, "a" a counter whose spend is attributed
--              to the member after its arguments, "f" familiar, see
--              familiar.lua, "d" distinct, "x" distinct not counting the
--              members of another distinct key, whose six keys follow its
--              own seven), the role ("e" enforce, "t" toll, "s" soft, "h"
--              shadow) and, for an op that counts only when the batch's
--              familiar op found its member, "+", or only when it did not,
--              "-". x and y are a rate's interval and burst, a counter's
--              limit and hold, a distinct op's sub-window and limit, and a
--              familiar op's member and 0; a distinct op's member is
--              followed by its hold (0: the window). A guesses op ("gs", at
--              most one a batch, never conditional) has its guess (16 hex
--              digits) as x and "limit:hold:indexes:allowance" as y, the
--              indexes (in the batch, comma-separated) of the ops a repeat
--              of it does not spend, and the index of the batch's allowance
--              of free repeats (0: none): a repeat is free only while it
--              fits, and only a free repeat spends it.
--
-- A "once" batch is a report that found the store busy (Store.MarkOnce):
-- its n is how many give-back entries follow its mark, its keys are the
-- mark's and the entries', and its arguments the mark's ttl and each
-- entry's how and amount, as once.lua takes them (markOnce in
-- prelude.lua).
--
-- The familiar op of a batch, if it has one, is read first: it decides the
-- batch's conditional ops. One that does not count is skipped: it fits,
-- spends nothing and replies allowed alone. The familiar op itself spends
-- nothing and replies allowed when it found its member.
--
-- A rate key holds its theoretical arrival time (TAT). A counter key holds
-- "count:deadline", the deadline being when the count is forgotten, and its
-- attribution (prelude.lua); a spend keeps the later of that deadline and
-- now + hold.
--
-- A guesses key holds an account's remembered guesses (see prelude.lua).
--
-- Reply: six integers per op, batch after batch: allowed, spent,
-- remaining, retry after, reset after, count; a "once" batch one, 1 when it
-- set its mark and applied its entries, 0 when the mark was set, -1 when an
-- entry could not be applied (giveBack's error; the mark is then set and
-- the entries before it applied: a "once" batch is not all-or-nothing). A
-- guesses op replies 1 as remaining when it found its guess remembered and
-- free, 2 when the allowance capped it, the guesses it found as count, and
-- when the last of them is forgotten as reset after. A key that holds
-- another kind's state (its rule changed type under the same name,
-- prelude.lua's ruleState) reads as absent. A
-- batch with a key whose value is not guardian's state spends nothing and
-- replies -1 for each of its integers, so that the other batches of the
-- call stand.

-- An op is a table: kind, role and condition (the bytes of its code), its
-- first key k, cost, and the kind's arguments. Each kind is one branch of
-- read, write and settle.
-- The bytes are written out: a library's code outside its functions may
-- not call string.byte.
local RATE, COUNTER, ATTRIBUTED, FAMILIAR, DISTINCT, EXCEPT, GUESSES = 114, 99, 97, 102, 100, 120, 103 -- r c a f d x g
local ENFORCE, TOLL, SHADOW = 101, 116, 104 -- e t h
local IF_FAMILIAR, IF_UNFAMILIAR = 43, 45 -- + -

-- readGuess fills a guesses op o from its key's state: its list, whether
-- it found its guess, and the ops a repeat waives. It always fits; it
-- returns nil when the state is not a guesses value.
local function readGuess(o)
  o.list = guessList(get(o.k))
  if not o.list then
    return nil
  end
  local limit, hold, free, allow = string.match(o.ys, '^(%d+):(%d+):([%d,]*):(%d+)$')
  if not limit then
    return nil
  end
  o.allow = tonumber(allow)
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

-- writeGuess records a guesses op's guess as the most recent, remembered
-- for its hold at least (a later deadline it had stays), keeping its limit
-- of guesses and one more.
local function writeGuess(o)
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
  putGuesses(o.k, o.list)
end

-- read fills o from its key's state and returns whether o's cost fits, or
-- nil when the state is not o's kind of state.
local function read(o)
  if o.kind == GUESSES then
    return readGuess(o)
  elseif o.kind == RATE then
    o.tau = o.x * o.y
    o.tat = now
    local v = get(o.k)
    local tat = v and tonumber(v)
    if v and not tat and not ruleState(v) then
      return nil
    end
    if tat and tat > now then
      o.tat = tat
    end
    o.new = o.tat + o.cost * o.x
    return o.new - now <= o.tau
  elseif o.kind == COUNTER then
    o.count, o.deadline = 0, now
    local v = get(o.k)
    local c, d, rest
    if v then
      c, d, rest = counterState(v)
    end
    if v and not c and not ruleState(v) then
      return nil
    end
    if c and d > now then
      o.count, o.deadline, o.rest = c, d, rest
    end
    return o.count + o.cost <= o.x
  elseif o.kind == DISTINCT then
    o.dist = distinctOp(o.k, o.x, o.except)
    if not o.dist then
      return nil
    end
    o.last = o.dist.last
    return o.dist.count <= o.y
  end
  return nil
end

-- write spends o.
local function write(o)
  if o.kind == GUESSES then
    writeGuess(o)
  elseif o.kind == RATE then
    o.tat = o.new
    put(o.k, int(o.tat), o.tat)
  elseif o.kind == COUNTER then
    o.count = o.count + o.cost
    if now + o.y > o.deadline then
      o.deadline = now + o.y
    end
    local rest = o.rest or ''
    if o.member then
      rest = attrWith(rest, o.member, o.cost)
    end
    put(o.k, string.format('%d:%d', o.count, o.deadline) .. rest, o.deadline)
  else
    o.last, o.added = distinctAdd(o.k, o.dist, o.x, o.member, o.hold)
  end
end

-- settle returns o's remaining units, retry after, reset after and count.
local function settle(o)
  if o.kind == GUESSES then
    -- what it found: 1 for its guess, how long until the last guess is
    -- forgotten, and how many
    return o.found and 1 or (o.capped and 2 or 0), 0, o.reset, o.count
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
  elseif o.kind == DISTINCT then
    local d = o.dist
    local remaining = math.max(o.y - d.count, 0)
    local retry, reset = 0, 0
    if o.last >= 0 then
      reset = o.last - now
    end
    if not o.fits and d.first >= 0 then
      retry = d.first - now
    end
    return remaining, retry, reset, d.count
  end
  local remaining = o.x - o.count
  if remaining < 0 then
    remaining = 0
  end
  return remaining, 0, o.deadline - now, o.count
end

-- parse reads the n ops of a batch, its keys from KEYS[k] and arguments
-- from ARGV[a], and returns them with the key and argument after them.
local function parse(k, a, n)
  local ops = {}
  for j = 1, n do
    local kind, role, cond = string.byte(ARGV[a], 1, 3)
    local o = {kind = kind, role = role, cond = cond, k = k, cost = tonumber(ARGV[a + 1])}
    if kind == FAMILIAR then
      o.member = ARGV[a + 2]
    elseif kind == GUESSES then
      o.xs, o.ys = ARGV[a + 2], ARGV[a + 3]
    else
      o.x, o.y = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    end
    a, k = a + 4, k + 1
    if kind == DISTINCT then
      o.member, o.hold = ARGV[a], tonumber(ARGV[a + 1])
      a, k = a + 2, k + 6
    elseif kind == EXCEPT then
      o.kind, o.member, o.hold, o.except = DISTINCT, ARGV[a], tonumber(ARGV[a + 1]), k + 6
      a, k = a + 2, k + 12
    elseif kind == ATTRIBUTED then
      o.kind, o.member = COUNTER, ARGV[a]
      a = a + 1
    end
    ops[j] = o
  end
  return ops, k, a
end

-- out is the call's reply.
local out

-- reply appends one op's six integers to out.
local function reply(fits, spent, remaining, retry, reset, count)
  local m = #out
  out[m + 1] = fits and 1 or 0
  out[m + 2] = spent and 1 or 0
  out[m + 3] = remaining
  out[m + 4] = retry
  out[m + 5] = reset
  out[m + 6] = count
end

-- batch decides ops and appends their replies to out. It reads every op
-- before it writes any, and returns false, having written nothing, when a
-- key's state cannot be read.
local function batch(spend, ops)
  local familiar = false
  for _, o in ipairs(ops) do
    if o.kind == FAMILIAR then
      o.fam = familiarOp(o.k, o.member)
      if not o.fam then
        return false
      end
      familiar = o.fam.found
    end
  end
  local all, tolls = true, true
  -- the ops a remembered guess does not spend
  local waived = {}
  local guess
  for _, o in ipairs(ops) do
    if o.kind == FAMILIAR then
      o.fits = true
    elseif (o.cond == IF_FAMILIAR and not familiar) or (o.cond == IF_UNFAMILIAR and familiar) then
      o.skip, o.fits = true, true
    else
      local fits = read(o)
      if fits == nil then
        return false
      end
      o.fits = fits
      if o.waives then
        waived = o.waives
      end
      if o.kind == GUESSES then
        guess = o
      end
      if not fits and o.role == ENFORCE then
        all = false
      elseif not fits and o.role == TOLL then
        all, tolls = false, false
      end
    end
  end
  -- the allowance of free repeats: a repeat is free only while it fits,
  -- and only a free repeat spends it
  if guess and guess.allow > 0 then
    if guess.found and not ops[guess.allow].fits then
      guess.found, guess.capped, waived = false, true, {}
    end
    if not guess.found then
      waived[guess.allow] = true
    end
  end
  for j, o in ipairs(ops) do
    if o.fam then
      reply(o.fam.found, false, 0, 0, o.fam.reset, o.fam.count)
    elseif o.skip then
      reply(true, false, 0, 0, 0, 0)
    else
      local spent = spend and o.fits and o.cost > 0 and not waived[j] and
        (o.role == SHADOW or all or (o.role == TOLL and tolls))
      if spent then
        write(o)
      end
      if spend and o.dist then
        distinctCounted(o.k, o.dist, o.added)
      end
      reply(o.fits, spent, settle(o))
    end
  end
  return true
end

-- main runs a call of the do script, keys and args its KEYS and ARGV.
local function main(keys, args)
  begin(keys, args)
  out = {}
  local a = base + 2
  local first = 1
  for _ = 1, tonumber(ARGV[base + 1]) do
    local n = tonumber(ARGV[a + 1])
    if ARGV[a] == 'once' then
      out[#out + 1] = markOnce(first, first + n, a + 2)
      first, a = first + 1 + n, a + 3 + 2 * n
    else
      local ops, k, after = parse(first, a + 2, n)
      if not batch(ARGV[a] == 'do', ops) then
        for _ = 1, 6 * n do
          out[#out + 1] = -1
        end
      end
      first, a = k, after
    end
  end
  return out
end
