#include "redis_scripts.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock::redis {
namespace {

// KEYS[1] lock hash, KEYS[2] the namespace's fencing counter, KEYS[3] the
// caller's liveness key. ARGV[1] owner, ARGV[2] lease in ms, ARGV[3] '1'
// when the caller will wait, ARGV[4] the liveness TTL in ms ('0': none).
// Returns {1, token, holds} when held, {0, ms until the holder's lease or
// liveness may end, holder} when not (Redlock tells a split vote from a lock
// held by a quorum by the holder); a failed attempt by a caller that will
// wait marks the hash 'waited', so that only a release somebody waits for is
// published (the mark goes with the hash).
//
// Holder liveness (docs/redis.md): the hash's 'live' field lists the
// liveness keys of the clients that hold it (an owner token may be shared,
// C6); a hold is taken over, as if free, once every one of them is gone.
// Without the field (a holder with liveness off) only the lease ends it.
// Every grant refreshes the caller's liveness key in the same step.
constexpr char kAcquire[] = R"lua(
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

// KEYS[1] the caller's liveness key. ARGV[1] its TTL in ms.
constexpr char kLiveness[] = R"lua(
return redis.call('SET', KEYS[1], 1, 'PX', ARGV[1])
)lua";

// KEYS[1] lock hash. ARGV[1] owner, ARGV[2] holds to take off, ARGV[3] the
// release channel, ARGV[4] the lock name (the message), ARGV[5] ms to keep
// the lock after the last hold ('0': free it). A kept lock is the hash with
// owner '' (no owner id is empty) and holds 0, its token kept, expiring by
// its PEXPIRE: nobody can release or renew it, and every acquire is
// refused until it expires. Its waiters are told all the same, so that they
// look again and sleep until its pttl runs out.
// Returns the holds left, or -1 when the owner does not hold the lock.
constexpr char kRelease[] = R"lua(
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

// KEYS[1] lock hash. ARGV[1] owner, ARGV[2] lease in ms. The lease becomes
// the larger of the one asked and the kept maximum (C5).
// Returns 1 when renewed, 0 when the owner does not hold the lock.
constexpr char kRenew[] = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'lease')
if v[1] ~= ARGV[1] then
  return 0
end
local lease = tonumber(ARGV[2])
local kept = tonumber(v[2])
if lease > kept then
  redis.call('HSET', KEYS[1], 'lease', lease)
else
  lease = kept
end
redis.call('PEXPIRE', KEYS[1], lease)
return 1
)lua";

// KEYS[1] lock hash. Returns {} when free, else
// {owner, holds, token, since, pttl, live}; one script so that the fields and
// the pttl describe the same instant. live: 1 while a liveness key of the
// holder exists, 0 when all are gone, -1 when the hold has none.
constexpr char kInspect[] = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'holds', 'token', 'since',
                     'live')
if not v[1] then
  return {}
end
local live = -1
if v[5] then
  live = 0
  for key in string.gmatch(v[5], '%S+') do
    live = math.max(live, redis.call('EXISTS', key))
  end
end
return {v[1], tonumber(v[2]), tonumber(v[3]), tonumber(v[4]),
        redis.call('PTTL', KEYS[1]), live}
)lua";

// KEYS[1] lock hash. ARGV[1] channel, ARGV[2] name. Returns 1 if removed.
constexpr char kForceUnlock[] = R"lua(
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('PUBLISH', ARGV[1], ARGV[2])
  return 1
end
return 0
)lua";

// KEYS[1] lock hash. ARGV[1] channel, ARGV[2] name, ARGV[3] fencing token.
// Removes the lock only while it carries that token: returns 1 if removed,
// 0 when free or held with another token (left as it was).
constexpr char kForceUnlockIfToken[] = R"lua(
local token = redis.call('HGET', KEYS[1], 'token')
if not token or tonumber(token) ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
)lua";

// KEYS[1] lock hash, KEYS[2] the namespace's fencing counter. ARGV[1] owner,
// ARGV[2] token. Returns 1 when the owner holds the lock here (the hold now
// carries the token and the counter is at least the token), 0 when not.
constexpr char kRaiseToken[] = R"lua(
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
local token = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'token', token)
if tonumber(redis.call('GET', KEYS[2]) or '0') < token then
  redis.call('SET', KEYS[2], token)
end
return 1
)lua";

}  // namespace

Scripts::Scripts()
    : acquire{"acquire", kAcquire, ""},
      release{"release", kRelease, ""},
      renew{"renew", kRenew, ""},
      inspect{"inspect", kInspect, ""},
      force_unlock{"force_unlock", kForceUnlock, ""},
      force_unlock_if_token{"force_unlock_if_token", kForceUnlockIfToken, ""},
      raise_token{"raise_token", kRaiseToken, ""},
      liveness{"liveness", kLiveness, ""} {}

absl::Status Scripts::Load(Connection& conn, absl::string_view endpoint) {
  for (Script* script : {&acquire, &release, &renew, &inspect, &force_unlock,
                         &force_unlock_if_token, &raise_token, &liveness}) {
    absl::StatusOr<Reply> reply =
        conn.Command({"SCRIPT", "LOAD", script->body});
    if (!reply.ok()) return reply.status();
    if (absl::Status s = ReplyError(reply->get(), "SCRIPT LOAD", endpoint);
        !s.ok()) {
      return s;
    }
    script->sha.assign((*reply)->str, (*reply)->len);
  }
  return absl::OkStatus();
}

namespace {

// "<verb> <script> <number of keys> keys... args...".
std::vector<std::string> ScriptCommand(const char* verb,
                                       const std::string& script,
                                       const std::vector<std::string>& keys,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(verb);
  argv.push_back(script);
  argv.push_back(absl::StrCat(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

std::vector<std::string> EvalShaCommand(const Script& script,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args) {
  // Not loaded: the master was down when the client started.
  if (script.sha.empty()) return EvalCommand(script, keys, args);
  return ScriptCommand("EVALSHA", script.sha, keys, args);
}

std::vector<std::string> EvalCommand(const Script& script,
                                     const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args) {
  return ScriptCommand("EVAL", script.body, keys, args);
}

bool IsNoScript(const redisReply* reply) {
  return reply != nullptr && reply->type == REDIS_REPLY_ERROR &&
         absl::StartsWith(absl::string_view(reply->str, reply->len),
                          "NOSCRIPT");
}

}  // namespace dlock::redis
