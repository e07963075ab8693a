-- guardian: read a list set (store.Lists; the keys are listput.lua's)
-- unless the caller holds its version already.
--
-- KEYS[1..3]  the entries, their expiries, the version
-- ARGV[1]     the time, µs; empty reads the store's own TIME
-- ARGV[2]     the version the caller holds
--
-- Replies {version} when ARGV[2] is the set's version (a set never written
-- is at version "0"), and otherwise {version, id, expiry, data, ...} for
-- every entry whose expiry has not passed, expiry in µs or "inf".

local v = redis.call('GET', KEYS[3]) or '0'
if v == ARGV[2] then
  return {v}
end
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local out = {v}
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local data = redis.call('HGET', KEYS[1], live[i])
  if data then
    out[#out + 1] = live[i]
    out[#out + 1] = live[i + 1]
    out[#out + 1] = data
  end
end
return out
