-- KEYS[1] the lock, KEYS[2] its readers. ARGV[1] owner, ARGV[2] holds to
-- take off (more than held: all), ARGV[3] channel, ARGV[4] message.
-- The last reader hands the lock to the writer whose intent waits, or
-- frees it. Returns the holds left, or -1 when the owner reads nothing.
local owner, lock, readers = ARGV[1], KEYS[1], KEYS[2]
local _, down, up = clock()
local o = load_holders(readers, down)
local left = take_off_holder(readers, o, owner, tonumber(ARGV[2]))
if not left then return -1 end
if left > 0 then return left end
local w = load_claim(o.meta.w, down)
local v = decode(redis.call('GET', lock))
if v and v.owner ~= '' then
  -- A writer's own read ended; its write hold goes on.
  expire_object(readers, o, w and w.until_ms)
  return 0
end
if o.count > 0 then
  if v then
    v.expires = o.latest  -- the marker lives as long as its readers
    redis.call('SET', lock, encode(v), 'PXAT', v.expires)
  end
  expire_object(readers, o, w and w.until_ms)
  return 0
end
if w then
  -- The last reader hands the lock to the waiting writer (C23): nobody
  -- else gets it while that writer's intent lives.
  local token = 0
  if v then token = v.token end
  local m = marker_of(token, up, w.until_ms, kHandedOver, '1')
  redis.call('SET', lock, encode(m), 'PXAT', m.expires)
  expire_object(readers, o, w.until_ms)
  announce(ARGV[3], ARGV[4])
  return 0
end
redis.call('DEL', lock, readers)
if v and v.waited ~= '0' then announce(ARGV[3], ARGV[4]) end
return 0
