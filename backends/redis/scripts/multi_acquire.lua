-- A multi-lock whose names share one slot (C25), all or nothing in one
-- step. KEYS the locks. ARGV[1] owner, ARGV[2] lease (ms), ARGV[3] '1'
-- when the caller will wait, ARGV[4] liveness TTL (ms; '0': none).
-- Returns {1, token, holds of each key...} when every lock was taken (or
-- re-entered); {0, ms until the blocking hold may end, index of its key}
-- when one is another's: nothing is taken then. One token serves the
-- fresh holds: above the server's clock in µs and every lapsed hold's.
local owner, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local us, down, up = clock()
local token = tonumber(us)
local found = {}
for i, key in ipairs(KEYS) do
  local v = decode(redis.call('GET', key))
  if v and v.owner ~= owner then
    if v.owner ~= '' and lapsed(v, down) then
      token = math.max(token, v.token + 1)
      v = nil  -- its holders are gone: taken over as if free
    else
      if ARGV[3] == '1' and mark_waiting(v) then
        -- its release wakes us
        redis.call('SET', key, encode(v), 'KEEPTTL')
      end
      return {0, time_left(v, down), i}
    end
  end
  found[i] = v
end
local alive = -1
if ttl > 0 then alive = up + ttl end
local out = {1, token}
for i, key in ipairs(KEYS) do
  local v = found[i]
  if v then
    -- Re-entry (C5), as acquire.lua.
    v.holds = v.holds + 1
    v.lease = math.max(v.lease, lease)
    v.expires = math.max(v.expires, up + lease)
    if ttl == 0 then v.alive = -1 else v.alive = refreshed_alive(v, up, ttl) end
  else
    v = {token = token, holds = 1, lease = lease, since = up,
         expires = up + lease, alive = alive, waited = 0, owner = owner}
  end
  redis.call('SET', key, encode(v), 'PXAT', v.expires)
  out[#out + 1] = v.holds
end
return out
