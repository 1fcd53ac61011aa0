-- The leader announces a new value (etcd's Proclaim). KEYS[1] the
-- election. ARGV[1] owner, ARGV[2] the leadership's term (token), ARGV[3]
-- the value, ARGV[4] channel, ARGV[5] message.
-- Returns 1 when set, 0 when the owner no longer leads with that term.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local h = decode_holder(raw)
local _, down = clock()
if h.token ~= tonumber(ARGV[2]) or holder_gone(h, down) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[3])
announce(ARGV[4], ARGV[5])
return 1
