-- KEYS[1] the lock. ARGV[1] owner, ARGV[2] lease (ms), ARGV[3] the
-- caller's liveness TTL (ms; '0': none). The lease becomes the larger of
-- the one asked and the kept maximum (C5), and a live caller's renewal
-- refreshes the holders' liveness deadline too.
-- Returns 1 when renewed, 0 when the owner does not hold the lock.
local v = decode(redis.call('GET', KEYS[1]))
if not v or v.owner ~= ARGV[1] then return 0 end
local _, _, up = clock()
v.lease = math.max(v.lease, tonumber(ARGV[2]))
v.expires = up + v.lease
local ttl = tonumber(ARGV[3])
if ttl > 0 then v.alive = refreshed_alive(v, up, ttl) end
redis.call('SET', KEYS[1], encode(v), 'PXAT', v.expires)
return 1
