-- Fixed window, as internal/kernel/fixedwindow.go. State: window index, count.
local s = redis.call('GET', key)
local idx = fdiv(now, window)
local count = 0
if s then
  local t, a, b = string.match(s, '^(%S+) (%S+) (%S+)$')
  check(s, t)
  local w, c = tonumber(a), tonumber(b)
  if c ~= 0 and idx <= w then
    -- a stale reading counts against the newer window already recorded
    idx, count = w, c
  end
end
local finish = wait(idx * window + window)
local reset = finish
if count == 0 then
  reset = 0
end
if count + n > limit then
  return {0, 0, finish, finish}
end
if n > 0 then
  count = count + n
  reset = finish
  redis.call('SET', key, string.format('%s %d %d', tag, idx, count), 'PX', ttl(finish))
end
return {1, limit - count, 0, reset}
