-- Sliding-window counter, as internal/kernel/slidingcounter.go.
-- State: current window index, previous and current counts.
local st = load(3)
local idx = fdiv(now, window)
local elapsed = now - idx * window
local prev, curr = 0, 0
if st and (st[2] ~= 0 or st[3] ~= 0) then
  local w = st[1]
  if idx < w then
    -- a stale reading counts as the start of the newer window
    idx, elapsed, prev, curr = w, 0, st[2], st[3]
  elseif idx == w then
    prev, curr = st[2], st[3]
  elseif idx == w + 1 then
    prev = st[3]
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
  return {0, 0, wait(earliest()), untilIdle()}
end
if n > 0 then
  curr = curr + n
  store(untilIdle(), idx, prev, curr)
end
local room = fdiv(limit * window - prev * (window - elapsed), window)
return {1, math.max(0, math.min(room - curr, limit)), 0, untilIdle()}
