-- One rule whose state is a string (token bucket, fixed window, sliding
-- counter): the tag, then the state's numbers, separated by spaces. decide
-- is the rule's algorithm; the script's header (see redisstore/script.go)
-- defines, with the other constants, its rule's limit and window (in
-- units), the pattern that reads a state of this tag (statePattern) and
-- the formats that write one (stateFormat; stateZero for two numbers whose
-- second is 0), each with the tag written in it: a state is read with one
-- match and written with one format, and a token bucket's fraction, 0
-- whenever its Window is a whole number of units per token, costs no
-- conversion. It calls no helper (see tokenbucket.lua).
local s = redis.pcall('GET', key)
local state, carried
if type(s) == 'table' then
  carried = carry(s) -- a list or a hash: Redis's WRONGTYPE unless converted
elseif s then
  local a, b, c = string.match(s, statePattern)
  if a then
    state = {tonumber(a), tonumber(b), tonumber(c)}
  else
    carried = carry({err = string.format(anotherRule, key, string.sub(s, 1, #tag + 40), tag)})
  end
end
if carried then
  state = carried[1]
end
local allowed, remaining, retry, reset, write = decide(limit, window, n, state)
-- A converted state is written whatever the decision: the key converts
-- once, at this reading. SET replaces a key of any type; a converted state
-- that is fresh is a missing key. The TTL is reset-after in milliseconds,
-- rounded up, plus the slack (as helpers.lua's ttl, written out).
local v = write or (carried and state)
if v then
  if #v == 2 and v[2] == 0 then
    v = string.format(stateZero, v[1])
  else
    v = string.format(stateFormat, v[1], v[2], v[3])
  end
  redis.call('SET', key, v, 'PX', math.floor((reset + perMs - 1) / perMs) + slackMs)
elseif carried then
  redis.call('DEL', key)
end
return {allowed, remaining, retry, reset}
