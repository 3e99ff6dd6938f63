-- Fixed window, as internal/kernel/fixedwindow.go. State: window index, count.
local st = load(2)
local idx = fdiv(now, window)
local count = 0
if st and st[2] ~= 0 and idx <= st[1] then
  -- a stale reading counts against the newer window already recorded
  idx, count = st[1], st[2]
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
  store(finish, idx, count)
end
return {1, limit - count, 0, reset}
