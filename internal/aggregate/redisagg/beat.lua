-- guardian: write one instance's heartbeat (package fleet) and forget the
-- instances not seen for a while.
--
-- KEYS[1]  every instance's last heartbeat, a sorted set: id by time seen, ms
-- KEYS[2]  every instance's heartbeat, a hash: id to its JSON
-- ARGV[1]  the instance's id
-- ARGV[2]  its heartbeat, JSON
-- ARGV[3]  how long an instance is kept after its last heartbeat, ms
--
-- The time is the store's own, so instances with skewed clocks agree.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - ttl, 'LIMIT', 0, 1000)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return now
