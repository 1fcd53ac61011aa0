-- Redlock's term agreement for an object with holders (raise_token.lua's
-- for a lock; docs/redis.md, fencing over a quorum). KEYS[1] the object,
-- KEYS[2] the namespace's token floor here. ARGV[1] owner, ARGV[2] token.
-- Returns 1 when the owner holds the object here (its entry now carries
-- the token, and the object's last token and the floor are at least it),
-- 0 when not.
local _, down = clock()
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local h = decode_holder(raw)
if holder_gone(h, down) then return 0 end
local token = tonumber(ARGV[2])
h.token = token
redis.call('HSET', KEYS[1], ARGV[1], encode_holder(h))
local s = load_state({meta = {n = redis.call('HGET', KEYS[1], 'n')}}, 1)
if s.last < token then
  s.last = token
  save_state(KEYS[1], s)
end
if tonumber(redis.call('GET', KEYS[2]) or '0') < token then
  redis.call('SET', KEYS[2], string.format('%d', token))
end
return 1
