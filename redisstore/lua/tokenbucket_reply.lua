-- The end of a script of one token-bucket rule (single.lua), after its
-- decision, run in place (see tokenbucket.lua): the write and the reply.
-- It writes as single_write.lua does: the state after an admission, or a
-- converted state whatever the decision (the key converts once, at this
-- reading), with SET, which replaces a key of any type, for reset-after
-- in milliseconds, rounded up, plus the slack; a converted state that is
-- fresh is a missing key.
--
-- The reply is one integer, from which the client derives the whole
-- Decision with the kernel (redisstore/roundtrip.go, fromDebt): the debt
-- before the request, for an admission or a probe, or -1 - debt for a
-- denial. A state more than a window ahead of the reading, whose debt
-- stands for no wait (capacity + 1, see tokenbucket.lua), is replied
-- {tat - now, frac} instead: the client decides on that state.
local wa, wb
if charged then
  wa, wb = tat, frac
elseif carried then
  wa, wb = a, b
end
if wa then
  local v
  if wb == 0 then
    v = string.format(stateZero, wa)
  else
    v = string.format(stateFormat, wa, wb)
  end
  -- reset-after of the state written, in units, plus perMs - 1: rounded
  -- up to milliseconds below.
  local r = perMs - 1
  if charged or debt > 0 then
    r = r + wa - now
    if wb ~= 0 then
      r = r + 1
    end
  end
  redis.call('SET', key, v, 'PX', (r - r % perMs) / perMs + slackMs)
elseif carried then
  redis.call('DEL', key)
end
if debt > capacity then
  return {tat - now, frac}
end
if charged or n == 0 then
  return debt
end
return -1 - debt
