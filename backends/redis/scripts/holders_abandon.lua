-- A waiter that gives up (its wait ran out, or was cancelled) leaves
-- nothing behind (C9): its reservation ('q') or writer intent ('w') goes.
-- KEYS[1] the hash. ARGV[1] owner, ARGV[2] 'q' or 'w', ARGV[3] channel,
-- ARGV[4] message: announced when the place it kept could let others in.
-- Returns 1 when a place of the owner was removed.
local _, down = clock()
local c = load_claim(redis.call('HGET', KEYS[1], ARGV[2]), down)
if not c or c.owner ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[2])
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
announce(ARGV[3], ARGV[4])
return 1
