-- KEYS[1] the object (a semaphore's or an election's hash). ARGV[1] owner,
-- ARGV[2] holds to take off (more than held: all), ARGV[3] channel,
-- ARGV[4] message, ARGV[5] '1' for an election (whose end is always
-- announced, to its observers too).
-- Returns the holds left, or -1 when the owner holds nothing here (C4).
local owner, key = ARGV[1], KEYS[1]
local _, down = clock()
local o = load_holders(key, down)
local left = take_off_holder(key, o, owner, tonumber(ARGV[2]))
if not left then
  if o.count == 0 and not load_claim(o.meta.q, down) then
    redis.call('DEL', key)
  end
  return -1
end
if left > 0 then return left end
local s = load_state(o, 0)
local q = load_claim(o.meta.q, down)
local tell = s.waited == 1 or ARGV[5] == '1'
if ARGV[5] == '1' then redis.call('HDEL', key, 'v') end
if o.count == 0 and not q then
  redis.call('DEL', key)
else
  s.waited = 0  -- woken waiters that are refused again mark it again
  save_state(key, s)
  expire_object(key, o, q and q.until_ms)
end
if tell then announce(ARGV[3], ARGV[4]) end
return 0
