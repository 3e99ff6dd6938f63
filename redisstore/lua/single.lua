-- One rule whose state is a string (token bucket, fixed window, sliding
-- counter): the tag, then the state's numbers, separated by spaces. decide
-- is the rule's algorithm (see redisstore/script.go).
--
-- ARGV[7]  limit
-- ARGV[8]  window, in units
local limit = tonumber(ARGV[7])
local window = tonumber(ARGV[8])
local s = redis.pcall('GET', key)
local state, carried
if type(s) == 'table' then
  carried = carry(s) -- a list or a hash: Redis's WRONGTYPE unless converted
elseif s then
  local found, a, b, c = string.match(s, '^(%S+) (%S+) (%S+) ?(%S*)$')
  if found == tag then
    state = {tonumber(a), tonumber(b), tonumber(c)}
  else
    carried = carry(another(s))
  end
end
if carried then
  state = carried[1]
end
local allowed, remaining, retry, reset, write = decide(limit, window, n, state)
-- A converted state is written whatever the decision: the key converts
-- once, at this reading. SET replaces a key of any type; a converted state
-- that is fresh is a missing key.
local v = write or (carried and state)
if v then
  if #v == 2 then
    v = string.format('%s %d %d', tag, v[1], v[2])
  else
    v = string.format('%s %d %d %d', tag, v[1], v[2], v[3])
  end
  redis.call('SET', key, v, 'PX', ttl(reset))
elseif carried then
  redis.call('DEL', key)
end
return {allowed, remaining, retry, reset}
