-- guardian: give back what checks spent, confirm counts, or forget state
-- (giveBack in prelude.lua), and announce a reset.
--
-- KEYS[i]      the key of entry i (all share one cluster slot); ARGV[1] is
--              the time
-- ARGV[base+1] a channel to publish the keys on, one per line, once they
--              changed (an account reset: every instance forgets what it
--              remembers of them), or empty
-- ARGV[base+2+2(i-1)..]  entry i: how and amount,
--              as giveBack in prelude.lua lists them
--
-- Reply: how many keys changed.

begin(callKeys, callArgs)
local changed, err = giveBack(1, #KEYS, base + 2)
if err then
  return redis.error_reply(err)
end
if ARGV[base + 1] ~= '' then
  redis.call('PUBLISH', ARGV[base + 1], table.concat(KEYS, '\n'))
end
return changed
