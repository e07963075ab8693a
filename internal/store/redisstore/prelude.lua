-- guardian: what every script shares, run before the script's own text.
--
-- Every store key is a Redis key of its own: a plain string whose value ends
-- in its deadline, in microseconds, after which it means nothing. A rate
-- value is its arrival time (which is its deadline), a counter
-- "count:deadline", a mark its deadline. Each write sets the key's expiry
-- (PX) just past that deadline (a mark's later, see markOnce), so idle
-- state leaves Redis on its own, and no script reads a TTL: the deadline in
-- the value decides, by the same clock as every limit (a test's override
-- included). Under maxmemory with
-- volatile-ttl, Redis evicts the keys that expire soonest first, which are
-- the least confirmed: unconfirmed state is short-lived, and a count is held
-- longer the higher it is.
--
-- ARGV[1]      the time; empty reads the store's own TIME (tests override it)
-- ARGV[base+k] the script's own arguments, k from 1
--
-- The same text is a script (EVAL) and, for the do script, a library of
-- Redis functions (FUNCTION LOAD, redisstore's functions.go), whose code
-- outside its functions runs once, when it is loaded: that code only
-- defines, and each call begins with begin(keys, args). KEYS and ARGV are
-- the call's keys and arguments from then on, as the script's own are. A
-- script's text starts with "local callKeys, callArgs = KEYS, ARGV"
-- (redisstore.go's scriptHead), its keys and arguments before the locals
-- below hide them, and begins with begin(callKeys, callArgs).

local KEYS, ARGV, now
local base = 1

-- begin starts a call of keys and args: it reads the time.
local function begin(keys, args)
  KEYS, ARGV = keys, args
  if ARGV[1] == '' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  else
    now = tonumber(ARGV[1])
  end
end

local function int(x)
  return string.format('%d', x)
end

-- get returns the value of key i, or false.
local function get(i)
  return redis.call('GET', KEYS[i])
end

-- put sets key i to v, expiring at d (microseconds, after now): its
-- deadline, or for a mark later (markOnce). PX is whole milliseconds: one
-- more keeps the expiry strictly past d. Numbers reach redis.call as
-- strings made here: it would print them with %.17g, which costs Redis
-- about twice what %d does.
local function put(i, v, d)
  redis.call('SET', KEYS[i], v, 'PX', int(math.ceil((d - now) / 1000) + 1))
end

-- forget removes key i; it replies 1 when it was there.
local function forget(i)
  return redis.call('DEL', KEYS[i])
end

-- counterState parses a counter value: its count, its deadline and its
-- attribution (below), or nil. A counter value is "count:deadline" and
-- then, for each member its units are attributed to, " member=units", the
-- most recent last (store.MaxAttributed of them at most).
local function counterState(v)
  local c, d, rest = string.match(v, '^(%d+):(%d+)(.*)$')
  if not c or string.gsub(rest, ' [%w_-]+=%d+', '') ~= '' then
    return nil
  end
  return tonumber(c), tonumber(d), rest
end

-- indexPattern matches a distinct op's index (distinct.lua): five parts,
-- each a window and, since sub-windows have ends of their own, ":end".
local indexPattern = '^%d+:?%d*,%d+:?%d*,%d+:?%d*,%d+:?%d*,%d+:?%d*$'

-- ruleState reports whether v is the state of a rate, counter or distinct
-- op: a rate's arrival time, a counter's value or a distinct index. An op
-- that cannot read v as its own kind's state and finds it one of these
-- has the key of a rule that changed type under the same name: it reads
-- the key as absent and a spend replaces it, while a settlement, which
-- settles by the rule its check was decided by, leaves it alone. Anything
-- else is not guardian's state.
local function ruleState(v)
  return string.find(v, '^%d+$') ~= nil or counterState(v) ~= nil or string.find(v, indexPattern) ~= nil
end

-- attrWith returns the attribution rest with units more attributed to
-- member, now the most recent; the least recent beyond 8 is forgotten, its
-- units staying counted.
local function attrWith(rest, member, units)
  local list = {}
  for m, u in string.gmatch(rest, ' ([%w_-]+)=(%d+)') do
    if m == member then
      units = units + tonumber(u)
    else
      list[#list + 1] = ' ' .. m .. '=' .. u
    end
  end
  if #list >= 8 then
    table.remove(list, 1)
  end
  list[#list + 1] = ' ' .. member .. '=' .. int(units)
  return table.concat(list)
end

-- attrWithout returns the attribution rest without member, and the units
-- it had (0 when none).
local function attrWithout(rest, member)
  local list, units = {}, 0
  for m, u in string.gmatch(rest, ' ([%w_-]+)=(%d+)') do
    if m == member then
      units = tonumber(u)
    else
      list[#list + 1] = ' ' .. m .. '=' .. u
    end
  end
  return table.concat(list), units
end

-- putCounter stores count c, deadline d and attribution rest at key i, or
-- forgets the key when c is not positive or d has passed.
local function putCounter(i, c, d, rest)
  if c <= 0 or d <= now then
    forget(i)
  else
    put(i, int(c) .. ':' .. int(d) .. rest, d)
  end
end

-- Guesses. A Guesses key holds an account's remembered guesses, oldest
-- first: "guess:deadline guess:deadline ...", each guess 16 hex digits (a
-- keyed hash, never a secret), each deadline when it is forgotten. The
-- latest deadline is the key's own. A key remembers its op's limit of guesses, the
-- most recent, and keeps one more: on a Redis Cluster, a guess that another
-- slot's rule denied is forgotten again ("g" below), and the one it pushed
-- out is remembered again as if it had never been.

-- guessList parses a Guesses value (false: none) into the guesses still
-- remembered at now, oldest first, or nil when it is not one.
local function guessList(v)
  local list = {}
  if not v then
    return list
  end
  for item in string.gmatch(v, '[^ ]+') do
    local g, d = string.match(item, '^(%x+):(%d+)$')
    if not g then
      return nil
    end
    d = tonumber(d)
    if d > now then
      list[#list + 1] = {g = g, d = d}
    end
  end
  return list
end

-- guessIndex returns the index of guess g among the last n of list, or
-- nil.
local function guessIndex(list, g, n)
  for j = math.max(#list - n + 1, 1), #list do
    if list[j].g == g then
      return j
    end
  end
  return nil
end

-- putGuesses stores list at key i, or forgets the key when it is empty.
local function putGuesses(i, list)
  if #list == 0 then
    forget(i)
    return
  end
  local parts = {}
  local last = now
  for j, e in ipairs(list) do
    parts[j] = e.g .. ':' .. int(e.d)
    if e.d > last then
      last = e.d
    end
  end
  put(i, table.concat(parts, ' '), last)
end

-- familiarAdd is familiar.lua's: it applies a familiar give-back entry.
local familiarAdd

-- distinctSettle and distinctConfirm are distinct.lua's: they apply a
-- distinct give-back entry, an Add and a ConfirmDistinct.
local distinctSettle, distinctConfirm

-- giveBack applies give-back entries to keys first..last, entry i's how and
-- amount at ARGV[at+2(i-first)] and the one after: "r" takes microseconds
-- off a rate key's arrival time, "c" takes units off a counter, "k" keeps a
-- counter of count c until at least now + span × c ÷ max microseconds, all
-- of span when max is 0 or c is at or past it (amount is "span:max", a
-- confirmed count, store.ConfirmedHold), "l" takes the units attributed to
-- a member off a counter (amount is the member; store.Lift), "c" may name
-- the member its units were attributed to ("units:member"),
-- "x" forgets, "X" forgets what is not a rate's or a distinct index's
-- state (a counter, or what is not guardian's; store.Reset), "f" puts a
-- member on a familiar list ("hold:member", see familiar.lua), "d" a
-- member in a distinct key's current sub-window ("step:member", see
-- distinct.lua; its five sub-windows follow as "-"),
-- "D" keeps a distinct key's live sub-windows until they leave the window
-- (amount is the step; its five sub-windows follow as "-"), "g" forgets one
-- guess of a Guesses key (amount is the guess), "G" keeps one until at
-- least a span from now (amount is "guess:span"). A key that no longer
-- exists is left alone, and so is one that holds another kind's state
-- (ruleState); state never goes below empty. It returns how many keys
-- changed, or nil and an error.
local function giveBack(first, last, at)
  local changed = 0
  for i = first, last do
    local how = ARGV[at + 2 * (i - first)]
    local amount = tonumber(ARGV[at + 2 * (i - first) + 1])
    if how == 'x' then
      changed = changed + forget(i)
    elseif how == 'X' then
      -- a key of another type than a string is not guardian's: it goes
      local v = redis.pcall('GET', KEYS[i])
      if type(v) == 'table' or (v and (counterState(v) or not ruleState(v))) then
        changed = changed + forget(i)
      end
    elseif how == 'g' then
      local list = guessList(get(i))
      if not list then
        return nil, 'guardian: bad guesses state'
      end
      local j = guessIndex(list, ARGV[at + 2 * (i - first) + 1], #list)
      if j then
        table.remove(list, j)
        putGuesses(i, list)
        changed = changed + 1
      end
    elseif how == 'G' then
      local list = guessList(get(i))
      if not list then
        return nil, 'guardian: bad guesses state'
      end
      local g, span = string.match(ARGV[at + 2 * (i - first) + 1], '^(%x+):(%d+)$')
      local j = g and guessIndex(list, g, #list)
      if j then
        local d = now + tonumber(span)
        if d > list[j].d then
          list[j].d = d
          putGuesses(i, list)
        end
        changed = changed + 1
      end
    elseif how == 'f' or how == 'd' or how == 'D' then
      local spec = ARGV[at + 2 * (i - first) + 1]
      local applied, err
      if how == 'f' then
        applied, err = familiarAdd(i, spec)
      elseif how == 'd' then
        applied, err = distinctSettle(i, spec)
      else
        applied, err = distinctConfirm(i, spec)
      end
      if err then
        return nil, err
      end
      if applied then
        changed = changed + 1
      end
    elseif how == '-' then
      -- a sub-window of the distinct entry before it
    else
      local v = get(i)
      local tat = v and how == 'r' and tonumber(v)
      local c, d, rest
      if v and how ~= 'r' then
        c, d, rest = counterState(v)
      end
      if v and not tat and not c then
        if not ruleState(v) then
          return nil, how == 'r' and 'guardian: bad rate state' or 'guardian: bad counter state'
        end
        -- another kind's state, left alone
      elseif v then
        changed = changed + 1
        if how == 'r' then
          tat = tat - amount
          if tat <= now then
            forget(i)
          else
            put(i, int(tat), tat)
          end
        elseif how == 'k' then
          local span, most = string.match(ARGV[at + 2 * (i - first) + 1], '^(%d+):(%d+)$')
          if not span then
            return nil, 'guardian: bad confirm entry'
          end
          span, most = tonumber(span), tonumber(most)
          if most > 0 and c < most then
            span = math.floor(span * c / most)
          end
          if d > now and now + span > d then
            putCounter(i, c, now + span, rest)
          end
        elseif how == 'l' then
          local kept, units = attrWithout(rest, ARGV[at + 2 * (i - first) + 1])
          if units > 0 then
            putCounter(i, c - units, d, kept)
          end
        else
          -- "units" or "units:member", what a spend attributed
          local units, member = string.match(ARGV[at + 2 * (i - first) + 1], '^(%d+):?([%w_-]*)$')
          if not units then
            return nil, 'guardian: bad uncount entry'
          end
          if member ~= '' then
            local kept, had = attrWithout(rest, member)
            rest = had > tonumber(units) and attrWith(kept, member, had - tonumber(units)) or kept
          end
          putCounter(i, c - tonumber(units), d, rest)
        end
      end
    end
  end
  return changed
end

-- markOnce sets the mark at key i until now + ttl, ARGV[at], unless it is
-- set and not past its deadline, and when it set it applies the give-back
-- entries of keys i+1..last, entry j's how and amount at ARGV[at+1+2(j-i-1)]
-- and the one after (giveBack). It returns 1 when it set the mark, 0 when
-- the mark was set, or -1 when an entry could not be applied (the mark then
-- set, the entries before it applied). The mark holds its deadline, so
-- the store's clock (or a test's override) decides expiry the same way it
-- does for limit state.
--
-- Redis keeps the mark three times as long as it means something. Under
-- maxmemory-policy volatile-ttl a key's expiry is its rank for eviction, and
-- guardian's marks (--attempt-ttl plus two minutes of skew) would otherwise
-- go before the unconfirmed counts of a flood (kept 2 x --attempt-ttl): an
-- evicted mark lets an attempt be reported twice. Kept 3 x ttl, a mark still
-- in force has at least 2 x ttl left, more than any unconfirmed state.
local function markOnce(i, last, at)
  local ttl = tonumber(ARGV[at])
  local v = get(i)
  if v then
    local d = tonumber(v)
    if not d or d > now then
      return 0
    end
  end
  put(i, int(now + ttl), now + 3 * ttl)
  if not giveBack(i + 1, last, at + 1) then
    return -1
  end
  return 1
end
