-- The rules of an admit.Limits on one key, decided all or nothing, as
-- internal/kernel/composite.go: n is admitted iff every rule admits it at
-- this reading, and then every rule is charged; if any rule denies, nothing
-- is written.
--
-- ARGV[7 + 3i]  rule i's algorithm: t, f, l or s (for i from 0)
-- ARGV[8 + 3i]  rule i's limit
-- ARGV[9 + 3i]  rule i's window, in units
--
-- The state is one hash, so that a decision touches one key (one slot of a
-- Redis Cluster): field 'tag' holds the tag, and field i rule i's state,
-- its numbers separated by spaces as a single rule's string holds them. A
-- sliding log is the kernel's ring of limit slots: field i holds 'head
-- size', and field 'i:j' slot j, so that its entries, oldest first, are
-- slots head, head + 1, ... (mod limit), and the binary search reads each
-- with one HGET. A log a change of limits carried past its limit (see
-- carry.lua) has a longer ring: field i holds 'head size ring', and the
-- slots go mod ring.
local algorithms = {t = tokenbucket, f = fixedwindow, l = slidinglog, s = slidingcounter}
local parts, fields = {}, {'tag'}
for i = 0, (#ARGV - 6) / 3 - 1 do
  local a = 7 + 3 * i
  parts[i + 1] = {alg = ARGV[a], limit = tonumber(ARGV[a + 1]), window = tonumber(ARGV[a + 2]), field = tostring(i)}
  fields[i + 2] = tostring(i)
end
local got = redis.pcall('HMGET', key, unpack(fields))
local carried
if got.err then
  carried = carry(got) -- a string or a list: Redis's WRONGTYPE unless converted
elseif got[1] and got[1] ~= tag then
  carried = carry(another(got[1]))
end
for i, p in ipairs(parts) do
  local state
  if carried then
    state = carried[i]
    if p.alg == 'l' then
      local stamps = state or {}
      p.stamps = stamps
      state = {size = #stamps, at = function(j)
        return stamps[j + 1]
      end}
    end
  elseif got[i + 1] then
    local a, b, c = string.match(got[i + 1], '^(%S+) (%S+) ?(%S*)$')
    state = {tonumber(a), tonumber(b), tonumber(c)}
  end
  if p.alg == 'l' and not carried then
    local head, size, ring = 0, 0, p.limit
    if state then
      head, size, ring = state[1], state[2], state[3] or p.limit
    end
    local slot = p.field .. ':'
    p.head, p.ring = head, ring
    state = {size = size, at = function(j)
      return tonumber(redis.call('HGET', key, slot .. ((head + j) % ring)))
    end}
  end
  p.state = state
  p.decide = algorithms[p.alg]
end

local verdicts, all = {}, true
for i, p in ipairs(parts) do
  local allowed, remaining, retry, reset, write = p.decide(p.limit, p.window, n, p.state)
  verdicts[i] = {allowed, remaining, retry, reset, write}
  all = all and allowed == 1
end

-- rewrite writes a converted key whatever the decision, so that it converts
-- once, at this reading: a hash built anew with this limiter's tag and each
-- rule's state, after the admission if there is one (a sliding log's ring
-- from slot 0, its carried entries all live at this reading, so that an
-- admission drops none); a key whose every state is fresh is a missing key.
-- Its first write is one Redis refuses when out of memory (see the
-- prelude), and SET replaces a key of any type, which DEL then removes for
-- the hash.
local function rewrite(reset)
  local fields = {'tag', tag}
  local function put(field, value)
    fields[#fields + 1] = field
    fields[#fields + 1] = value
  end
  for i, p in ipairs(parts) do
    local w = verdicts[i][5]
    if p.alg == 'l' then
      local size = 0
      for k = 1, #p.stamps do
        put(p.field .. ':' .. size, string.format('%d', p.stamps[k]))
        size = size + 1
      end
      if w then
        for _ = 1, n do
          put(p.field .. ':' .. size, string.format('%d', w[1]))
          size = size + 1
        end
      end
      if size > p.limit then
        put(p.field, string.format('0 %d %d', size, size)) -- a ring as long as the carried log
      elseif size > 0 then
        put(p.field, string.format('0 %d', size))
      end
    else
      local v = w or p.state
      if v and #v == 2 then
        put(p.field, string.format('%d %d', v[1], v[2]))
      elseif v then
        put(p.field, string.format('%d %d %d', v[1], v[2], v[3]))
      end
    end
  end
  if #fields == 2 then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, tag)
  redis.call('DEL', key)
  for i = 1, #fields, 2000 do
    redis.call('HSET', key, unpack(fields, i, math.min(i + 1999, #fields)))
  end
  redis.call('PEXPIRE', key, ttl(reset))
end

if not all then
  -- The rule that binds is the first with the largest retry-after. The
  -- rules that admitted n were charged only in what they returned: their
  -- reset-after is taken again from the state as it stays.
  local retry, reset, which = 0, 0, 0
  for i, p in ipairs(parts) do
    local v = verdicts[i]
    local r, z = v[3], v[4]
    if v[1] == 1 then
      local _, _, _, probe = p.decide(p.limit, p.window, 0, p.state)
      r, z = 0, probe
      v[5] = nil -- not charged
    end
    if r > retry then
      retry, which = r, i - 1
    end
    reset = math.max(reset, z)
  end
  if carried then
    rewrite(reset)
  end
  return {0, 0, retry, reset, which}
end

-- Admitted (or a probe): the rule that binds is the first with the fewest
-- remaining.
local remaining, reset, which = 0, 0, 0
for i, v in ipairs(verdicts) do
  if i == 1 or v[2] < remaining then
    remaining, which = v[2], i - 1
  end
  reset = math.max(reset, v[4])
end
if carried then
  rewrite(reset)
elseif n > 0 then
  -- Every read and the decision are done; now the writes, the first of them
  -- one Redis refuses when it is out of memory (HSET): see the prelude.
  local batch = {}
  local function put(field, value)
    batch[#batch + 1] = field
    batch[#batch + 1] = value
    if #batch >= 2000 then
      redis.call('HSET', key, unpack(batch))
      batch = {}
    end
  end
  if not got[1] then
    put('tag', tag)
  end
  for i, p in ipairs(parts) do
    local w = verdicts[i][5]
    if p.alg == 'l' then
      -- drop the dead oldest entries, then append n at time eff
      local ring, t = p.ring, string.format('%d', w[1])
      local head = (p.head + w[2]) % ring
      local size = p.state.size - w[2]
      for _ = 1, n do
        put(p.field .. ':' .. ((head + size) % ring), t)
        size = size + 1
      end
      if ring ~= p.limit then
        put(p.field, string.format('%d %d %d', head, size, ring))
      else
        put(p.field, string.format('%d %d', head, size))
      end
    elseif #w == 2 then
      put(p.field, string.format('%d %d', w[1], w[2]))
    else
      put(p.field, string.format('%d %d %d', w[1], w[2], w[3]))
    end
  end
  if #batch > 0 then
    redis.call('HSET', key, unpack(batch))
  end
  redis.call('PEXPIRE', key, ttl(reset))
end
return {1, remaining, 0, reset, which}
