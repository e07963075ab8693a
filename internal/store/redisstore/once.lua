-- guardian: mark a key once and, when this call marked it, give back what
-- the marked attempt spent (or confirm what it counted), in the same step.
-- Sets the mark until now + ARGV[base+1] unless it is set and not past its
-- deadline; replies 1 when this call set it. The mark holds its deadline, so
-- the store's clock (or a test's override) decides expiry the same way it
-- does for limit state.
--
-- Redis keeps the mark three times as long as it means something. Under
-- maxmemory-policy volatile-ttl a key's expiry is its rank for eviction, and
-- guardian's marks (--attempt-ttl plus two minutes of skew) would otherwise
-- go before the unconfirmed counts of a flood (kept 2 x --attempt-ttl): an
-- evicted mark lets an attempt be reported twice. Kept 3 x ttl, a mark still
-- in force has at least 2 x ttl left, more than any unconfirmed state.
--
-- KEYS[1]             the mark; ARGV[1] is the time
-- ARGV[base+1]        how long the mark lasts, in microseconds
-- KEYS[i]             for i > 1, the key of give-back entry i-1 (every key
--                     shares one cluster slot)
-- ARGV[base+2+2(i-2)..]  entry i-1: how and amount,
--                     as giveBack in prelude.lua lists them

local ttl = tonumber(ARGV[base + 1])
local v = get(1)
if v then
  local d = tonumber(v)
  if not d or d > now then
    return 0
  end
end
put(1, int(now + ttl), now + 3 * ttl)
local _, err = giveBack(2, base + 2)
if err then
  return redis.error_reply(err)
end
return 1
