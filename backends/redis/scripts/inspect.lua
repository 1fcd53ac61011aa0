-- KEYS[1] the lock; KEYS[2], when given, its readers. Returns {} when free,
-- else {owner, holds, token, since, ms left, live}; live: 1 while the
-- holders' deadline lies ahead, 0 once it passed, -1 when the hold has
-- none. With KEYS[2]: {that, describe_holders() of the readers}, both
-- read in this one step (C11).
local v = decode(redis.call('GET', KEYS[1]))
local _, down, up = clock()
local lock = {}
if v then
  local live = -1
  if v.owner ~= '' and v.alive >= 0 then
    live = lapsed(v, down) and 0 or 1
  end
  -- Counted from the clock rounded up: never more than the lease asked.
  lock = {v.owner, v.holds, v.token, v.since, math.max(v.expires - up, 0),
          live}
end
if KEYS[2] then return {lock, describe_holders(KEYS[2], down, up)} end
return lock
