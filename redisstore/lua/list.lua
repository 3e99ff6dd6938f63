-- One sliding log, kept in a list whose first element is the tag and whose
-- others are the admissions' times, ascending.
--
-- ARGV[6]  limit
-- ARGV[7]  window, in units
local limit = tonumber(ARGV[6])
local window = tonumber(ARGV[7])
local stored = redis.call('LLEN', key)
local size = stored
if size > 0 then
  local first = redis.call('LINDEX', key, 0)
  check(tostring(first), first)
  size = size - 1
end
local log = {size = size, at = function(i)
  return tonumber(redis.call('LINDEX', key, i + 1))
end}
local allowed, remaining, retry, reset, write = slidinglog(limit, window, n, log)
if write then
  -- Every read and the decision are done; now the writes, the first of them
  -- one Redis refuses when it is out of memory (RPUSH): see the prelude.
  local t, dead = string.format('%d', write[1]), write[2]
  local batch = {}
  if stored == 0 then
    batch[1] = tag -- a new list starts with the tag
  end
  for i = 1, n do
    batch[#batch + 1] = t
    if #batch >= 1000 or i == n then
      redis.call('RPUSH', key, unpack(batch))
      batch = {}
    end
  end
  if dead > 0 then
    -- entries 1 to dead have expired: the last of them becomes the tag
    redis.call('LTRIM', key, dead, -1)
    redis.call('LSET', key, 0, tag)
  end
  redis.call('PEXPIRE', key, ttl(reset))
end
return {allowed, remaining, retry, reset}
