-- Objects with many holders (docs/design/primitives.md): a semaphore's
-- permits, a lock's readers, an election's leader. Follows prelude.lua in
-- the library and in each holders script (redis_scripts.cc). Each object is one hash, dlock:<kind>{<ns>:<name>}, in the
-- slot of the lock of the same name. One field per holder, named by its
-- owner id (always "c:..." or "t:...", so the second byte is ':'):
--   <token> <holds> <permits> <lease> <since> <expires> <alive> <slots>
-- as in a lock's value: the fencing token, the hold count, the permits it
-- holds (1 for a reader or a leader), the kept maximum lease (ms), since,
-- its lease's end and its holders' liveness deadline (server ms, -1: none);
-- slots: the permit slots it holds, "0,2" (a semaphore's: no two live
-- holders share one, so a resource fenced per slot sees one holder at a
-- time, with growing tokens; "0" for a reader or a leader).
-- Other fields (one letter) describe the object:
--   n  "<limit> <waited> <last token>": the N in force (0: no bound), 1
--      once a refused caller went on waiting, the last token granted.
--   q  "<until> <permits> <owner>": the head waiter's reservation; nobody
--      else is granted what would leave it short (a semaphore's FIFO head).
--   w  "<until> <refused> <owner>": a waiting writer's intent (a lock's
--      readers, dlock:r{<ns>:<name>}); no new reader is admitted while it
--      lives; refused 1 once a reader was turned away for it.
--   v  the leader's value (an election).

local function decode_holder(raw)
  local token, holds, permits, lease, since, expires, alive, slots =
    string.match(raw,
                 '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%-?%d+) ([%d,]+)$')
  if not token then
    error({err = 'dlock: a holder entry of another layout: ' .. raw})
  end
  return {token = tonumber(token), holds = tonumber(holds),
          permits = tonumber(permits), lease = tonumber(lease),
          since = tonumber(since), expires = tonumber(expires),
          alive = tonumber(alive), slots = slots}
end

local function encode_holder(h)
  return string.format('%d %d %d %d %d %d %d %s', h.token, h.holds, h.permits,
                       h.lease, h.since, h.expires, h.alive, h.slots)
end

-- The lowest `permits` slots of [0, limit) that no live holder holds, as
-- "0,2".
local function free_slots(o, permits, limit)
  local taken = {}
  for _, h in pairs(o.holders) do
    for x in string.gmatch(h.slots, '%d+') do taken[tonumber(x)] = true end
  end
  local out = {}
  for x = 0, limit - 1 do
    if #out == permits then break end
    if not taken[x] then out[#out + 1] = x end
  end
  return table.concat(out, ',')
end

-- A holder is gone once its lease ended or its liveness lapsed (on the
-- rounded-down clock, so never early).
local function holder_gone(h, now_down)
  return h.expires <= now_down or (h.alive >= 0 and h.alive <= now_down)
end

local function holder_left(h, now_down)
  local left = h.expires - now_down
  if h.alive >= 0 then left = math.min(left, h.alive - now_down) end
  return math.max(left, 0)
end

-- The hash as a table: its meta fields, its live holders (by owner), the
-- permits they hold and their latest lease end. Gone holders are deleted.
local function load_holders(key, now_down)
  local flat = redis.call('HGETALL', key)
  local o = {meta = {}, holders = {}, count = 0, used = 0, latest = 0}
  local dead = {}
  for i = 1, #flat, 2 do
    local field, raw = flat[i], flat[i + 1]
    if string.sub(field, 2, 2) == ':' then
      local h = decode_holder(raw)
      if holder_gone(h, now_down) then
        dead[#dead + 1] = field
      else
        o.holders[field] = h
        o.count = o.count + 1
        o.used = o.used + h.permits
        o.latest = math.max(o.latest, h.expires)
      end
    else
      o.meta[field] = raw
    end
  end
  if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
  return o
end

-- The object's state ('n'): N in force, waited, last token.
local function load_state(o, limit)
  local s = {limit = limit, waited = 0, last = 0}
  if o.meta.n then
    local n, waited, last = string.match(o.meta.n, '^(%d+) ([01]) (%d+)$')
    s.limit, s.waited, s.last = tonumber(n), tonumber(waited), tonumber(last)
  end
  return s
end

local function save_state(key, s)
  redis.call('HSET', key, 'n',
             string.format('%d %d %d', s.limit, s.waited, s.last))
end

-- A reservation or an intent ('q', 'w'): nil once over.
local function load_claim(raw, now_down)
  if not raw then return nil end
  local untl, num, owner = string.match(raw, '^(%d+) (%d+) (.*)$')
  if tonumber(untl) <= now_down then return nil end
  return {until_ms = tonumber(untl), num = tonumber(num), owner = owner}
end

local function encode_claim(c)
  return string.format('%d %d %s', c.until_ms, c.num, c.owner)
end

-- The hash expires with the latest of its holders' leases and claims: no
-- key outlives what it describes.
local function expire_object(key, o, extra_until)
  local untl = math.max(o.latest, extra_until or 0)
  if untl > 0 then
    redis.call('PEXPIREAT', key, untl)
  else
    redis.call('DEL', key)
  end
end

-- A fresh grant's token: the server's clock in µs, above the last one.
local function next_token(us, last)
  return math.max(tonumber(us), last + 1)
end

-- Redlock (`floor_key` the namespace's token floor on this master): a fresh
-- grant's token is the client's proposal unless the floor, or `above`,
-- has passed it, so that the masters of one round agree on it; the floor
-- rises to it (docs/redis.md, fencing over a quorum).
local function floored_token(floor_key, proposed, above)
  local token = math.max(tonumber(proposed), above + 1,
                         tonumber(redis.call('GET', floor_key) or '0') + 1)
  redis.call('SET', floor_key, string.format('%d', token))
  return token
end

local function new_holder(token, permits, slots, lease, up, ttl)
  local alive = -1
  if ttl > 0 then alive = up + ttl end
  return {token = token, holds = 1, permits = permits, lease = lease,
          since = up, expires = up + lease, alive = alive, slots = slots}
end

-- Re-entry (C5): one hold more, the longer lease kept, liveness refreshed.
local function reenter_holder(h, lease, up, ttl)
  h.holds = h.holds + 1
  h.lease = math.max(h.lease, lease)
  h.expires = math.max(h.expires, up + lease)
  if ttl == 0 then
    h.alive = -1
  elseif h.alive >= 0 then
    h.alive = math.max(h.alive, up + ttl)
  end
end

-- How long until some holder may end: when a refused caller looks again.
local function soonest_end(o, now_down)
  local left = nil
  for _, h in pairs(o.holders) do
    local l = holder_left(h, now_down)
    if not left or l < left then left = l end
  end
  return left or 0
end

-- Takes n holds of the owner's off (n more than held: all). Returns nil
-- when the owner holds nothing live here, else the holds left; at zero its
-- entry is gone and o's count and latest lease no longer include it.
local function take_off_holder(key, o, owner, n)
  local h = o.holders[owner]
  if not h then return nil end
  local left = h.holds - n
  if left > 0 then
    h.holds = left
    redis.call('HSET', key, owner, encode_holder(h))
    return left
  end
  redis.call('HDEL', key, owner)
  o.holders[owner] = nil
  o.count = o.count - 1
  o.latest = 0
  for _, other in pairs(o.holders) do
    o.latest = math.max(o.latest, other.expires)
  end
  return 0
end

-- A write hold's key outlives its owner's read of it: its liveness deadline
-- never below the read's, and none when the read has none. Otherwise the
-- write could lapse while the read is still believed, and another writer's
-- SET would come in beside the read. Returns whether `v` changed.
local function keep_write_alive_for_read(v, h)
  if v.alive < 0 then return false end
  local alive = h.alive < 0 and -1 or math.max(v.alive, h.alive)
  if alive == v.alive then return false end
  v.alive = alive
  return true
end

-- A holder's renewal (C5, C7): the lease to the larger of the one asked and
-- the kept maximum from now, a live caller's liveness refreshed, the hash
-- never expiring before it. Returns the entry, or nil when the owner holds
-- nothing live here.
local function renew_holder(key, owner, lease, ttl, down, up)
  local raw = redis.call('HGET', key, owner)
  if not raw then return nil end
  local h = decode_holder(raw)
  if holder_gone(h, down) then return nil end
  h.lease = math.max(h.lease, lease)
  h.expires = up + h.lease
  if ttl > 0 and h.alive >= 0 then h.alive = math.max(h.alive, up + ttl) end
  redis.call('HSET', key, owner, encode_holder(h))
  if redis.call('PEXPIRETIME', key) < h.expires then
    redis.call('PEXPIREAT', key, h.expires)
  end
  return h
end

-- The hash as holders_inspect.lua answers it: {limit, head waiter or '',
-- its permits, value or false, then per live holder: owner, holds,
-- permits, token, since, ms left, live, slots} (live: 1 while its liveness
-- deadline lies ahead, -1 when it has none); {} when nothing is held or
-- waiting.
local function describe_holders(key, now_down, now_up)
  local o = load_holders(key, now_down)
  local q = load_claim(o.meta.q or o.meta.w, now_down)
  if o.count == 0 and not q then return {} end
  local s = load_state(o, 0)
  local out = {s.limit, q and q.owner or '', q and q.num or 0,
               o.meta.v or false}
  for owner, h in pairs(o.holders) do
    local live = -1
    if h.alive >= 0 then live = 1 end
    for _, x in ipairs({owner, h.holds, h.permits, h.token, h.since,
                        math.max(h.expires - now_up, 0), live, h.slots}) do
      out[#out + 1] = x
    end
  end
  return out
end

-- A read-write lock (C23): while readers hold, the lock's own key holds a
-- marker, so that a writer's SET NX (acquire.lua) fails on it and a client
-- of an older layout waits as for a kept lock. A marker is a lock value with
-- owner '' (as a kept lock's) told apart by its hold count:
--   0 kept after release (release.lua)
--   1 read-held: the readers are in dlock:r{<ns>:<name>}; its token is the
--     last reader's, its expiry the latest reader's lease end
--   2 handed by the last reader to the writer whose intent ('w') waits,
--     until that intent's end; refused to everyone else
local kReadHeld, kHandedOver = 1, 2

local function marker_of(token, since, expires, holds, waited)
  return {token = token, holds = holds, lease = 0, since = since,
          expires = expires, alive = -1, waited = waited, owner = ''}
end

local function is_marker(v, holds)
  return v and v.owner == '' and v.holds == holds
end
