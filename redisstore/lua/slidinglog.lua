-- Sliding log, as internal/kernel/slidinglog.go. State: a list whose first
-- element is the tag and whose others are the admissions' times, ascending.
local stored = redis.call('LLEN', key)
local size = stored
if size > 0 then
  local first = redis.call('LINDEX', key, 0)
  check(tostring(first), first)
  size = size - 1
end
local function at(i) -- the i-th oldest time, from 0
  return tonumber(redis.call('LINDEX', key, i + 1))
end

local eff, dead, newest = now, 0, nil
if size > 0 then
  newest = at(size - 1)
  if newest > eff then
    eff = newest -- a stale reading is clamped to the newest time seen
  end
  local lo, hi = 0, size -- binary search: entries [0, lo) have expired
  while lo < hi do
    local mid = fdiv(lo + hi, 2)
    if eff - at(mid) >= window then
      lo = mid + 1
    else
      hi = mid
    end
  end
  dead = lo
end
local live = size - dead

local function untilEmpty()
  if live == 0 then
    return 0
  end
  return wait(newest + window)
end

if live + n > limit then
  -- the (live + n - limit)-th oldest live entry must expire first
  return {0, 0, wait(at(dead + live + n - limit - 1) + window), untilEmpty()}
end
if n > 0 then
  -- Every read and the decision are done; now the writes, the first of them
  -- one Redis refuses when it is out of memory (RPUSH): see the prelude.
  local t = string.format('%d', eff)
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
  live = live + n
  newest = eff
  redis.call('PEXPIRE', key, ttl(untilEmpty()))
end
return {1, limit - live, 0, untilEmpty()}
