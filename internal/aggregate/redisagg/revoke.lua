-- guardian: revoke one service token for every instance (package
-- revocation), and forget the revocations whose tokens expired.
--
-- KEYS[1]  the revocations, a sorted set: jti by until, ms
-- KEYS[2]  the set's version, a string that changes with every revocation
-- ARGV[1]  the jti
-- ARGV[2]  until when it is refused (the token's expiry), ms
-- ARGV[3]  how long both keys outlive this write, ms (at least the longest
--          token life, so no revocation goes before its token)
--
-- The time is the store's own; the version is that time, to the
-- microsecond, so it never repeats.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
end
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
local version = t[1] .. '.' .. t[2]
redis.call('SET', KEYS[2], version, 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return version
