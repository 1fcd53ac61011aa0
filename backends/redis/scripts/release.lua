-- KEYS[1] the lock. ARGV[1] owner, ARGV[2] holds to take off, ARGV[3] the
-- release channel, ARGV[4] the lock name (the message), ARGV[5] ms to keep
-- the lock after the last hold ('0': free it). A kept lock has owner ''
-- and holds 0: nobody can release or renew it, every acquire is refused
-- until it expires, and its waiters are told all the same, so that they
-- look again and sleep until it ends.
-- Returns the holds left, or -1 when the owner does not hold the lock.
-- The usual case is one call: GETDEL; anything else writes the value back.
local raw = redis.call('GETDEL', KEYS[1])
-- The usual case, read without decoding: the owner's only hold, nobody
-- waiting, not kept.
if raw and ARGV[5] == '0' then
  local _, last = string.find(raw, '^%d+ 1 %d+ %d+ %d+ %-?%d+ 0 ')
  if last and string.sub(raw, last + 1) == ARGV[1] then return 0 end
end
local v = decode(raw)
if not v then return -1 end
if v.owner ~= ARGV[1] then
  redis.call('SET', KEYS[1], raw, 'PXAT', v.expires)  -- left as it was (C4)
  return -1
end
local left = v.holds - tonumber(ARGV[2])
if left > 0 then
  v.holds = left
  redis.call('SET', KEYS[1], encode(v), 'PXAT', v.expires)
  return left
end
local keep = tonumber(ARGV[5])
if keep > 0 then
  -- Nobody's: no holder's liveness may end it early.
  local _, _, up = clock()
  local kept = {token = v.token, holds = 0, lease = keep, since = v.since,
                expires = up + keep, alive = -1, waited = 0, owner = ''}
  redis.call('SET', KEYS[1], encode(kept), 'PXAT', kept.expires)
end
if v.waited == '1' then
  announce(ARGV[3], ARGV[4])
end
return 0
