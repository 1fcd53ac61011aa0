// Copyright dlock authors. The Lua scripts of dlock 0.2 (the layout before
// one key per lock), copied verbatim from backends/redis/redis_scripts.cc at
// 0.2, so that the rolling-upgrade test runs a 0.2 client's acquire and
// release beside this layout (docs/migration.md). Test fixtures: never
// edited.
#ifndef DLOCK_BACKENDS_REDIS_TESTS_V0_2_SCRIPTS_H_
#define DLOCK_BACKENDS_REDIS_TESTS_V0_2_SCRIPTS_H_

namespace dlock::redis::v0_2 {

// KEYS[1] lock hash, KEYS[2] the namespace's fencing counter, KEYS[3] the
// caller's liveness key. ARGV[1] owner, ARGV[2] lease in ms, ARGV[3] '1'
// when the caller will wait, ARGV[4] the liveness TTL in ms ('0': none).
inline constexpr char kAcquire[] = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds', 'token', 'lease',
                     'live')
local lease = tonumber(ARGV[2])
local ttl = tonumber(ARGV[4])
local function lapsed(live)
  if not live then return false end
  for key in string.gmatch(live, '%S+') do
    if redis.call('EXISTS', key) == 1 then return false end
  end
  return true
end
if v[1] and v[1] ~= ARGV[1] and lapsed(v[5]) then
  redis.call('DEL', KEYS[1])
  v[1] = false
end
if not v[1] then
  local token = redis.call('INCR', KEYS[2])
  local now = redis.call('TIME')
  local since = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'holds', 1, 'token', token,
             'lease', lease, 'since', since)
  if ttl > 0 then
    redis.call('SET', KEYS[3], 1, 'PX', ttl)
    redis.call('HSET', KEYS[1], 'live', KEYS[3])
  end
  redis.call('PEXPIRE', KEYS[1], lease)
  return {1, token, 1}
end
if v[1] == ARGV[1] then
  local holds = redis.call('HINCRBY', KEYS[1], 'holds', 1)
  if lease > tonumber(v[4]) then
    redis.call('HSET', KEYS[1], 'lease', lease)
  end
  if lease > redis.call('PTTL', KEYS[1]) then
    redis.call('PEXPIRE', KEYS[1], lease)
  end
  if ttl > 0 then
    redis.call('SET', KEYS[3], 1, 'PX', ttl)
    if v[5] and not string.find(' ' .. v[5] .. ' ', ' ' .. KEYS[3] .. ' ',
                                1, true) then
      redis.call('HSET', KEYS[1], 'live', v[5] .. ' ' .. KEYS[3])
    end
  elseif v[5] then
    -- A client with liveness off holds it too: only the lease ends it.
    redis.call('HDEL', KEYS[1], 'live')
  end
  return {1, tonumber(v[3]), holds}
end
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'waited', 1)
end
local left = redis.call('PTTL', KEYS[1])
if v[5] then
  local live = 0
  for key in string.gmatch(v[5], '%S+') do
    live = math.max(live, redis.call('PTTL', key))
  end
  left = math.min(left, live)
end
return {0, left, v[1]}
)lua";

// KEYS[1] lock hash. ARGV[1] owner, ARGV[2] holds to take off, ARGV[3] the
// release channel, ARGV[4] the lock name, ARGV[5] ms to keep the lock.
inline constexpr char kRelease[] = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds', 'waited')
if v[1] ~= ARGV[1] then
  return -1
end
local left = tonumber(v[2]) - tonumber(ARGV[2])
if left > 0 then
  redis.call('HSET', KEYS[1], 'holds', left)
  return left
end
local keep = tonumber(ARGV[5])
if keep > 0 then
  -- Nobody's: no client's liveness (the 'live' field) may end it early.
  redis.call('HSET', KEYS[1], 'owner', '', 'holds', 0, 'lease', keep)
  redis.call('HDEL', KEYS[1], 'waited', 'live')
  redis.call('PEXPIRE', KEYS[1], keep)
else
  redis.call('DEL', KEYS[1])
end
if v[3] then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 0
)lua";

}  // namespace dlock::redis::v0_2

#endif  // DLOCK_BACKENDS_REDIS_TESTS_V0_2_SCRIPTS_H_
