-- admit: the helpers of the decision scripts, after the prelude (see
-- redisstore/script.go). Each is a Lua function, a closure that every run
-- of the script creates anew (EVALSHA runs the whole script body): the
-- token bucket and the part that reads and writes a string (single.lua)
-- use none of them, so that a token bucket's script, which leaves this
-- file out and runs its decision in place, creates no closure at all.

-- fdiv returns floor(a / b) for b > 0. For integers with |a| < 2^53 the
-- rounded quotient never crosses an integer (the rounding error, at most
-- |a / b| x 2^-53, is below 1/b, the least distance from a non-integral
-- quotient to an integer), so math.floor alone is exact, as the token
-- bucket uses it; the remainder check keeps it exact should that argument
-- ever be wrong.
local function fdiv(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then
    q = q - 1
  elseif r >= b then
    q = q + 1
  end
  return q
end

-- wait returns the non-negative wait from now until t.
local function wait(t)
  if t <= now then
    return 0
  end
  return t - now
end

-- ttl returns the key's time to live, in milliseconds, for a state that is
-- fresh (equivalent to a missing key) after the given wait in units: rounded
-- up, plus the slack, so that Redis never expires a state before it is fresh.
local function ttl(units)
  return fdiv(units + perMs - 1, perMs) + slackMs
end

-- another returns the error of a key whose state s, a string that starts
-- with its tag, is not this limiter's (see anotherRule in the prelude).
local function another(s)
  return {err = string.format(anotherRule, key, string.sub(s, 1, #tag + 40), tag)}
end
