-- Token bucket: GCRA in exact integers, as internal/kernel/tokenbucket.go.
-- State: {tat (whole units), frac (of a unit, in 1/limit units)}, or nil for
-- a fresh key. What to write, on an admission, is the state after it.
--
-- The decision itself is the block between the "decision" marks, which
-- returns nothing: it reads limit, window, n, now and the state as tat and
-- frac (tat nil for a fresh key), and sets capacity (the units of a full
-- bucket), debt (the units the bucket owes at now, before this request:
-- capacity + 1 for a state more than a window ahead of the reading, which
-- only a stale reading sees), units (what n tokens cost) and, when it
-- admits n > 0, charged, with tat and frac then the state to write. Every
-- other figure of the Decision follows from debt and units alone, but for
-- a state more than a window ahead; the function below derives them in
-- Lua, for the scripts that decide a token bucket among others or more than
-- once (composite.lua, reserve.lua).
--
-- A script of one token-bucket rule (single.lua) runs that block in place,
-- with no function around it: every run of a script creates each of its
-- functions anew, a closure that Lua's collector then frees (about 1,200
-- instructions in Redis, in valgrind's counts; see docs/redis.md,
-- "Performance"), and the call would take and return its states as
-- tables, each allocated and freed too. It then replies with debt alone,
-- one integer (tokenbucket_reply.lua), and the client derives the Decision
-- from it with the kernel itself: a reply of four integers is a table
-- that Redis builds and converts, about 6,000 instructions more.
--
-- It calls no helper: floors are math.floor of the quotient, or the
-- quotient less its remainder (a % b, which Lua computes as
-- a - floor(a/b)*b, without a call), exact here, where every dividend is an
-- integer below 2^53 in magnitude (see fdiv in helpers.lua), and waits are
-- written out.
local function tokenbucket(limit, window, n, state)
  local tat, frac = nil, 0
  if state then
    tat, frac = state[1], state[2]
  end
  local capacity, debt, units, charged
  -- decision {
  capacity, debt, units = limit * window, 0, n * window
  if tat and (tat > now or (tat == now and frac ~= 0)) then
    local ahead = tat - now
    if ahead > window then
      debt = capacity + 1
    else
      debt = ahead * limit + frac
    end
  end
  if n > 0 and units <= capacity - debt then
    -- Admitted: TAT moves by the cost, from now if the bucket was full.
    if debt == 0 then
      tat, frac = now, 0
    end
    local rem = units % limit
    local whole = (units - rem) / limit
    frac = frac + rem
    if frac >= limit then
      frac = frac - limit
      whole = whole + 1
    end
    tat, charged = tat + whole, true
  end
  -- } decision
  -- The wait until the bucket is full: 0 out of debt, else until tat, or
  -- the unit after it when a fraction of a unit is owed.
  local reset = 0
  if charged or debt > 0 then
    reset = tat - now
    if frac ~= 0 then
      reset = reset + 1
    end
  end
  if charged then
    return 1, math.floor((capacity - debt - units) / window), 0, reset, {tat, frac}
  end
  if n == 0 then
    return 1, math.floor(math.max(0, capacity - debt) / window), 0, reset
  end
  -- Denied, so debt > 0 (n <= limit): the request fits once
  -- tat + cost - window has passed, at the ceiling of that instant.
  local costWhole = math.floor(units / limit)
  local at = tat + costWhole - window
  local f = frac + units - costWhole * limit
  if f >= limit then
    at = at + 1
    if f > limit then
      at = at + 1
    end
  elseif f > 0 then
    at = at + 1
  end
  local retry = 0
  if at > now then
    retry = at - now
  end
  return 0, 0, retry, reset
end
