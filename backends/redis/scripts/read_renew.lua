-- KEYS[1] the lock, KEYS[2] its readers. ARGV[1] owner, ARGV[2] lease
-- (ms), ARGV[3] liveness TTL (ms; '0': none). As renew.lua for a read
-- hold; the marker lives as long as its latest reader.
-- Returns 1 when renewed, 0 when the owner reads nothing.
local owner, lock, readers = ARGV[1], KEYS[1], KEYS[2]
local _, down, up = clock()
local raw = redis.call('HGET', readers, owner)
if not raw then return 0 end
local h = decode_holder(raw)
if holder_gone(h, down) then return 0 end
h.lease = math.max(h.lease, tonumber(ARGV[2]))
h.expires = up + h.lease
local ttl = tonumber(ARGV[3])
if ttl > 0 and h.alive >= 0 then h.alive = math.max(h.alive, up + ttl) end
redis.call('HSET', readers, owner, encode_holder(h))
if redis.call('PEXPIRETIME', readers) < h.expires then
  redis.call('PEXPIREAT', readers, h.expires)
end
-- The lock's key (the marker, or the owner's own write hold) lives as
-- long as its latest read.
local v = decode(redis.call('GET', lock))
if v and (v.owner == owner or (v.owner == '' and v.alive == -2)) and
    v.expires < h.expires then
  v.expires = h.expires
  redis.call('SET', lock, encode(v), 'PXAT', v.expires)
end
return 1
