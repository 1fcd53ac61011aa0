-- KEYS[1] the lock. ARGV[1] channel, ARGV[2] name. Returns 1 if removed.
if redis.call('DEL', KEYS[1]) == 1 then
  announce(ARGV[1], ARGV[2])
  return 1
end
return 0
