-- KEYS[1] the object. ARGV[1] owner, ARGV[2] lease (ms), ARGV[3] the
-- caller's liveness TTL (ms; '0': none). The lease becomes the larger of
-- the one asked and the kept maximum from now (C5), and a live caller's
-- renewal refreshes its liveness deadline too.
-- Returns 1 when renewed, 0 when the owner holds nothing here.
local key, owner = KEYS[1], ARGV[1]
local _, down, up = clock()
local raw = redis.call('HGET', key, owner)
if not raw then return 0 end
local h = decode_holder(raw)
if holder_gone(h, down) then return 0 end
h.lease = math.max(h.lease, tonumber(ARGV[2]))
h.expires = up + h.lease
local ttl = tonumber(ARGV[3])
if ttl > 0 and h.alive >= 0 then h.alive = math.max(h.alive, up + ttl) end
redis.call('HSET', key, owner, encode_holder(h))
-- The hash lives as long as its longest lease; never shortened here.
if redis.call('PEXPIRETIME', key) < h.expires then
  redis.call('PEXPIREAT', key, h.expires)
end
return 1
