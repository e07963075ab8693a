-- guardian: what every script shares, run before the script's own text.
--
-- State lives in hashes. The key guardian gives the store, P{tag}S, is kept
-- as field tag[3:] of the hash P{tag[1:2]}S (a key without a longer tag is
-- field "" of a hash of its own name): the subjects whose hashed names start
-- alike share one small hash, which Redis stores far more compactly than a
-- key each. Every value ends in the deadline, in microseconds, after which it
-- means nothing: a rate value is its arrival time, a counter
-- "count:deadline", a mark its deadline.
--
-- A field past its deadline reads as absent, and every other new field (by
-- the clock's last digit) sweeps a sample of six neighbours, taking out
-- those past theirs: on average three looked at per new field keep the stale
-- fields of a busy hash under a third of it, at half the script calls of a
-- sweep per new field. A hash expires after its latest deadline: when a
-- write outlives the hash's TTL, the TTL is set a quarter beyond the write's
-- deadline, so that the writes that follow soon need no PEXPIRE of their
-- own.
--
-- ARGV[1]      the time; empty reads the store's own TIME (tests override it)
-- ARGV[1+i]    the field of KEYS[i]
-- ARGV[base+k] the script's own arguments, k from 1

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local base = 1 + #KEYS

local function int(x)
  return string.format('%d', x)
end

-- sweepEvery and sweepSample: one new field in sweepEvery looks at
-- sweepSample neighbours.
local sweepEvery, sweepSample = 2, 6

local function deadline(v)
  return tonumber(string.match(v, '(%d+)$'))
end

-- get returns the value of op i, or false.
local function get(i)
  return redis.call('HGET', KEYS[i], ARGV[1 + i])
end

-- put sets op i to v until its deadline d (microseconds, after now).
local function put(i, v, d)
  local key = KEYS[i]
  if redis.call('HSET', key, ARGV[1 + i], v) == 1 and now % sweepEvery == 0 then
    local s = redis.call('HRANDFIELD', key, sweepSample, 'WITHVALUES')
    for j = 1, #s, 2 do
      local sd = deadline(s[j + 1])
      if sd and sd <= now then
        redis.call('HDEL', key, s[j])
      end
    end
  end
  -- PTTL is truncated to the millisecond: one more keeps the hash's expiry
  -- strictly past d.
  local ms = math.ceil((d - now) / 1000) + 1
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms + math.floor(ms / 4))
  end
end

-- forget removes op i; it replies 1 when it was there.
local function forget(i)
  return redis.call('HDEL', KEYS[i], ARGV[1 + i])
end

-- giveBack applies give-back entries to ops first..#KEYS, entry i's how and
-- amount at ARGV[at+2(i-first)] and the one after: "r" takes microseconds
-- off a rate field's arrival time, "c" takes units off a counter, "x"
-- forgets. A field that no longer exists is left alone; state never goes
-- below empty. It returns how many fields changed, or nil and an error.
local function giveBack(first, at)
  local changed = 0
  for i = first, #KEYS do
    local how = ARGV[at + 2 * (i - first)]
    local amount = tonumber(ARGV[at + 2 * (i - first) + 1])
    if how == 'x' then
      changed = changed + forget(i)
    else
      local v = get(i)
      if v then
        changed = changed + 1
        if how == 'r' then
          local tat = tonumber(v)
          if not tat then
            return nil, 'guardian: bad rate state'
          end
          tat = tat - amount
          if tat <= now then
            forget(i)
          else
            put(i, int(tat), tat)
          end
        else
          local c, d = string.match(v, '^(%d+):(%d+)$')
          if not c then
            return nil, 'guardian: bad counter state'
          end
          c, d = tonumber(c) - amount, tonumber(d)
          if c <= 0 or d <= now then
            forget(i)
          else
            put(i, int(c) .. ':' .. int(d), d)
          end
        end
      end
    end
  end
  return changed
end
