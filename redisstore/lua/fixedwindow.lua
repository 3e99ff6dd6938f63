-- Fixed window, as internal/kernel/fixedwindow.go. State: {window index,
-- count}, or nil for a fresh key. What to write, on an admission, is the
-- state after it.
local function fixedwindow(limit, window, n, state)
  local idx = fdiv(now, window)
  local count = 0
  if state then
    local w, c = state[1], state[2]
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
  if n > 0 and count + n > limit then -- a probe passes, even past a carried limit
    return 0, 0, finish, finish
  end
  if n > 0 then
    count = count + n
    return 1, limit - count, 0, finish, {idx, count}
  end
  return 1, math.max(0, limit - count), 0, reset
end
