-- KEYS[1] the lock. Returns {} when free, else
-- {owner, holds, token, since, ms left, live}; live: 1 while the holders'
-- deadline lies ahead, 0 once it passed, -1 when the hold has none.
local v = decode(redis.call('GET', KEYS[1]))
if not v then return {} end
local _, down, up = clock()
local live = -1
if v.owner ~= '' and v.alive >= 0 then
  live = lapsed(v, down) and 0 or 1
end
-- Counted from the clock rounded up: never more than the lease asked.
return {v.owner, v.holds, v.token, v.since, math.max(v.expires - up, 0), live}
