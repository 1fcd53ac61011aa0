-- KEYS[1] a holders hash. Returns describe_holders() of it (holders.lua).
local _, down, up = clock()
return describe_holders(KEYS[1], down, up)
