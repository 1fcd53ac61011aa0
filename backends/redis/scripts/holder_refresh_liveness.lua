-- The heartbeat of one hold in a holders hash (a permit, a read hold, a
-- leadership). KEYS[1] the hash; KEYS[2] for a read hold, the lock, whose
-- writer's deadline a read of that writer keeps no earlier than its own
-- (read_acquire.lua). ARGV[1] owner, ARGV[2] the hold's token, ARGV[3] the
-- liveness TTL (ms). Returns 1 when the hold is still this one (its
-- deadline refreshed, or it has none), 0 when it is gone.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local h = decode_holder(raw)
local _, down, up = clock()
if h.token ~= tonumber(ARGV[2]) or holder_gone(h, down) then return 0 end
if h.alive < 0 then return 1 end
h.alive = math.max(h.alive, up + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], ARGV[1], encode_holder(h))
if KEYS[2] then
  local v = decode(redis.call('GET', KEYS[2]))
  if v and v.owner == ARGV[1] and keep_write_alive_for_read(v, h) then
    redis.call('SET', KEYS[2], encode(v), 'KEEPTTL')
  end
end
return 1
