-- Rolling upgrade (docs/migration.md). KEYS[1] the namespace's 0.2 fencing
-- counter, dlock:<ns>:fence. ARGV[1] the marker meaning "0.2 locks may
-- remain", ARGV[2] the one meaning "none remain", ARGV[3] '1' to move from
-- the first to the second. A 0.2 client's fresh acquire INCRs that key:
-- once it holds either marker, every 0.2 fresh acquire fails ("not an
-- integer") instead of being granted beside this layout.
-- Returns the key's former value ('' when there was none).
local old = redis.call('GET', KEYS[1]) or ''
if ARGV[3] == '1' then
  if old == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) end
elseif old ~= ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1])
end
return old
