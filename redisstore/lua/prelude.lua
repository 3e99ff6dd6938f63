-- admit: shared head of every decision script (see redisstore/script.go).
--
-- KEYS[1]  the limiter key, prefix{key}
-- ARGV[1]  the reading in units, or '' to read the server's TIME in µs
-- ARGV[2]  n, 0 <= n <= the smallest limit (the client answers other n
--          without a script)
-- ARGV[3]  units per millisecond: 1000000 (ns) or 1000 (µs)
-- ARGV[4]  extra milliseconds on every TTL
-- ARGV[5]  tag naming the rules and units, kept with the state
-- ARGV[6]  what a key of other rules carries: '' (nothing: it is an error),
--          'c' consumed, 'p' proportional, 'n' nothing (see carry.lua)
-- ARGV[7…] the rules: see the script's last part (single.lua, list.lua or
--          composite.lua)
--
-- Each algorithm is a function of (limit, window, n, state) that reads the
-- state, decides as its kernel does, and returns allowed (1 or 0),
-- remaining, retry-after and reset-after, durations in units, and, when it
-- admits n > 0, what to write; it writes nothing itself. The script's last
-- part reads the key, calls the functions and writes. The reply is
-- {allowed, remaining, retry-after, reset-after}, and for a composite the
-- index of the rule that bound the decision after them.
--
-- Lua numbers are doubles: every value here is an integer below 2^53 in
-- magnitude, which the client guarantees by bounding readings (|t| <= 2^51
-- units) and rules (window <= 2^51 units, limit x window <= 2^52 units), so
-- all arithmetic below is exact. carry.lua holds the rules it reads from a
-- tag to the same bounds, and forms its larger products in digits.
--
-- Out of memory: every script reads and decides before it writes, and its
-- first write is one that Redis refuses when used memory is over maxmemory
-- (SET, RPUSH, HSET: commands flagged deny-oom). Redis applies that refusal
-- only until a script's first write, since it never stops a script half way: a
-- script whose first write were LTRIM, DEL or PEXPIRE, which it lets through,
-- could go on to grow a key past maxmemory. So under noeviction an admission
-- fails with Redis's OOM error having written nothing, and a denial, which
-- writes nothing, is still answered. A key converted from other rules
-- (carry.lua) is written whatever the decision, first with SET (or only
-- deleted, when its converted state is fresh): its first touch fails then,
-- a denial or a probe too, and leaves it under the old rules. The scripts
-- declare no flags (a '#!lua' first line): Redis 7 would then refuse a
-- script whole when out of memory, reads included, and Redis 6 and older
-- cannot parse that line.
local key = KEYS[1]
local n = tonumber(ARGV[2])
local perMs = tonumber(ARGV[3])
local slackMs = tonumber(ARGV[4])
local tag = ARGV[5]

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  -- microseconds since 2020-01-01T00:00:00Z: below 2^51 until the year 2091
  now = (tonumber(t[1]) - 1577836800) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end

-- fdiv returns floor(a / b) for b > 0. For integers below 2^53 the rounded
-- quotient never crosses an integer, so math.floor alone is exact; the
-- remainder check keeps it exact should that argument ever be wrong.
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
-- with its tag, is not this limiter's, for a limiter that converts nothing
-- (see carry.lua): a state written for other rules is never misread.
local function another(s)
  return {err = 'ADMIT key ' .. key .. ' holds state of another rule (' .. string.sub(s, 1, #tag + 40) ..
    ', want ' .. tag .. '): give limiters of different rules different prefixes, or convert (WithCarry)'}
end
