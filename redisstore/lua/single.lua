-- One rule whose state is a string (token bucket, fixed window, sliding
-- counter): the tag, then the state's numbers, separated by spaces. decide
-- is the rule's algorithm (see redisstore/script.go).
--
-- ARGV[6]  limit
-- ARGV[7]  window, in units
local limit = tonumber(ARGV[6])
local window = tonumber(ARGV[7])
local s = redis.call('GET', key)
local state
if s then
  local found, a, b, c = string.match(s, '^(%S+) (%S+) (%S+) ?(%S*)$')
  check(s, found)
  state = {tonumber(a), tonumber(b), tonumber(c)}
end
local allowed, remaining, retry, reset, write = decide(limit, window, n, state)
if write then
  local v
  if #write == 2 then
    v = string.format('%s %d %d', tag, write[1], write[2])
  else
    v = string.format('%s %d %d %d', tag, write[1], write[2], write[3])
  end
  redis.call('SET', key, v, 'PX', ttl(reset))
end
return {allowed, remaining, retry, reset}
