-- A key written under other rules, converted to this limiter's as
-- internal/kernel/carry.go (kernel.Convert) converts a state: the reading
-- part of the script calls carry when the key's tag is not this limiter's,
-- or when the key is of another Redis type (a single rule's string, a
-- sliding log's list, a composite's hash), and carry returns the state of
-- each of this limiter's rules at this reading, in the form the algorithm
-- functions take, or raises an error. The reading part then decides on
-- those states and writes them under this limiter's tag whatever the
-- decision, so that a key converts once, at the reading of its first touch.
--
-- The old rules are read from the key's tag: each rule's algorithm, limit
-- and window in units, joined by '+', after "ns:" for a tag in
-- nanoseconds. A tag that names no rules the client could have written,
-- or a state that does not match it, is an error; so is a tag in other
-- units (the readings of server time and of a WithClock clock are different
-- clocks); and so is any other rule's key when ARGV[6] is '' (the limiter
-- converts nothing, see prelude.lua). Converting never guesses.
--
-- Exactness: an old rule's consumption at the reading is N/D requests, N
-- and D integers, N at most 2^53 and D 1 or the rule's window: every rule
-- read from a tag is checked to be one the client accepts (limit below
-- 2^31, window at most 2^51 units, limit x window at most 2^52 for the
-- token bucket and the sliding counter), so a bucket's debt (past a full
-- bucket's for a reservation or a carried debt; saturated at 2^52 units,
-- a debt of more than a window per request) and a sliding counter's
-- prev x (window - elapsed) + curr x window are exact. What a new rule
-- carries is not clamped to its limit (a limit lowered and raised back
-- must not hand the difference out again), only to 2^31 requests, more
-- than any limit, so that it still denies every request, and a bucket's
-- debt to 2^52 units. What a new rule holds is the ceiling of a quotient of two
-- products of such numbers, up to 2^106: ceilQuo computes it in base-2^24
-- digits, whose partial products stay below 2^49, so nothing is rounded.
-- Choosing the old rule a new rule carries from compares ratios of windows
-- by cross-multiplying them, products up to 2^102, in the same digits.
local strategy = ARGV[6]

-- carry returns the states this limiter's rules carry from the key's state
-- under other rules, indexed as the rules are (nil for a fresh state; a
-- sliding log's is the list of its entries' times, ascending). For a
-- limiter that converts nothing it raises refusal, the error the key would
-- have met without conversion. Its helpers are defined inside it, so that a
-- decision on a key of this limiter's rules does not build them.
local function carry(refusal)
  if strategy == '' then
    error(refusal)
  end

  local function unreadable(what)
    error({err = 'ADMIT key ' .. key .. ' holds ' .. what .. ', which no limiter of these units wrote: ' ..
      'it is not converted (WithCarry); give limiters of different rules different prefixes'})
  end

  -- int returns the integer v (a string or number) names, or nil.
  local function int(v)
    local x = tonumber(v)
    if x and x == math.floor(x) and math.abs(x) <= 2 ^ 53 then
      return x
    end
  end

  -- rules returns the units ('ns' or 'us') and the rules of tag t, each
  -- {alg, limit, window}, or nil if t names none the client could write.
  local function rules(t)
    local unit = 'us'
    if string.sub(t, 1, 3) == 'ns:' then
      unit, t = 'ns', string.sub(t, 4)
    end
    local list = {}
    for r in string.gmatch(t .. '+', '([^+]*)%+') do
      local alg, limit, window = string.match(r, '^([tfls])([1-9]%d*)/([1-9]%d*)$')
      if not alg then
        return nil
      end
      limit, window = tonumber(limit), tonumber(window)
      if limit >= 2 ^ 31 or window > 2 ^ 51 or ((alg == 't' or alg == 's') and limit * window > 2 ^ 52) then
        return nil
      end
      list[#list + 1] = {alg = alg, limit = limit, window = window}
    end
    return unit, list
  end

  -- The key's tag and type, then each old rule's state, read as the
  -- reading parts read them: state(i) is rule i's (a log is {size, at,
  -- newest}, newest(k) its k newest entries, ascending).
  local kind = redis.call('TYPE', key)['ok']
  local found, s
  if kind == 'string' then
    s = redis.call('GET', key)
    found = string.match(s, '^(%S+) ')
  elseif kind == 'list' then
    found = redis.call('LINDEX', key, 0)
  elseif kind == 'hash' then
    found = redis.call('HGET', key, 'tag')
  end
  local unit, from
  if found then
    unit, from = rules(found)
  end
  if not from or (kind == 'hash') ~= (#from > 1) or (#from == 1 and (kind == 'list') ~= (from[1].alg == 'l')) then
    unreadable('a ' .. kind .. ' tagged ' .. string.sub(tostring(found), 1, 80))
  end
  local ours, to = rules(tag)
  if unit ~= ours then
    error({err = 'ADMIT key ' .. key .. ' holds state counted in ' .. unit .. ' (' .. found .. '), this limiter counts ' ..
      ours .. ' (' .. tag .. '): it is not converted (WithCarry); give limiters of different clocks different prefixes'})
  end

  local function entry(v)
    local x = int(v)
    if not x then
      unreadable('a log entry ' .. tostring(v) .. ' under ' .. found)
    end
    return x
  end
  -- numbers returns the state of the string v ('a b' or 'a b c'), nil for
  -- a missing one.
  local function numbers(v, alg)
    if not v then
      return nil
    end
    local a, b, c = string.match(v, '^(%S+) (%S+) ?(%S*)$')
    local st = {int(a), int(b), int(c)}
    if not st[1] or not st[2] or (alg == 's' and not st[3]) then
      unreadable('a state ' .. v .. ' under ' .. found)
    end
    return st
  end
  -- many returns the values of fields (HMGET in batches), as entries.
  local function many(fields)
    local out = {}
    for i = 1, #fields, 1000 do
      local got = redis.call('HMGET', key, unpack(fields, i, math.min(i + 999, #fields)))
      for _, v in ipairs(got) do
        out[#out + 1] = entry(v)
      end
    end
    return out
  end
  local states = {}
  if kind == 'string' then
    states[1] = numbers(string.sub(s, #found + 2), from[1].alg)
  elseif kind == 'list' then
    local size = redis.call('LLEN', key) - 1
    states[1] = {size = size, at = function(i)
      return entry(redis.call('LINDEX', key, i + 1))
    end, newest = function(k)
      local out = {}
      for _, v in ipairs(redis.call('LRANGE', key, size - k + 1, size)) do
        out[#out + 1] = entry(v)
      end
      return out
    end}
  else
    local fields = {}
    for i = 1, #from do
      fields[i] = tostring(i - 1)
    end
    local got = redis.call('HMGET', key, unpack(fields))
    for i, r in ipairs(from) do
      if r.alg == 'l' then
        local head, size, ring = 0, 0, r.limit
        if got[i] then
          local st = numbers(got[i], r.alg)
          head, size, ring = st[1], st[2], st[3] or r.limit -- a carried log's ring may be longer
        end
        local slot = (i - 1) .. ':'
        states[i] = {size = size, at = function(j)
          return entry(redis.call('HGET', key, slot .. ((head + j) % ring)))
        end, newest = function(k)
          local names = {}
          for j = size - k, size - 1 do
            names[#names + 1] = slot .. ((head + j) % ring)
          end
          return many(names)
        end}
      else
        states[i] = numbers(got[i], r.alg)
      end
    end
  end

  -- The arithmetic in base-2^24 digits, least significant first.
  local base = 16777216
  local function digits(x) -- 0 <= x <= 2^53: three digits
    local d0 = x % base
    x = (x - d0) / base
    local d1 = x % base
    return {d0, d1, (x - d1) / base}
  end
  local function times(a, b) -- each partial sum stays below 2^49
    local r = {}
    for k = 1, #a + #b do
      r[k] = 0
    end
    for i = 1, #a do
      local c = 0
      for j = 1, #b do
        local v = r[i + j - 1] + a[i] * b[j] + c
        c = math.floor(v / base)
        r[i + j - 1] = v - c * base
      end
      r[i + #b] = c
    end
    return r
  end
  local function compare(a, b)
    for k = math.max(#a, #b), 1, -1 do
      local x, y = a[k] or 0, b[k] or 0
      if x ~= y then
        return x < y and -1 or 1
      end
    end
    return 0
  end
  -- compareProducts returns the sign of a x b - c x d (exact in doubles
  -- when both products are below 2^53, as in ceilQuo).
  local function compareProducts(a, b, c, d)
    local ab, cd = a * b, c * d
    if ab < 2 ^ 53 and cd < 2 ^ 53 then
      return ab < cd and -1 or (ab > cd and 1 or 0)
    end
    return compare(times(digits(a), digits(b)), times(digits(c), digits(d)))
  end
  -- ceilQuo returns the ceiling of (a x b) / (c x d), for integers a, b, c,
  -- d in [0, 2^53], c x d > 0, whose quotient is at most 2^52. Products
  -- below 2^53 are exact in doubles (a product rounded below 2^53 was not
  -- rounded). Otherwise the quotient in doubles is within a few units of
  -- the truth (three roundings), and the digits' comparisons step to it.
  local function ceilQuo(a, b, c, d)
    local ab, cd = a * b, c * d
    if ab < 2 ^ 53 and cd < 2 ^ 53 then
      local k = fdiv(ab, cd)
      if k * cd < ab then
        k = k + 1
      end
      return k
    end
    local p, q = times(digits(a), digits(b)), times(digits(c), digits(d))
    local k = math.floor(ab / cd)
    while k > 0 and compare(times(digits(k), q), p) > 0 do
      k = k - 1
    end
    while compare(times(digits(k + 1), q), p) <= 0 do
      k = k + 1
    end
    if compare(times(digits(k), q), p) < 0 then
      k = k + 1
    end
    return k
  end

  -- nearer reports whether window a is strictly nearer w than window b is,
  -- by ratio: max(a,w)/min(a,w) < max(b,w)/min(b,w), compared exactly by
  -- cross-multiplying, as kernel.Convert compares them. Windows are at most
  -- 2^51 units, so the products reach 2^102, in digits past 2^53. (The
  -- ratios of windows in microseconds are those of the same windows in
  -- nanoseconds, so the units do not change the answer.)
  local function nearer(a, b, w)
    return compareProducts(math.max(a, w), math.min(b, w), math.max(b, w), math.min(a, w)) < 0
  end

  -- source returns the old rule new rule r carries from: the first with
  -- r's window and algorithm, else the first with r's window, else the one
  -- whose window is nearest r's by ratio (compared exactly), the first on a
  -- tie.
  local function source(r)
    for i, o in ipairs(from) do
      if o.window == r.window and o.alg == r.alg then
        return i
      end
    end
    for i, o in ipairs(from) do
      if o.window == r.window then
        return i
      end
    end
    local best = 1
    for i = 2, #from do
      if nearer(from[i].window, from[best].window, r.window) then
        best = i
      end
    end
    return best
  end

  -- consumed returns how many requests' worth of old rule o's budget its
  -- state st has in use at now, as N / D: a token bucket's debt in tokens
  -- (past its limit for a bucket in debt past a full bucket), a fixed window's count in now's window, a sliding
  -- counter's estimate (the previous window's count weighted by the part of
  -- it the span still covers, plus the current one's), a sliding log's
  -- live entries. Each reads the state as its algorithm's function does.
  local function consumed(o, st)
    local limit, window = o.limit, o.window
    if o.alg == 't' then
      if not st then
        return 0, window
      end
      local tat, frac = st[1], st[2]
      if tat < now or (tat == now and frac == 0) then
        return 0, window
      end
      local ahead = tat - now
      if ahead > fdiv(2 ^ 52 - frac, limit) then
        return 2 ^ 52, window -- saturated (see Exactness)
      end
      return ahead * limit + frac, window
    elseif o.alg == 'f' then
      if st and st[2] ~= 0 and fdiv(now, window) <= st[1] then
        return st[2], 1
      end
      return 0, 1
    elseif o.alg == 's' then
      if not st or (st[2] == 0 and st[3] == 0) then
        return 0, window
      end
      local w, prev, curr = st[1], st[2], st[3]
      local idx = fdiv(now, window)
      local elapsed = now - idx * window
      if idx < w then -- a stale reading counts as the start of the newer window
        return prev * window + curr * window, window
      elseif idx == w then
        return prev * (window - elapsed) + curr * window, window
      elseif idx == w + 1 then
        return curr * (window - elapsed), window
      end
      return 0, window
    end
    local size = st.size
    if size == 0 then
      return 0, 1
    end
    local eff = math.max(now, st.at(size - 1))
    local lo, hi = 0, size -- binary search: entries [0, lo) have expired
    while lo < hi do
      local mid = fdiv(lo + hi, 2)
      if eff - st.at(mid) >= window then
        lo = mid + 1
      else
        hi = mid
      end
    end
    return size - lo, 1
  end

  -- product returns the product of the integers of list (each at most
  -- 2^53) in digits.
  local function product(list)
    local r = {1}
    for _, x in ipairs(list) do
      r = times(r, digits(x))
    end
    return r
  end
  -- the most a rule carries, as kernel.Convert: requests, and a bucket's
  -- units of debt (windows are at most 2^51 units, so never less than one)
  local cmax, tmax = 2 ^ 31, 2 ^ 52

  -- hold returns the state of new rule r that holds c requests' worth in
  -- use at now, c carried from old rule o's state st as the strategy says
  -- (nil when c is 0), rounded up, never kinder, and not clamped to r's
  -- limit: a token bucket in debt by c x window / limit from now, rounded
  -- up to a whole unit (more than a window ahead when c is past the
  -- limit); a fixed window with ceil(c) in now's window; a sliding counter
  -- with ceil(c) in now's window and nothing before; a sliding log with
  -- the newest ceil(c) live entries of an old sliding log, then entries at
  -- the newest of them or now, whichever is later, up to ceil(c) (more
  -- entries than its limit when c is past it: the newest limit of them,
  -- then the rest as copies of the newest, as kernel.Convert keeps them).
  local function hold(r, o, st)
    local used, per = consumed(o, st) -- c = used / per, before the strategy
    if used == 0 then
      return nil
    end
    -- c = used x nf / (per x df); whole = ceil(c); ticks = ceil(c x
    -- window / limit), for a bucket
    local nf, df = 1, 1
    if strategy == 'p' then
      nf, df = r.limit, o.limit
    end
    local whole, ticks
    if compare(product({used, nf}), product({per, df, cmax})) >= 0 then
      whole = cmax
      if compare(product({cmax, r.window}), product({r.limit, tmax})) >= 0 then
        ticks = tmax
      else
        ticks = ceilQuo(cmax, r.window, 1, r.limit)
      end
    else
      whole = ceilQuo(used, nf, per, df)
      if r.alg == 't' then
        -- c x window / limit = used x window / (per x d)
        local d = r.limit
        if strategy == 'p' then
          d = o.limit
        end
        if compare(product({used, r.window}), product({per, d, tmax})) >= 0 then
          ticks = tmax
        else
          ticks = ceilQuo(used, r.window, per, d)
        end
      end
    end
    if r.alg == 't' then
      return {now + ticks, 0}
    elseif r.alg == 'f' then
      return {fdiv(now, r.window), whole}
    elseif r.alg == 's' then
      return {fdiv(now, r.window), 0, whole}
    end
    whole = math.min(whole, math.max(r.limit, 2 ^ 16)) -- kernel.Convert's maxCarriedEntries
    local stamps = {}
    if o.alg == 'l' then
      stamps = st.newest(math.min(used, whole))
    end
    local eff = now
    if #stamps > 0 then
      eff = math.max(eff, stamps[#stamps])
    end
    for k = #stamps + 1, whole do
      stamps[k] = eff
    end
    if whole > r.limit then
      -- as kernel.Convert's log: the newest limit entries, and the rest as
      -- copies of the newest (later than their own times: never kinder)
      local out = {}
      for k = whole - r.limit + 1, whole do
        out[#out + 1] = stamps[k]
      end
      for _ = 1, whole - r.limit do
        out[#out + 1] = stamps[whole]
      end
      stamps = out
    end
    return stamps
  end

  local carried = {}
  if strategy ~= 'n' then
    for j, r in ipairs(to) do
      local i = source(r)
      carried[j] = hold(r, from[i], states[i])
    end
  end
  return carried
end
