-- KEYS[1] the lock; KEYS[2] (Redlock only) the namespace's token floor on
-- this master, which every token it grants exceeds. ARGV[1] owner, ARGV[2]
-- lease (ms), ARGV[3] '1' when the caller will wait, ARGV[4] the caller's
-- liveness TTL (ms; '0': none), ARGV[5] (Redlock only) the token the
-- client proposes, so that masters whose floors are below it all grant the
-- same token in one round.
-- Returns {1, token, holds} when held, {0, ms until the hold may end,
-- holder} when not. The free case is two calls: TIME and one SET NX PXAT
-- GET, which also reads what is there when it is taken.
local owner, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local us, down, up = clock()
local token = us  -- digits: no number formatting on the usual path
if KEYS[2] then
  token = string.format('%d', math.max(tonumber(ARGV[5]),
      tonumber(redis.call('GET', KEYS[2]) or '0') + 1))
end
local expires, alive = up + lease, -1
if ttl > 0 then alive = up + ttl end
-- encode() of a fresh hold, by concatenation (numbers below 10^14 print
-- as integers).
local raw = redis.call('SET', KEYS[1], token .. ' 1 ' .. lease .. ' ' .. up ..
                       ' ' .. expires .. ' ' .. alive .. ' 0 ' .. owner,
                       'NX', 'PXAT', expires, 'GET')
if not raw then
  if KEYS[2] then redis.call('SET', KEYS[2], token) end
  return {1, tonumber(token), 1}
end
local fresh = {token = tonumber(token), holds = 1, lease = lease, since = up,
               expires = expires, alive = alive, waited = 0, owner = owner}
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
if ARGV[3] == '1' and v.waited == '0' then
  -- Marked so that the holder's release is announced (and only then).
  v.waited = 1
  redis.call('SET', KEYS[1], encode(v), 'KEEPTTL')
end
return {0, time_left(v, down), v.owner}
