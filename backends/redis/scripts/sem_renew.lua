-- KEYS[1] the object. ARGV[1] owner, ARGV[2] lease (ms), ARGV[3] the
-- caller's liveness TTL (ms; '0': none). The lease becomes the larger of
-- the one asked and the kept maximum from now (C5), and a live caller's
-- renewal refreshes its liveness deadline too.
-- Returns 1 when renewed, 0 when the owner holds nothing here.
local _, down, up = clock()
if renew_holder(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), down,
                up) then
  return 1
end
return 0
