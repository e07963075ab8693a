-- guardian: list the instances of a fleet seen lately (package fleet).
--
-- KEYS[1]  every instance's last heartbeat, a sorted set: id by time seen, ms
-- KEYS[2]  every instance's heartbeat, a hash: id to its JSON
-- ARGV[1]  how recent a heartbeat must be to be listed, ms
--
-- Reply: id, time seen (ms, a string), heartbeat JSON (or false), for each
-- instance seen after the store's now minus ARGV[1].

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seen = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - tonumber(ARGV[1])), '+inf', 'WITHSCORES')
local out = {}
for i = 1, #seen, 2 do
  out[#out + 1] = seen[i]
  out[#out + 1] = seen[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], seen[i])
end
return out
