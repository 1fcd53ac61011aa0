-- KEYS[1] the lock. ARGV[1] channel, ARGV[2] name, ARGV[3] fencing token.
-- Removes the lock only while it carries that token: returns 1 if removed,
-- 0 when free or held with another token (left as it was).
local v = decode(redis.call('GET', KEYS[1]))
if not v or v.token ~= tonumber(ARGV[3]) then return 0 end
redis.call('DEL', KEYS[1])
announce(ARGV[1], ARGV[2])
return 1
