-- A semaphore's permits, or an election's leadership (a semaphore of one
-- that carries the leader's value and announces every change).
-- KEYS[1] the object (dlock:s{<ns>:<name>} or dlock:e{<ns>:<name>});
-- KEYS[2] (Redlock only) the namespace's token floor on this master.
-- ARGV[1] owner, ARGV[2] lease (ms), ARGV[3] '1' when the caller will wait,
-- ARGV[4] liveness TTL (ms; '0': none), ARGV[5] the N the caller expects,
-- ARGV[6] permits asked (1..N), ARGV[7] how long a waiter's reservation
-- lasts without a retry (ms; '0': no reservation, as Redlock asks),
-- ARGV[8] channel to announce grants on (''
-- for none), ARGV[9] its message, ARGV[10] '1' for an election, ARGV[11]
-- the campaigner's value, ARGV[12] (Redlock only) the token the client
-- proposes, as acquire.lua's ARGV[6].
-- Returns {1, token, holds, slots ("0,2")} when granted; {0, ms until a
-- holder may end, the leader (an election's; '' for a semaphore)} when
-- refused; {-2, N in force} when another N is in force (C22);
-- {-3, permits held} for a re-entry asking other permits.
local owner, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local limit, permits = tonumber(ARGV[5]), tonumber(ARGV[6])
local election = ARGV[10] == '1'
local us, down, up = clock()
local key = KEYS[1]
local o = load_holders(key, down)
local s = load_state(o, limit)
local q = load_claim(o.meta.q, down)
-- The N in force is its holders' and head waiter's; with neither, the
-- caller's.
if o.count == 0 and not q then s.limit = limit end
if s.limit ~= limit then return {-2, s.limit} end

local function tell()
  if ARGV[8] ~= '' then announce(ARGV[8], ARGV[9]) end
end

local h = o.holders[owner]
if h then
  if h.permits ~= permits then return {-3, h.permits} end
  reenter_holder(h, lease, up, ttl)
  redis.call('HSET', key, owner, encode_holder(h))
  o.latest = math.max(o.latest, h.expires)
  if election and o.meta.v ~= ARGV[11] then
    redis.call('HSET', key, 'v', ARGV[11])  -- a new value is proclaimed
    tell()
  end
  expire_object(key, o, q and q.until_ms)
  return {1, h.token, h.holds, h.slots}
end

-- Room for the caller, leaving the head waiter's reservation whole unless
-- the caller is that waiter (so a waiter for many permits is not starved
-- by a stream of callers asking fewer).
local reserved = 0
if q and q.owner ~= owner then reserved = q.num end
if o.used + permits + reserved <= s.limit then
  local token = next_token(us, s.last)
  -- Redlock: not the server's clock but the proposal, above the floor.
  if KEYS[2] then token = floored_token(KEYS[2], ARGV[12], s.last) end
  h = new_holder(token, permits, free_slots(o, permits, s.limit), lease, up,
                 ttl)
  redis.call('HSET', key, owner, encode_holder(h))
  o.latest = math.max(o.latest, h.expires)
  s.last = token
  if q and q.owner == owner then
    redis.call('HDEL', key, 'q')
    q = nil
  end
  save_state(key, s)
  if election then
    redis.call('HSET', key, 'v', ARGV[11])
    tell()
  end
  expire_object(key, o, q and q.until_ms)
  return {1, token, 1, h.slots}
end

if ARGV[3] == '1' then
  -- A waiter: releases must announce themselves, and the first waiter
  -- (or the one holding the place already) keeps a place for its permits.
  s.waited = 1
  if ARGV[7] ~= '0' and (not q or q.owner == owner) then
    q = {until_ms = up + tonumber(ARGV[7]), num = permits, owner = owner}
    redis.call('HSET', key, 'q', encode_claim(q))
  end
  save_state(key, s)
  expire_object(key, o, q and q.until_ms)
end
local left = soonest_end(o, down)
if q and q.owner ~= owner then left = math.min(left, q.until_ms - down) end
-- Redlock tells a leader that holds a quorum from a split vote by it.
local leader = election and next(o.holders) or ''
return {0, math.max(left, 0), leader}
