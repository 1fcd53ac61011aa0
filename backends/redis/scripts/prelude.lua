-- What every script shares (docs/redis.md, "Keys"). A lock is one string
-- key, dlock:{<ns>:<name>}, whose value packs its fields into one SET:
--   <token> <holds> <lease> <since> <expires> <alive> <waited> <owner>
-- token: the fencing token; holds: the hold count (0: kept after release);
-- lease: the kept maximum lease (ms); since: server ms of the fresh grant;
-- expires: the key's own expiry (server ms, its PXAT); alive: the holders'
-- liveness deadline (server ms), -1 when only the lease ends the hold;
-- waited: 1 once a refused caller went on waiting; owner: the rest (any
-- bytes; '' for a lock kept after its release).

-- The server's clock: microseconds (as digits, a fresh hold's token), and
-- milliseconds rounded down and up.
local function clock()
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return t[1] .. string.sub('00000' .. t[2], -6), ms, ms + 1
end

local function decode(raw)
  if not raw then return nil end
  local token, holds, lease, since, expires, alive, waited, owner =
    string.match(raw, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%-?%d+) ([01]) (.*)$')
  if not token then
    -- Not this layout's: written by something else under dlock's prefix.
    error({err = 'dlock: a lock value of another layout: ' .. raw})
  end
  return {token = tonumber(token), holds = tonumber(holds),
          lease = tonumber(lease), since = tonumber(since),
          expires = tonumber(expires), alive = tonumber(alive),
          waited = waited, owner = owner}
end

local function encode(v)
  return string.format('%d %d %d %d %d %d %s %s', v.token, v.holds, v.lease,
                       v.since, v.expires, v.alive, v.waited, v.owner)
end

-- The liveness rule, once: a hold whose holders' deadline passed (on the
-- rounded-down clock, so never early) may be taken over whatever its lease.
-- A kept lock (owner '') and a lease-only hold (alive -1) never lapse.
local function lapsed(v, now_down)
  return v.owner ~= '' and v.alive >= 0 and v.alive <= now_down
end

-- How long until the hold may end: its lease, or its liveness if sooner.
local function time_left(v, now_down)
  local left = v.expires - now_down
  if v.owner ~= '' and v.alive >= 0 then
    left = math.min(left, v.alive - now_down)
  end
  return math.max(left, 0)
end

-- A refresh of the holders' deadline keeps the latest one: a sharer with a
-- shorter TTL never cuts short a sharer that believes longer (C6, C19).
local function refreshed_alive(v, now_up, ttl)
  if v.alive < 0 then return v.alive end
  return math.max(v.alive, now_up + ttl)
end

-- Tells the lock's waiters it was released. A channel that starts with a
-- hash tag ('{') is a Redis Cluster's shard channel in the lock's slot
-- (Keyspace::ReleaseChannel), carried by that slot's shard only (SPUBLISH);
-- any other is the namespace's one channel.
local function announce(channel, name)
  if string.byte(channel) == 123 then
    redis.call('SPUBLISH', channel, name)
  else
    redis.call('PUBLISH', channel, name)
  end
end
