-- guardian: add one entry to a list set (store.Lists), or replace the entry
-- of its id, after forgetting the entries whose expiry has passed; refuse a
-- new entry when the set holds max.
--
-- A set is four keys in one Cluster slot, none with an expiry of its own:
-- KEYS[1]  the entries, a hash: id -> the entry's data
-- KEYS[2]  their expiries, a sorted set: id by expiry, µs (+inf: never)
-- KEYS[3]  the set's version, a string that changes with every change: the
--          store's TIME, to the microsecond, so it never repeats
-- KEYS[4]  how many entries the hash holds (HLEN is not in guardian's ACL)
-- ARGV[1]  the time, µs; empty reads the store's own TIME (tests override it)
-- ARGV[2]  the id
-- ARGV[3]  the data
-- ARGV[4]  the expiry, µs, or +inf
-- ARGV[5]  the most entries the set may hold
--
-- Replies 1 when the entry was put, 0 when the set is full.

local t = redis.call('TIME')
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = tonumber(redis.call('GET', KEYS[4]) or '0')
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
for _, id in ipairs(gone) do
  redis.call('ZREM', KEYS[2], id)
  n = n - redis.call('HDEL', KEYS[1], id)
end
if n < 0 then
  n = 0
end
local reply = 1
if not redis.call('HGET', KEYS[1], ARGV[2]) then
  if n >= tonumber(ARGV[5]) then
    reply = 0
  else
    n = n + 1
  end
end
if reply == 1 then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
  redis.call('SET', KEYS[3], t[1] .. '.' .. t[2])
end
redis.call('SET', KEYS[4], string.format('%d', n))
return reply
