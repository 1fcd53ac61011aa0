-- The write side of a read-write lock (docs/design/primitives.md), for
-- acquire.lua and release.lua; appended to the prelude with holders.lua.
-- While readers hold, the lock's own key holds a marker, so that a writer's
-- SET NX fails on it and looks here, and a client of the layout before
-- readers (which knows only "kept after release") waits as well. A marker
-- is a lock value with owner '' and holds 0, told apart by alive:
--   -1 kept after release (release.lua)
--   -2 read-held: the readers are in dlock:r{<ns>:<name>}; token: the last
--      reader's, expires: the latest reader lease
--   -3 handed to the waiting writer whose intent ('w' in the readers' hash)
--      it was, until that intent lapses; refused to everyone else
-- A writer that holds a read lock too has waited = 1 in its value, so that
-- its release takes the slow path and looks here.

local function marker_of(token, since, expires, alive, waited)
  return {token = token, holds = 0, lease = 0, since = since,
          expires = expires, alive = alive, waited = waited, owner = ''}
end

-- A fresh write hold over a marker (or a lapsed writer whose reads are
-- gone): a token above the marker's, waited kept when readers were refused.
local function grant_writer(lock, readers, v, owner, lease, ttl, us, up,
                            waited)
  local alive = -1
  if ttl > 0 then alive = up + ttl end
  local fresh = {token = next_token(us, v.token), holds = 1, lease = lease,
                 since = up, expires = up + lease, alive = alive,
                 waited = waited, owner = owner}
  redis.call('SET', lock, encode(fresh), 'PXAT', fresh.expires)
  redis.call('DEL', readers)
  return {1, fresh.token, 1}
end

-- acquire.lua, when SET NX found a marker of readers (alive -2, -3) or a
-- lapsed writer that held a read lock too (waited 1). Returns the reply,
-- or nil when the caller's usual logic applies (a lapsed writer without
-- live reads: taken over as usual). intent_ms: how long a writer's intent
-- lasts without a retry.
local function writer_meets_readers(v, lock, readers, owner, lease, ttl,
                                    will_wait, intent_ms, us, down, up)
  local o = load_holders(readers, down)
  local w = load_claim(o.meta.w, down)
  if v.alive == -3 then
    if w and w.owner == owner then
      -- Handed over by the last reader: ours, with a larger token. Readers
      -- refused meanwhile are told when this writer is done.
      local told = '0'
      if w.num > 0 or v.waited == '1' then told = '1' end
      return grant_writer(lock, readers, v, owner, lease, ttl, us, up, told)
    end
    if will_wait and v.waited ~= '1' then
      v.waited = '1'
      redis.call('SET', lock, encode(v), 'KEEPTTL')
    end
    return {0, time_left(v, down), ''}
  end
  if v.owner ~= '' then
    -- A lapsed writer: its own reads, if any live, keep the lock read-held.
    if o.count == 0 then return nil end
    v = marker_of(v.token, v.since, o.latest, -2, v.waited)
    redis.call('SET', lock, encode(v), 'PXAT', v.expires)
  end
  if o.holders[owner] then return {-4, 0, ''} end  -- no upgrade (C23)
  if o.count == 0 then
    -- Its readers are gone (lease or liveness): the lock is free.
    return grant_writer(lock, readers, v, owner, lease, ttl, us, up,
                        v.waited)
  end
  if will_wait then
    -- The first waiting writer's intent stops new readers; it is handed
    -- the lock when the readers there now are gone.
    if not w or w.owner == owner then
      local refused = 0
      if w then refused = w.num end
      w = {until_ms = up + intent_ms, num = refused, owner = owner}
      redis.call('HSET', readers, 'w', encode_claim(w))
      expire_object(readers, o, w.until_ms)
    end
    if v.waited ~= '1' then
      v.waited = '1'
      redis.call('SET', lock, encode(v), 'KEEPTTL')
    end
  end
  return {0, soonest_end(o, down), ''}
end

-- release.lua, at a writer's last write hold when its value has waited 1:
-- if the owner still holds a read lock, the lock becomes read-held
-- (a downgrade) and 0 is returned; otherwise the writer's intent, if any,
-- goes, and nil lets the usual release go on.
local function writer_leaves_readers(v, lock, readers, owner, channel,
                                     message, down)
  local o = load_holders(readers, down)
  local w = load_claim(o.meta.w, down)
  if w and w.owner == owner then
    redis.call('HDEL', readers, 'w')
    w = nil
  end
  if o.holders[owner] then
    local m = marker_of(v.token, v.since, o.latest, -2, '0')
    redis.call('SET', lock, encode(m), 'PXAT', m.expires)
    redis.call('PUBLISH', channel, message)
    return 0
  end
  if o.count == 0 and not w then redis.call('DEL', readers) end
  return nil
end
