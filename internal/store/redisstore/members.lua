-- guardian: the members of a familiar list that are not forgotten
-- (store.Store.Familiar), run after prelude.lua and familiar.lua.
--
-- KEYS[1]      the list; ARGV[1] is the time
--
-- Reply: the members, in the list's order.

begin(callKeys, callArgs)
local list = familiarList(get(1))
if not list then
  return redis.error_reply('guardian: bad familiar state')
end
local out = {}
for j, e in ipairs(list) do
  out[j] = e.m
end
return out
