-- Sliding-window counter, as internal/kernel/slidingcounter.go. State:
-- {current window index, previous count, current count}, or nil for a fresh
-- key. What to write, on an admission, is the state after it.
local function slidingcounter(limit, window, n, state)
  local idx = fdiv(now, window)
  local elapsed = now - idx * window
  local prev, curr = 0, 0
  local w, p, c = 0, 0, 0
  if state then
    w, p, c = state[1], state[2], state[3]
  end
  if p ~= 0 or c ~= 0 then -- otherwise fresh: both counts stay 0
    if idx < w then
      -- a stale reading counts as the start of the newer window
      idx, elapsed, prev, curr = w, 0, p, c
    elseif idx == w then
      prev, curr = p, c
    elseif idx == w + 1 then
      prev = c
    end
  end
  local start = idx * window

  local function untilIdle()
    if curr > 0 then
      return wait(start + 2 * window)
    elseif prev > 0 then
      return wait(start + window)
    end
    return 0
  end

  -- earliest is the first reading at which n would pass, given it does not now.
  local function earliest()
    if prev > 0 and curr + n <= limit then
      local e = window - fdiv((limit - curr - n) * window, prev)
      if e < window and e > elapsed then
        return start + e
      end
    end
    local nxt = start + window
    if curr <= limit - n then
      return nxt
    end
    local e = window - fdiv((limit - n) * window, curr)
    if e < window then
      return nxt + e
    end
    return nxt + window
  end

  -- prev x (window - elapsed) + (curr + n) x window <= limit x window, with
  -- each side kept below 2^53.
  if n > 0 and not (curr + n <= limit and prev * (window - elapsed) <= (limit - curr - n) * window) then
    return 0, 0, wait(earliest()), untilIdle()
  end
  local write
  if n > 0 then
    curr = curr + n
    write = {idx, prev, curr}
  end
  local room = fdiv(limit * window - prev * (window - elapsed), window)
  return 1, math.max(0, math.min(room - curr, limit)), 0, untilIdle(), write
end
