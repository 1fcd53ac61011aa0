-- Redlock's token agreement (docs/redis.md, fencing over a quorum).
-- KEYS[1] the lock. ARGV[1] owner, ARGV[2] token. Returns 1 when the owner
-- holds the lock here (the hold now carries the token), 0 when not.
local v = decode(redis.call('GET', KEYS[1]))
if not v or v.owner ~= ARGV[1] then return 0 end
v.token = tonumber(ARGV[2])
redis.call('SET', KEYS[1], encode(v), 'KEEPTTL')
return 1
