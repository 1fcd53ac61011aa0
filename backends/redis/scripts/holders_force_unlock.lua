-- An administrator's force unlock of a holders hash (C12). KEYS[1] the
-- hash. ARGV[1] a fencing token ('': every holder and place), ARGV[2]
-- channel, ARGV[3] message, ARGV[4] '1' for an election (its value goes
-- with its leader). Returns 1 when removed, 0 when no live holder carries
-- that token.
local key = KEYS[1]
if ARGV[1] == '' then
  redis.call('DEL', key)
  announce(ARGV[2], ARGV[3])
  return 1
end
local _, down = clock()
local o = load_holders(key, down)
for owner, h in pairs(o.holders) do
  if h.token == tonumber(ARGV[1]) then
    take_off_holder(key, o, owner, h.holds)
    if ARGV[4] == '1' then redis.call('HDEL', key, 'v') end
    if o.count == 0 and not load_claim(o.meta.q, down) then
      redis.call('DEL', key)
    end
    announce(ARGV[2], ARGV[3])
    return 1
  end
end
return 0
