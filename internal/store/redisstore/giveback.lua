-- guardian: give back what checks spent, or forget state (giveBack in
-- prelude.lua).
--
-- KEYS[i], ARGV[1+i]  the hash and field of entry i (all hashes share one
--              cluster slot); ARGV[1] is the time
-- ARGV[base+1+2(i-1)..]  entry i: how ("r", "c" or "x"), amount
--
-- Reply: how many fields changed.

local changed, err = giveBack(1, base + 1)
if err then
  return redis.error_reply(err)
end
return changed
