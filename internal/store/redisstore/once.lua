-- guardian: mark a key once and, when this call marked it, give back what
-- the marked attempt spent (or confirm what it counted), in the same step
-- (markOnce in prelude.lua). A report whose store is busy rides in a do
-- script call instead (do.lua's "once" batches); this script is the call of
-- a report on its own.
--
-- KEYS[1]             the mark; ARGV[1] is the time
-- ARGV[base+1]        how long the mark lasts, in microseconds
-- KEYS[i]             for i > 1, the key of give-back entry i-1 (every key
--                     shares one cluster slot)
-- ARGV[base+2+2(i-2)..]  entry i-1: how and amount,
--                     as giveBack in prelude.lua lists them
--
-- Reply: 1 when this call set the mark, 0 when it was set, -1 when an entry
-- could not be applied, as do.lua's "once" batch replies.

begin(callKeys, callArgs)
return markOnce(1, #KEYS, base + 1)
