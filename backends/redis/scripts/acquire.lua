-- KEYS[1] the lock; KEYS[2] (Redlock only) the namespace's token floor on
-- this master, which every token it grants exceeds. ARGV[1] owner, ARGV[2]
-- lease (ms), ARGV[3] the lease + 1 (the key's PX: counted from TIME's ms,
-- whose next ms the hold starts at), ARGV[4] '1' when the caller will wait,
-- ARGV[5] a fresh hold's liveness deadline as the value keeps it: the
-- caller's liveness TTL + 1 (ms), or '-1' for none; ARGV[6] (Redlock only)
-- the token the client proposes, so that masters whose floors are below it
-- all grant the same token in one round.
-- Returns the value written when the lock was free (the caller reads the
-- token from it, and releases by it), {1, token, holds} when held
-- otherwise, {0, ms until the hold may end, holder} when not.
local raw, token, down
if not KEYS[2] then
  -- The usual case: TIME and one SET NX PX GET of the caller's strings
  -- and TIME's, no number read or formatted.
  local t = redis.call('TIME')
  local value = 'v4 ' .. t[1] .. ' ' .. t[2] .. ' 1 ' .. ARGV[2] .. ' 1 ' ..
                ARGV[3] .. ' ' .. ARGV[5] .. ' 0 ' .. ARGV[1]
  raw = redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[3], 'GET')
  if not raw then return value end
  token, down = clock_of(t)
else
  token, down = clock()
  token = math.max(tonumber(ARGV[6]),
                   tonumber(redis.call('GET', KEYS[2]) or '0') + 1)
end
local owner, lease, up = ARGV[1], tonumber(ARGV[2]), down + 1
local ttl = math.max(tonumber(ARGV[5]) - 1, 0)
local fresh = {token = token, holds = 1, lease = lease, since = up,
               expires = up + lease, alive = ttl > 0 and up + ttl or -1,
               waited = 0, owner = owner}
if KEYS[2] then
  raw = redis.call('SET', KEYS[1], encode(fresh), 'NX', 'PXAT', fresh.expires,
                   'GET')
  if not raw then
    redis.call('SET', KEYS[2], string.format('%d', token))
    return {1, token, 1}
  end
end
local v = decode(raw)
if v.owner ~= owner and lapsed(v, down) then
  -- Its holders are gone: taken over as if free, with a larger token.
  fresh.token = math.max(fresh.token, v.token + 1)
  redis.call('SET', KEYS[1], encode(fresh), 'PXAT', fresh.expires)
  if KEYS[2] then
    redis.call('SET', KEYS[2], string.format('%d', fresh.token))
  end
  return {1, fresh.token, 1}
end
if v.owner == owner then
  -- Re-entry (C5): the longer of the leases, kept for later re-entries.
  v.holds = v.holds + 1
  v.lease = math.max(v.lease, lease)
  v.expires = math.max(v.expires, up + lease)
  if ttl == 0 then
    v.alive = -1  -- a sharer with liveness off: only the lease ends it
  else
    v.alive = refreshed_alive(v, up, ttl)
  end
  redis.call('SET', KEYS[1], encode(v), 'PXAT', v.expires)
  return {1, v.token, v.holds}
end
if ARGV[4] == '1' and mark_waiting(v) then
  -- Marked so that the holder's release is announced (and only then).
  redis.call('SET', KEYS[1], encode(v), 'KEEPTTL')
end
return {0, time_left(v, down), v.owner}
