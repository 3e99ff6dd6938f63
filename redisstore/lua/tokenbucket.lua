-- Token bucket: GCRA in exact integers, as internal/kernel/tokenbucket.go.
-- State: {tat (whole units), frac (of a unit, in 1/limit units)}, or nil for
-- a fresh key. What to write, on an admission, is the state after it.
--
-- It calls no helper and builds no closure: a decision runs the whole
-- script, whose every function is a closure created anew, which Lua's
-- collector then frees (about a tenth of a decision's cost in Redis, in
-- valgrind's instruction counts; see docs/redis.md, "Performance"). So
-- floors are math.floor of the quotient, exact here, where every dividend
-- is an integer below 2^53 in magnitude (see fdiv in helpers.lua), and
-- waits are written out.
local function tokenbucket(limit, window, n, state)
  local capacity = limit * window
  local tat, frac, debt = nil, 0, 0
  if state then
    tat, frac = state[1], state[2]
    if tat > now or (tat == now and frac ~= 0) then
      local ahead = tat - now
      if ahead > window then
        debt = capacity + 1
      else
        debt = ahead * limit + frac
      end
    end
  end

  -- The wait until the bucket is full: 0 out of debt, else until tat, or
  -- the unit after it when a fraction of a unit is owed.
  if n == 0 then
    local full = 0
    if debt > 0 then
      full = tat - now
      if frac ~= 0 then
        full = full + 1
      end
    end
    return 1, math.floor(math.max(0, capacity - debt) / window), 0, full
  end

  local units = n * window
  local costWhole = math.floor(units / limit)
  local costRem = units - costWhole * limit
  if units > capacity - debt then
    -- debt > 0 here, since n <= limit: the request fits once tat + cost - window
    -- has passed, at the ceiling of that instant.
    local at = tat + costWhole - window
    local f = frac + costRem
    if f >= limit then
      at = at + 1
      if f > limit then
        at = at + 1
      end
    elseif f > 0 then
      at = at + 1
    end
    local retry, full = 0, tat - now
    if at > now then
      retry = at - now
    end
    if frac ~= 0 then
      full = full + 1
    end
    return 0, 0, retry, full
  end

  if debt == 0 then
    tat, frac = now, 0
  end
  frac = frac + costRem
  if frac >= limit then
    frac = frac - limit
    costWhole = costWhole + 1
  end
  tat = tat + costWhole
  debt = debt + units
  local full = tat - now
  if frac ~= 0 then
    full = full + 1
  end
  return 1, math.floor((capacity - debt) / window), 0, full, {tat, frac}
end
