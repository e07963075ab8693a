-- guardian: give back what checks spent, confirm counts, or forget state
-- (giveBack in prelude.lua).
--
-- KEYS[i]      the key of entry i (all share one cluster slot); ARGV[1] is
--              the time
-- ARGV[base+1+2(i-1)..]  entry i: how ("r", "c", "k" or "x"), amount
--
-- Reply: how many keys changed.

local changed, err = giveBack(1, base + 1)
if err then
  return redis.error_reply(err)
end
return changed
