-- One rule whose state is a string (token bucket, fixed window, sliding
-- counter): the tag, then the state's numbers, separated by spaces. The
-- script's header (see redisstore/script.go) defines, with the other
-- constants, its rule's limit and window (in units), the pattern that reads
-- a state of this tag (statePattern) and the formats that write one
-- (stateFormat; stateZero for two numbers whose second is 0), each with the
-- tag written in it: a state is read with one match and written with one
-- format, and a token bucket's fraction, 0 whenever its Window is a whole
-- number of units per token, costs no conversion. It calls no helper (see
-- tokenbucket.lua).
--
-- The state is read into plain values, a, b and c (c nil for a state of
-- two numbers; all nil for a fresh key), and the decision, which
-- script.go puts after this part, follows. A token bucket's runs in place
-- (see tokenbucket.lua), and tokenbucket_reply.lua writes and replies with
-- the bucket's debt; the others call their algorithm's function, which
-- sets allowed, remaining, retry-after and reset-after, and wa, wb and
-- wc, the state to write (wa nil for none), and single_write.lua writes
-- and replies with the four. Numbers are read by arithmetic
-- (a + 0), which converts a string once, where tonumber converts it twice;
-- a state this limiter wrote is read as tonumber reads it.
local s = redis.pcall('GET', key)
local a, b, c, carried
if type(s) == 'table' then
  carried = carry(s) -- a list or a hash: Redis's WRONGTYPE unless converted
elseif s then
  a, b, c = string.match(s, statePattern)
  if a then
    a, b = a + 0, b + 0
    if c == '' then
      c = nil
    else
      c = c + 0
    end
  else
    carried = carry({err = string.format(anotherRule, key, string.sub(s, 1, #tag + 40), tag)})
  end
end
if carried and carried[1] then
  a, b, c = carried[1][1], carried[1][2], carried[1][3]
end
