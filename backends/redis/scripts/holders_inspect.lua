-- KEYS[1] a holders hash. Returns {limit, head waiter or '', its permits,
-- value or false, then per live holder: owner, holds, permits, token,
-- since, ms left, live, slots} (live: 1 while its liveness deadline lies
-- ahead, -1 when it has none); {} when nothing is held or waiting.
local _, down, up = clock()
local o = load_holders(KEYS[1], down)
local q = load_claim(o.meta.q or o.meta.w, down)
if o.count == 0 and not q then return {} end
local s = load_state(o, 0)
local out = {s.limit, q and q.owner or '', q and q.num or 0,
             o.meta.v or false}
for owner, h in pairs(o.holders) do
  local live = -1
  if h.alive >= 0 then live = 1 end
  for _, x in ipairs({owner, h.holds, h.permits, h.token, h.since,
                      math.max(h.expires - up, 0), live, h.slots}) do
    out[#out + 1] = x
  end
end
return out
