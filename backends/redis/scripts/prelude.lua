-- What every script shares (docs/redis.md, "Keys"). A lock is one string
-- key, dlock:{<ns>:<name>}, whose value packs its fields into one SET:
--   v4 <sec> <usec> <holds> <lease> <since> <expires> <alive> <waited> <owner>
-- sec, usec: the fencing token, sec * 10^6 + usec (a fresh hold's is the
-- server's TIME, written as TIME gives it); holds: the hold count (0: kept
-- after release); lease: the kept maximum lease (ms); since: the fresh
-- grant; expires: the key's own expiry (its PX); alive: the holders'
-- liveness deadline, -1 when only the lease ends the hold. The three times
-- count ms from the token's ms (sec * 1000 + usec // 1000), so that a free
-- lock is taken with a value of its caller's strings and TIME's, with no
-- number formatted (formatting one costs more than a redis.call's share).
-- waited: 1 once a refused caller went on waiting, 2 once a second refusal
-- came in the same hold (mark_waiting); owner: the rest (any bytes; '' for
-- a lock kept after its release).

-- The token's ms: what the value's times count from.
local function base_ms(sec, usec)
  return sec * 1000 + math.floor(usec / 1000)
end

-- A reply of TIME as microseconds, and milliseconds rounded down and up.
local function clock_of(t)
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  local ms = base_ms(sec, usec)
  return sec * 1000000 + usec, ms, ms + 1
end

-- The server's clock, so.
local function clock()
  return clock_of(redis.call('TIME'))
end

local function decode(raw)
  if not raw then return nil end
  local sec, usec, holds, lease, since, expires, alive, waited, owner =
    string.match(raw, '^v4 (%d+) (%d+) (%d+) (%d+) (%-?%d+) (%-?%d+) ' ..
                 '(%-?%d+) ([012]) (.*)$')
  if not sec then
    -- Not this layout's: written by something else under dlock's prefix.
    error({err = 'dlock: a lock value of another layout: ' .. raw})
  end
  sec, usec, alive = tonumber(sec), tonumber(usec), tonumber(alive)
  local base = base_ms(sec, usec)
  return {token = sec * 1000000 + usec, holds = tonumber(holds),
          lease = tonumber(lease), since = base + tonumber(since),
          expires = base + tonumber(expires),
          alive = alive == -1 and -1 or base + alive, waited = waited,
          owner = owner}
end

local function encode(v)
  local sec = math.floor(v.token / 1000000)
  local usec = v.token - sec * 1000000
  local base = base_ms(sec, usec)
  -- Only -1 says "none": a deadline before the base (a token above the
  -- master's clock: Redlock's proposals, a takeover's old token + 1) is a
  -- negative offset, kept as it is, so that a dead holder still lapses at
  -- its deadline; the one offset that would read as -1 is kept 1 ms later.
  local alive = -1
  if v.alive >= 0 then
    alive = v.alive - base
    if alive == -1 then alive = 0 end
  end
  return string.format('v4 %d %d %d %d %d %d %d %s %s', sec, usec, v.holds,
                       v.lease, v.since - base, v.expires - base, alive,
                       v.waited, v.owner)
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

-- Counts a refused caller that goes on waiting, up to two: its release is
-- announced from then on, and told as a race (two or more woken) or not.
-- Returns true when the value changed and must be written back.
local function mark_waiting(v)
  if v.waited == '2' then return false end
  if v.waited == '0' then v.waited = '1' else v.waited = '2' end
  return true
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

-- A release's announcement, when a refused caller waits (v.waited not '0').
-- With one refusal in the hold, the message ends with a record separator
-- (kOneWaiterMark in redis_subscriber.h): its waiter attempts at once. With
-- more, the woken waiters' attempts are spread so that each race is a fair
-- draw (core's WakeupHub), which costs a lone waiter half a millisecond.
local function announce_release(channel, name, v)
  if v.waited == '1' then
    announce(channel, name .. '\30')
  else
    announce(channel, name)
  end
end
