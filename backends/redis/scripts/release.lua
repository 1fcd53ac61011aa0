-- KEYS[1] the lock; KEYS[2] its readers. ARGV[1] the value
-- the owner's fresh grant wrote ('' when the caller has none, or keeps the
-- lock), ARGV[2] owner, ARGV[3] holds to take off, ARGV[4] the release
-- channel, ARGV[5] the lock name (the message), ARGV[6] ms to keep the lock
-- after the last hold ('0': free it).
-- A kept lock has owner '' and holds 0: nobody can release or renew it,
-- every acquire is refused until it expires, and its waiters are told all
-- the same, so that they look again and sleep until it ends.
-- Returns the holds left, or -1 when the owner does not hold the lock.
-- The usual case is one call, GETDEL; anything else writes the value back.
local raw = redis.call('GETDEL', KEYS[1])
-- The usual case, string compares only: the value the grant wrote,
-- untouched since (the owner's only hold, nobody waiting, no renewal).
if ARGV[1] ~= '' and raw == ARGV[1] and ARGV[6] == '0' then return 0 end
-- The same case after a renewal, or for a caller that kept no value
-- (Redlock, whose masters' values differ): read from the value's shape,
-- without decoding it.
if raw and ARGV[6] == '0' then
  local _, last = string.find(raw,
                              '^v4 %d+ %d+ 1 %d+ %-?%d+ %-?%d+ %-?%d+ 0 ')
  if last and string.sub(raw, last + 1) == ARGV[2] then return 0 end
end
local v = decode(raw)
if not v then return -1 end
if v.owner ~= ARGV[2] then
  redis.call('SET', KEYS[1], raw, 'PXAT', v.expires)  -- left as it was (C4)
  return -1
end
local left = v.holds - tonumber(ARGV[3])
if left > 0 then
  v.holds = left
  redis.call('SET', KEYS[1], encode(v), 'PXAT', v.expires)
  return left
end
if KEYS[2] and v.waited ~= '0' and redis.call('HGET', KEYS[2], ARGV[2]) then
  -- The owner reads it too (read_acquire.lua, which kept this key from
  -- ending before the read): the read keeps it read-held, a downgrade.
  v.holds, v.lease, v.alive, v.waited, v.owner = 1, 0, -1, '0', ''
  redis.call('SET', KEYS[1], encode(v), 'PXAT', v.expires)
  announce(ARGV[4], ARGV[5])
  return 0
end
local keep = tonumber(ARGV[6])
if keep > 0 then
  -- Nobody's: no holder's liveness may end it early.
  local _, _, up = clock()
  local kept = {token = v.token, holds = 0, lease = keep, since = v.since,
                expires = up + keep, alive = -1, waited = 0, owner = ''}
  redis.call('SET', KEYS[1], encode(kept), 'PXAT', kept.expires)
end
if v.waited ~= '0' then
  announce_release(ARGV[4], ARGV[5], v)
end
return 0
