-- Redlock's token agreement (docs/redis.md, fencing over a quorum).
-- KEYS[1] the lock, KEYS[2] the namespace's token floor here. ARGV[1]
-- owner, ARGV[2] token. Returns 1 when the owner holds the lock here (the
-- hold now carries the token, and the floor is at least the token), 0 when
-- not.
local v = decode(redis.call('GET', KEYS[1]))
if not v or v.owner ~= ARGV[1] then return 0 end
v.token = tonumber(ARGV[2])
redis.call('SET', KEYS[1], encode(v), 'KEEPTTL')
if tonumber(redis.call('GET', KEYS[2]) or '0') < v.token then
  redis.call('SET', KEYS[2], string.format('%d', v.token))
end
return 1
