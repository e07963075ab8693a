-- guardian: share the global failure counts of a fleet (package aggregate).
-- One call applies one instance's bucket totals, then reads fleet totals.
--
-- KEYS[2i-1]  set i's bucket: the fleet total, a string, for i = 1..ARGV[3]
-- KEYS[2i]    set i's bucket: every instance's total, a hash by instance id
-- KEYS[2n+1..]  the buckets whose fleet totals to read
-- ARGV[1]     the instance's id
-- ARGV[2]     how long a bucket is kept after a set changes it, ms
-- ARGV[3]     n, the number of sets
-- ARGV[3+i]   set i: the instance's total of the bucket
--
-- A set raises the instance's total to the value given and the fleet total
-- by as much; a value at or below the stored one changes nothing, so a set
-- applied twice, or after a newer one, counts once.
--
-- Reply: one integer per bucket read, 0 for a missing one.

local id = ARGV[1]
local ttl = ARGV[2]
local n = tonumber(ARGV[3])

for i = 1, n do
  local total, by = KEYS[2 * i - 1], KEYS[2 * i]
  local v = tonumber(ARGV[3 + i])
  local old = tonumber(redis.call('HGET', by, id) or 0)
  if v > old then
    redis.call('HSET', by, id, ARGV[3 + i])
    redis.call('INCRBY', total, v - old)
    redis.call('PEXPIRE', by, ttl)
    redis.call('PEXPIRE', total, ttl)
  end
end

-- MGET in chunks: unpack is limited to a few thousand values.
local out = {}
local i = 2 * n + 1
while i <= #KEYS do
  local j = math.min(i + 999, #KEYS)
  local vals = redis.call('MGET', unpack(KEYS, i, j))
  for k = 1, #vals do
    out[#out + 1] = tonumber(vals[k]) or 0
  end
  i = j + 1
end
return out
