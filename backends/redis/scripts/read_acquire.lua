-- A read lock (C23). KEYS[1] the lock (dlock:{<ns>:<name>}), KEYS[2] its
-- readers (dlock:r{<ns>:<name>}), KEYS[3] (Redlock only) the namespace's
-- token floor on this master. ARGV[1] owner, ARGV[2] lease (ms), ARGV[3]
-- '1' when the caller will wait, ARGV[4] liveness TTL (ms; '0': none),
-- ARGV[5] (Redlock only) the token the client proposes, as acquire.lua's
-- ARGV[6]. Returns {1, token, holds} when granted, {0, ms until it may be
-- free, holder or ''} when refused.
local owner, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local lock, readers = KEYS[1], KEYS[2]
local us, down, up = clock()
local v = decode(redis.call('GET', lock))

local function refuse(left, holder)
  if ARGV[3] == '1' and mark_waiting(v) then
    -- the writer's release (or the keep's end) tells us
    redis.call('SET', lock, encode(v), 'KEEPTTL')
  end
  return {0, math.max(left, 0), holder}
end

if v and v.owner == owner and not lapsed(v, down) then
  -- The writer takes the read lock too: a read hold with its token, and
  -- waited set so that its write release keeps the read (a downgrade).
  local o = load_holders(readers, down)
  local h = o.holders[owner]
  if h then
    reenter_holder(h, lease, up, ttl)
  else
    h = new_holder(v.token, 1, '0', lease, up, ttl)
  end
  redis.call('HSET', readers, owner, encode_holder(h))
  o.latest = math.max(o.latest, h.expires)
  expire_object(readers, o)
  -- The write hold's key outlives this read whatever happens to the write:
  -- its expiry, kept lease (renew.lua counts from it) and liveness deadline
  -- never below the read's, so that no writer comes in while it lasts.
  if v.waited == '0' then v.waited = '1' end
  v.lease = math.max(v.lease, h.lease)
  v.expires = math.max(v.expires, h.expires)
  keep_write_alive_for_read(v, h)
  redis.call('SET', lock, encode(v), 'PXAT', v.expires)
  return {1, v.token, h.holds}
end
if v and v.owner ~= '' and not lapsed(v, down) then
  return refuse(time_left(v, down), v.owner)  -- a writer holds it
end
if v and v.owner == '' and v.holds ~= kReadHeld then
  return refuse(time_left(v, down), '')  -- kept, or handed to a writer
end

-- Free, read-held, or a lapsed writer's (whose reads lapsed with it).
local o = load_holders(readers, down)
local s = load_state(o, 0)
local w = load_claim(o.meta.w, down)
local h = o.holders[owner]
if not h and w and w.owner ~= owner then
  -- A writer waits for the readers there now: no new one (C23's bound).
  if w.num == 0 then
    w.num = 1  -- readers were refused: the writer's release tells them
    redis.call('HSET', readers, 'w', encode_claim(w))
  end
  if v then
    return refuse(math.min(w.until_ms - down, soonest_end(o, down)), w.owner)
  end
  return {0, math.max(w.until_ms - down, 0), w.owner}
end
if h then
  reenter_holder(h, lease, up, ttl)
else
  local floor = s.last
  if v then floor = math.max(floor, v.token) end
  local token = next_token(us, floor)
  if KEYS[3] then token = floored_token(KEYS[3], ARGV[5], floor) end
  h = new_holder(token, 1, '0', lease, up, ttl)
  s.last = h.token
end
redis.call('HSET', readers, owner, encode_holder(h))
save_state(readers, s)
o.latest = math.max(o.latest, h.expires)
expire_object(readers, o, w and w.until_ms)
local since, waited = up, '0'
if is_marker(v, kReadHeld) then since = v.since end
if v then waited = v.waited end
local m = marker_of(s.last, since, o.latest, kReadHeld, waited)
redis.call('SET', lock, encode(m), 'PXAT', m.expires)
return {1, h.token, h.holds}
