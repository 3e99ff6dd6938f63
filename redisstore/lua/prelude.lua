-- admit: shared head of every decision script (see redisstore/script.go).
--
-- Before it, the script's header defines the limiter's constants:
--   perMs     units per millisecond: 1000000 (ns) or 1000 (µs)
--   slackMs   extra milliseconds on every TTL
--   tag       tag naming the rules and units, kept with the state
--   strategy  what a key of other rules carries: '' (nothing: it is an
--             error), 'c' consumed, 'p' proportional, 'n' nothing (see
--             carry.lua)
-- A script of one rule whose state is a string (single.lua) has them, and
-- its rule's limit and window, written in its text, as Lua constants: its
-- call sends only the key, the reading and n. A script whose text every
-- limiter shares (a sliding log's, a composite's) reads them from ARGV[3]
-- to ARGV[6], and its rules from ARGV[7] on.
--
-- KEYS[1]  the limiter key, prefix{key}
-- ARGV[1]  the reading in units, or '' to read the server's TIME in µs
-- ARGV[2]  n, 0 <= n <= the smallest limit (the client answers other n
--          without a script)
--
-- Each algorithm is a function of (limit, window, n, state) that reads the
-- state, decides as its kernel does, and returns allowed (1 or 0),
-- remaining, retry-after and reset-after, durations in units, and, when it
-- admits n > 0, what to write; it writes nothing itself. The script's last
-- part reads the key, calls the functions and writes. The reply is
-- {allowed, remaining, retry-after, reset-after}, and for a composite the
-- index of the rule that bound the decision after them; a token bucket's
-- script of its one rule replies with the bucket's debt alone, from which
-- the client derives them (tokenbucket_reply.lua).
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
--
-- Numbers are read from strings by arithmetic (ARGV[2] + 0), which converts
-- a string once, where tonumber converts it twice (it tests that the string
-- is a number, then converts it): the same number, for close to 1,000
-- fewer instructions per number read (valgrind's counts, Redis 7.0). A
-- string that is not a number, which neither the client nor these scripts
-- ever send or write, is then an error at once rather than a nil.
local key = KEYS[1]
local n = ARGV[2] + 0

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  -- microseconds since 2020-01-01T00:00:00Z: below 2^51 until the year 2091
  now = (t[1] - 1577836800) * 1000000 + t[2]
else
  now = ARGV[1] + 0
end

-- anotherRule formats the error of a key whose state s, a string that
-- starts with its tag, is not this limiter's, for a limiter that converts
-- nothing (see carry.lua): string.format(anotherRule, key,
-- string.sub(s, 1, #tag + 40), tag). A state written for other rules is
-- never misread.
-- (One literal: Lua 5.1 would join two at every run.)
local anotherRule = 'ADMIT key %s holds state of another rule (%s, want %s): give limiters of different rules different prefixes, or convert (WithCarry)'
