-- guardian: mark a key once. Sets KEYS[1] until now + ARGV[2] unless it is
-- already set and not past its deadline; replies 1 when this call set it.
-- The key holds its deadline, so the store's clock (or a test's override)
-- decides expiry the same way it does for limit state.
--
-- KEYS[1]  the key
-- ARGV[1]  the time in microseconds; empty reads the store's own TIME
-- ARGV[2]  how long the mark lasts, in microseconds

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local ttl = tonumber(ARGV[2])

local v = redis.call('GET', KEYS[1])
if v then
  local deadline = tonumber(v)
  if not deadline or deadline > now then
    return 0
  end
end
redis.call('SET', KEYS[1], string.format('%d', now + ttl), 'PX', string.format('%d', math.ceil(ttl / 1000)))
return 1
