-- Token bucket: GCRA in exact integers, as internal/kernel/tokenbucket.go.
-- State: {tat (whole units), frac (of a unit, in 1/limit units)}, or nil for
-- a fresh key. What to write, on an admission, is the state after it.
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

  local function untilFull()
    if debt == 0 then
      return 0
    end
    if frac ~= 0 then
      return wait(tat + 1)
    end
    return wait(tat)
  end

  if n == 0 then
    return 1, fdiv(math.max(0, capacity - debt), window), 0, untilFull()
  end

  local units = n * window
  local costWhole = fdiv(units, limit)
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
    return 0, 0, wait(at), untilFull()
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
  return 1, fdiv(capacity - debt, window), 0, untilFull(), {tat, frac}
end
