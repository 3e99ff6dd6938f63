-- The end of a script of one rule whose state is a string (single.lua),
-- but a token bucket's (tokenbucket_reply.lua): after the decision, the
-- write and the reply. A converted state is written whatever the
-- decision: the key converts once, at this reading. SET replaces a key
-- of any type; a converted state that is fresh is a missing key. The TTL
-- is reset-after in milliseconds, rounded up, plus the slack (as
-- helpers.lua's ttl, written out).
if carried and not wa then
  wa, wb, wc = a, b, c
end
if wa then
  local v
  if wc == nil and wb == 0 then
    v = string.format(stateZero, wa)
  else
    v = string.format(stateFormat, wa, wb, wc)
  end
  redis.call('SET', key, v, 'PX', math.floor((reset + perMs - 1) / perMs) + slackMs)
elseif carried then
  redis.call('DEL', key)
end
return {allowed, remaining, retry, reset}
