-- KEYS[1] the lock; KEYS[2] its readers, which go with it.
-- ARGV[1] channel, ARGV[2] name. Returns 1 if removed.
if redis.call('DEL', unpack(KEYS)) > 0 then
  announce(ARGV[1], ARGV[2])
  return 1
end
return 0
