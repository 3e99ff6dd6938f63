-- One sliding log, kept in a list whose first element is the tag and whose
-- others are the admissions' times, ascending.
--
-- ARGV[7]  limit
-- ARGV[8]  window, in units
local limit = tonumber(ARGV[7])
local window = tonumber(ARGV[8])
local stored = redis.pcall('LLEN', key)
local carried
if type(stored) == 'table' then
  carried = carry(stored) -- a string or a hash: Redis's WRONGTYPE unless converted
elseif stored > 0 then
  local first = redis.call('LINDEX', key, 0)
  if first ~= tag then
    carried = carry(another(tostring(first)))
  end
end
local log
if carried then
  local stamps = carried[1] or {}
  log = {size = #stamps, at = function(i)
    return stamps[i + 1]
  end}
else
  local size = stored
  if size > 0 then
    size = size - 1
  end
  log = {size = size, at = function(i)
    return tonumber(redis.call('LINDEX', key, i + 1))
  end}
end
local allowed, remaining, retry, reset, write = slidinglog(limit, window, n, log)
if carried then
  -- A converted log is written whatever the decision: the key converts
  -- once, at this reading. Its entries (all live at this reading, so an
  -- admission drops none), then the admission's; none is a missing key.
  local entries = {}
  for i = 1, log.size do
    entries[i] = string.format('%d', log.at(i - 1))
  end
  if write then
    for _ = 1, n do
      entries[#entries + 1] = string.format('%d', write[1])
    end
  end
  if #entries == 0 then
    redis.call('DEL', key)
    return {allowed, remaining, retry, reset}
  end
  -- The first write is one Redis refuses when out of memory (see the
  -- prelude), and SET replaces a key of any type, which DEL then removes
  -- for the list.
  redis.call('SET', key, tag)
  redis.call('DEL', key)
  local batch = {tag}
  for i, t in ipairs(entries) do
    batch[#batch + 1] = t
    if #batch >= 1000 or i == #entries then
      redis.call('RPUSH', key, unpack(batch))
      batch = {}
    end
  end
  redis.call('PEXPIRE', key, ttl(reset))
elseif write then
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
