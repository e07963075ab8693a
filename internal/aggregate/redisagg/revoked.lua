-- guardian: read the revocations in force (package revocation), unless the
-- caller holds their version already.
--
-- KEYS[1]  the revocations, a sorted set: jti by until, ms
-- KEYS[2]  the set's version
-- ARGV[1]  the version the caller holds ("" for none)
--
-- Returns {version} when it is the caller's, and otherwise {version,
-- {jti, until, jti, until, …}} of the revocations whose until is still to
-- come by the store's clock.

local v = redis.call('GET', KEYS[2])
if not v then
  v = ''
end
if v == ARGV[1] then
  return {v}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {v, redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')}
