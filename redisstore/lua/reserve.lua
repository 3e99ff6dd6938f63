-- Reservations of one token bucket (redisstore.KeyedReserver), as
-- internal/kernel/hold.go decides them: ReserveHold, CancelHold, and every
-- other decision on the key shown to its hold (Observe). The bucket's
-- arithmetic is tokenbucket's, called as it stands (tokenbucket.lua); the
-- state is read and written as single.lua reads and writes it, so that a
-- Limiter of the same rule and prefix decides on the same key.
--
-- KEYS[1]        the state, prefix{key}, as in every script
-- KEYS[2]        the key's hold, prefix{key}:hold, a hash in the same slot
-- ARGV[1…6]      as in every script whose text all limiters share: the
--                reading, n and the limiter's constants (prelude.lua)
-- ARGV[#ARGV-4]  the limit
-- ARGV[#ARGV-3]  the window, in units
-- ARGV[#ARGV-2]  the operation: 'a' decides n as an admission (AllowN),
--                'r' reserves n, 'c' cancels
-- ARGV[#ARGV-1]  for 'r', the longest wait it may promise, in units (-1
--                for none)
-- ARGV[#ARGV]    for 'r', the ticket that holds a reservation that must
--                wait; for 'c', the ticket of the reservation to cancel: the
--                decimal text of a 64-bit number, compared as text
--
-- A reservation of n at reading now is an admission of n at the reading
-- it is due, now + d, where d is the RetryAfter of a denial at now (0 if
-- now admits n): kernel.TokenBucket.Reserve charges from max(TAT, due)
-- as an admission at due does, and its wait is that RetryAfter (with
-- maxWait 0 it decides as Allow). So the reservation calls tokenbucket at
-- now, and, if it is denied and d is within the longest wait, once more at
-- now + d, which admits n and says what to write.
--
-- The hold: field t the ticket, b the state the reservation found, as this
-- limiter writes it ('' for none: a missing key, or a converted one that
-- was fresh), a the state it left, d the reading at which its tokens are
-- due (kernel.TokenBucket.Due of a). The kernel's Hold also keeps Seen, the
-- newest reading shown to it, and a hold is live while the key's state is
-- still a and d lies after Seen. Here the hold is deleted as soon as a
-- reading at or after d is shown to it, or a decision finds the state
-- other than a: the same verdicts, since Seen only ever matters by whether
-- it has reached d, and once it has the hold is dead for good. A new
-- reservation's hold starts from the newer of its reading and the old
-- hold's Seen in the kernel; an old hold that is live has its Seen before
-- its d, and the new reservation is charged after it, so its d lies later
-- still, and the reading alone decides as the kernel does. A live hold
-- thus needs no write when a reading is shown to it (a denial still writes
-- nothing), and a dead one is deleted (DEL, which Redis allows when out of
-- memory: it frees). The hold's time to live is the state's: a hold
-- outlives no state it could give back.
--
-- Replies: 'a' single.lua's {allowed, remaining, retry-after,
-- reset-after}; 'r' {ok, wait, held}, held 1 if the reservation holds the
-- ticket; 'c' {ok}.
local hkey = KEYS[2]
local limit = tonumber(ARGV[#ARGV - 4])
local window = tonumber(ARGV[#ARGV - 3])
local op = ARGV[#ARGV - 2]
local ticket = ARGV[#ARGV]

-- parse returns the state a string of the key holds, if it is this
-- limiter's (its tag), as single.lua reads it; nil otherwise.
local function parse(s)
  local found, a, b = string.match(s, '^(%S+) (%S+) (%S+) ?%S*$')
  if found == tag then
    return {tonumber(a), tonumber(b)}
  end
end

-- format returns the string of state v under this limiter's tag, as
-- single.lua writes it.
local function format(v)
  return string.format('%s %d %d', tag, v[1], v[2])
end

local h = redis.call('HMGET', hkey, 't', 'b', 'a', 'd')
local s = redis.pcall('GET', key)

if op == 'c' then
  -- kernel.TokenBucket.CancelHold: another reservation's ticket changes
  -- nothing (its holder may still cancel it); this one's gives the tokens
  -- back if its hold is live, and the hold is dropped either way.
  if not h[1] or h[1] ~= ticket then
    return {0}
  end
  if s ~= h[3] or now >= tonumber(h[4]) then
    redis.call('DEL', hkey)
    return {0}
  end
  -- The state it found, with the time to live it needs at this reading;
  -- the first write is SET, which Redis refuses when out of memory (see
  -- the prelude), or a DEL, which frees.
  if h[2] == '' then
    redis.call('DEL', key)
  else
    local _, _, _, reset = tokenbucket(limit, window, 0, parse(h[2]))
    redis.call('SET', key, h[2], 'PX', ttl(reset))
  end
  redis.call('DEL', hkey)
  return {1}
end

-- Read the key as single.lua reads it.
local state, carried
if type(s) == 'table' then
  carried = carry(s) -- a list or a hash: Redis's WRONGTYPE unless converted
elseif s then
  state = parse(s)
  if not state then
    carried = carry(another(s))
  end
end
if carried then
  state = carried[1]
end

local allowed, remaining, retry, reset, write = tokenbucket(limit, window, n, state)
local delay, due = 0, nil
if op == 'r' and n > 0 then
  if allowed ~= 1 then
    delay = retry -- > 0: a denial's RetryAfter
  end
  if delay > tonumber(ARGV[#ARGV - 1]) then
    -- Refused, taking nothing (with a negative longest wait, even n that
    -- fits now): what a converted key needs is its state's wait until full.
    if allowed == 1 then
      local _, _, _, unspent = tokenbucket(limit, window, 0, state)
      allowed, write, reset = 0, nil, unspent
    end
  elseif allowed ~= 1 then
    local at = now
    now = at + delay
    allowed, remaining, retry, reset, write = tokenbucket(limit, window, n, state)
    now = at
    if allowed ~= 1 then
      error('admit: reserve.lua: a reservation does not fit at the reading it is due (a defect)')
    end
    reset = reset + delay -- the wait until full, from now rather than from due
    due = write[1] - window
    if write[2] > 0 then
      due = due + 1
    end
    if due <= now then
      due = nil -- due at this reading already: nothing to hold
    end
  end
end

-- Write as single.lua writes: a converted state whatever the decision.
local v = write or (carried and state)
if v then
  v = format(v)
  redis.call('SET', key, v, 'PX', ttl(reset))
elseif carried then
  redis.call('DEL', key)
end

if due then
  local before = ''
  if state then
    before = format(state)
  end
  redis.call('HSET', hkey, 't', ticket, 'b', before, 'a', v, 'd', due)
  redis.call('PEXPIRE', hkey, ttl(reset))
elseif h[1] and (v or carried or s ~= h[3] or now >= tonumber(h[4])) then
  redis.call('DEL', hkey)
end

if op == 'r' then
  local held = 0
  if due then
    held = 1
  end
  return {allowed, delay, held}
end
return {allowed, remaining, retry, reset}
