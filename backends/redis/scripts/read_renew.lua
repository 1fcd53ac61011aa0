-- KEYS[1] the lock, KEYS[2] its readers. ARGV[1] owner, ARGV[2] lease
-- (ms), ARGV[3] liveness TTL (ms; '0': none). As renew.lua for a read
-- hold; the marker lives as long as its latest reader.
-- Returns 1 when renewed, 0 when the owner reads nothing.
local owner, lock, readers = ARGV[1], KEYS[1], KEYS[2]
local _, down, up = clock()
local h = renew_holder(readers, owner, tonumber(ARGV[2]), tonumber(ARGV[3]),
                       down, up)
if not h then return 0 end
-- The lock's key (the marker, or the owner's own write hold) lives as
-- long as its latest read; a write hold keeps a lease and a liveness
-- deadline no shorter.
local v = decode(redis.call('GET', lock))
if not v or not (v.owner == owner or is_marker(v, kReadHeld)) then return 1 end
local changed = v.expires < h.expires
v.expires = math.max(v.expires, h.expires)
if v.owner == owner then
  changed = changed or v.lease < h.lease
  v.lease = math.max(v.lease, h.lease)
  changed = keep_write_alive_for_read(v, h) or changed
end
if changed then redis.call('SET', lock, encode(v), 'PXAT', v.expires) end
return 1
