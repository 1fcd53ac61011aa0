-- The heartbeat, per held lock (Backend::RenewLiveness). KEYS[1] the lock.
-- ARGV[1] owner, ARGV[2] the hold's token, ARGV[3] the liveness TTL (ms).
-- Returns 1 when the hold is still this one (its deadline refreshed, or it
-- has none), 0 when it is gone or another's.
local v = decode(redis.call('GET', KEYS[1]))
if not v or v.owner ~= ARGV[1] or v.token ~= tonumber(ARGV[2]) then
  return 0
end
if v.alive < 0 then return 1 end
local _, _, up = clock()
v.alive = refreshed_alive(v, up, tonumber(ARGV[3]))
redis.call('SET', KEYS[1], encode(v), 'KEEPTTL')
return 1
