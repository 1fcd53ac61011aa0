-- KEYS[1] the lock; KEYS[2] its readers. ARGV[1] channel,
-- ARGV[2] name, ARGV[3] fencing token. Removes the lock, and the readers
-- of its writer, only while its writer carries that token: returns 1 if
-- removed, 0 when free, read-held or held with another token (left as it
-- was; a reader's token is its readers hash's, holders_force_unlock.lua).
local v = decode(redis.call('GET', KEYS[1]))
if not v or v.token ~= tonumber(ARGV[3]) or (v.owner == '' and v.holds > 0) then
  return 0
end
redis.call('DEL', unpack(KEYS))
announce(ARGV[1], ARGV[2])
return 1
