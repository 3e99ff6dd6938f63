-- Sliding log, as internal/kernel/slidinglog.go. State: the log, a table
-- whose size is the number of admission times it holds and whose at(i)
-- returns the i-th oldest, from 0, ascending (expired ones first). What to
-- write, on an admission, is {eff, dead}: drop the dead oldest entries, then
-- append n entries at time eff.
local function slidinglog(limit, window, n, log)
  local size, at = log.size, log.at
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

  if n > 0 and live + n > limit then -- a probe passes, even past a carried limit
    -- the (live + n - limit)-th oldest live entry must expire first
    return 0, 0, wait(at(dead + live + n - limit - 1) + window), untilEmpty()
  end
  if n > 0 then
    live = live + n
    newest = eff
    return 1, limit - live, 0, untilEmpty(), {eff, dead}
  end
  return 1, math.max(0, limit - live), 0, untilEmpty()
end
