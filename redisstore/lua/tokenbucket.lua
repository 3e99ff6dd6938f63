-- Token bucket: GCRA in exact integers, as internal/kernel/tokenbucket.go.
-- State: {tat (whole units), frac (of a unit, in 1/limit units)}, or nil for
-- a fresh key. What to write, on an admission, is the state after it.
--
-- The decision itself is the block between the "decision" marks, which
-- returns nothing: it reads limit, window, n, now and the state as tat and
-- frac (tat nil for a fresh key), and sets allowed, remaining, retry-after
-- and reset-after, and, when it admits n > 0, charged, with tat and frac
-- then the state to write. A script of one token-bucket rule (single.lua)
-- runs that block in place, with no function around it: every run of a
-- script creates each of its functions anew, a closure that Lua's collector
-- then frees (about 1,200 instructions in Redis, in valgrind's counts; see
-- docs/redis.md, "Performance"), and the call would take and return its
-- states as tables, each allocated and freed too. In place, with the
-- state read by arithmetic (single.lua), a decision costs Redis about
-- 4,600 fewer instructions than the call did. The function below holds the
-- same block for the scripts that decide a token bucket among others or
-- more than once (composite.lua, reserve.lua).
--
-- It calls no helper: floors are math.floor of the quotient, exact here,
-- where every dividend is an integer below 2^53 in magnitude (see fdiv in
-- helpers.lua), and waits are written out.
local function tokenbucket(limit, window, n, state)
  local tat, frac = nil, 0
  if state then
    tat, frac = state[1], state[2]
  end
  local allowed, remaining, retry, reset, charged
  -- decision {
  local capacity, debt = limit * window, 0
  if tat and (tat > now or (tat == now and frac ~= 0)) then
    local ahead = tat - now
    if ahead > window then
      debt = capacity + 1
    else
      debt = ahead * limit + frac
    end
  end
  -- The wait until the bucket is full: 0 out of debt, else until tat, or
  -- the unit after it when a fraction of a unit is owed.
  reset = 0
  if debt > 0 then
    reset = tat - now
    if frac ~= 0 then
      reset = reset + 1
    end
  end
  if n == 0 then
    allowed, remaining, retry = 1, math.floor(math.max(0, capacity - debt) / window), 0
  else
    local units = n * window
    local costWhole = math.floor(units / limit)
    local costRem = units - costWhole * limit
    if units > capacity - debt then
      -- debt > 0 here, since n <= limit: the request fits once
      -- tat + cost - window has passed, at the ceiling of that instant.
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
      allowed, remaining, retry = 0, 0, 0
      if at > now then
        retry = at - now
      end
    else
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
      reset = tat - now
      if frac ~= 0 then
        reset = reset + 1
      end
      allowed, remaining, retry, charged = 1, math.floor((capacity - debt) / window), 0, true
    end
  end
  -- } decision
  if charged then
    return allowed, remaining, retry, reset, {tat, frac}
  end
  return allowed, remaining, retry, reset
end
