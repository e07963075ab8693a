-- guardian: give back what checks spent, or forget keys.
-- A key that no longer exists is left alone; a key never goes below empty.
--
-- KEYS[i]      the key of entry i (all keys share one cluster slot)
-- ARGV[1]      the time in microseconds; empty reads the store's own TIME
-- ARGV[2+2(i-1)..]  entry i: how ("r" take microseconds off a rate key's
--              arrival time, "c" take units off a counter, "x" delete), amount
--
-- Reply: how many keys changed.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end

local function int(x)
  return string.format('%d', x)
end

local changed = 0
for i = 1, #KEYS do
  local how = ARGV[2 * i]
  local amount = tonumber(ARGV[2 * i + 1])
  if how == 'x' then
    changed = changed + redis.call('DEL', KEYS[i])
  else
    local v = redis.call('GET', KEYS[i])
    if v then
      changed = changed + 1
      if how == 'r' then
        local tat = tonumber(v)
        if not tat then
          return redis.error_reply('guardian: bad rate state')
        end
        tat = tat - amount
        if tat <= now then
          redis.call('DEL', KEYS[i])
        else
          redis.call('SET', KEYS[i], int(tat), 'PX', int(math.ceil((tat - now) / 1000)))
        end
      else
        local c, d = string.match(v, '^(%d+):(%d+)$')
        if not c then
          return redis.error_reply('guardian: bad counter state')
        end
        c, d = tonumber(c) - amount, tonumber(d)
        if c <= 0 or d <= now then
          redis.call('DEL', KEYS[i])
        else
          redis.call('SET', KEYS[i], int(c) .. ':' .. int(d), 'KEEPTTL')
        end
      end
    end
  end
end
return changed
