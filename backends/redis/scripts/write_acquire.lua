-- The writer of a read-write lock (C23), asked after acquire.lua refused it
-- a lock held by nobody (owner ''): kept after release, read-held, or
-- handed over by the last reader (holders.lua, markers). KEYS[1] the lock,
-- KEYS[2] its readers, KEYS[3] (Redlock only) the namespace's token floor
-- on this master. ARGV[1] owner, ARGV[2] lease (ms), ARGV[3] '1' when the
-- caller will wait, ARGV[4] liveness TTL (ms; '0': none), ARGV[5] how long
-- a waiting writer's intent lives without a retry (ms), ARGV[6] (Redlock
-- only) the token the client proposes, as acquire.lua's ARGV[6].
-- Returns {1, token, 1} when granted, {0, ms until it may change, holder or
-- ''} when refused, {-4, 0, ''} when the owner reads it: no upgrade (C23).
local owner, lock, readers = ARGV[1], KEYS[1], KEYS[2]
local lease, ttl = tonumber(ARGV[2]), tonumber(ARGV[4])
local will_wait = ARGV[3] == '1'
local us, down, up = clock()
local v = decode(redis.call('GET', lock))
if not v then return {0, 0, ''} end  -- freed since: look again at once
if v.owner ~= '' or v.holds == 0 then
  -- Taken by a writer since, or kept: acquire.lua's answer stands.
  return {0, time_left(v, down), v.owner}
end

local o = load_holders(readers, down)
local w = load_claim(o.meta.w, down)

local function grant(waited)
  -- A token above the last reader's (the marker's), so above every earlier
  -- writer's too; waited 1 when refused readers are to be told of its end.
  local alive = -1
  if ttl > 0 then alive = up + ttl end
  local token = next_token(us, v.token)
  if KEYS[3] then token = floored_token(KEYS[3], ARGV[6], v.token) end
  local fresh = {token = token, holds = 1, lease = lease,
                 since = up, expires = up + lease, alive = alive,
                 waited = waited, owner = owner}
  redis.call('SET', lock, encode(fresh), 'PXAT', fresh.expires)
  redis.call('DEL', readers)
  return {1, fresh.token, 1}
end

local function mark_waited()
  if will_wait and mark_waiting(v) then
    redis.call('SET', lock, encode(v), 'KEEPTTL')
  end
end

if o.holders[owner] then return {-4, 0, ''} end
if w and w.owner == owner and o.count == 0 then
  -- Handed over by the last reader, or its readers' leases ended: ours.
  if w.num > 0 or v.waited ~= '0' then return grant('1') end
  return grant('0')
end
if w and w.owner ~= owner then
  -- Another writer's turn first (C23's bound is the first waiter's).
  mark_waited()
  if v.holds == kHandedOver then return {0, time_left(v, down), w.owner} end
  return {0, soonest_end(o, down), w.owner}
end
if o.count == 0 then return grant(v.waited) end
if will_wait then
  -- The first waiting writer's intent stops new readers; it is handed the
  -- lock when the readers there now are gone.
  local refused = 0
  if w then refused = w.num end
  w = {until_ms = up + tonumber(ARGV[5]), num = refused, owner = owner}
  redis.call('HSET', readers, 'w', encode_claim(w))
  expire_object(readers, o, w.until_ms)
  mark_waited()
end
return {0, soonest_end(o, down), ''}
