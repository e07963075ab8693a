-- guardian: remove one entry from a list set (store.Lists; the keys are
-- listput.lua's). Replies 1 when there was one.
--
-- KEYS[1..4]  the entries, their expiries, the version, the count
-- ARGV[1]     the id

if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
local n = tonumber(redis.call('GET', KEYS[4]) or '1') - 1
redis.call('SET', KEYS[4], string.format('%d', math.max(n, 0)))
local t = redis.call('TIME')
redis.call('SET', KEYS[3], t[1] .. '.' .. t[2])
return 1
