#include "redis_lock_ops.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dlock/errors.h"

namespace dlock::redis {

Keyspace::Keyspace(absl::string_view lock_namespace, int db, bool sharded)
    : lock_prefix_(absl::StrCat("dlock:{", lock_namespace, ":")),
      channel_(absl::StrCat("dlock:", db, ":", lock_namespace, ":released")),
      floor_(absl::StrCat("dlock:", lock_namespace, ":floor")),
      old_fence_(absl::StrCat("dlock:", lock_namespace, ":fence")),
      old_lock_prefix_(absl::StrCat("dlock:", lock_namespace, ":l:")),
      shard_suffix_(absl::StrCat("dlock:", lock_namespace, ":released")),
      sharded_(sharded) {}

std::string Keyspace::ReleaseChannel(absl::string_view name) const {
  return sharded_ ? ShardChannel(KeySlot(LockKey(name))) : channel_;
}

std::string Keyspace::ShardChannel(int slot) const {
  return absl::StrCat("{", SlotTag(slot), "}", shard_suffix_);
}

std::string Keyspace::LockKey(absl::string_view name) const {
  return absl::StrCat(lock_prefix_, name, "}");
}

std::string Keyspace::ObjectKey(char letter, absl::string_view name) const {
  // lock_prefix_ is "dlock:{<ns>:": the letter goes before the brace.
  constexpr size_t kDlock = 6;  // "dlock:"
  return absl::StrCat(lock_prefix_.substr(0, kDlock),
                      absl::string_view(&letter, 1),
                      lock_prefix_.substr(kDlock), name, "}");
}

Liveness ClientLiveness(const BackendConfig& config) {
  const absl::Duration ttl = config.options.liveness_ttl;
  return Liveness{.ttl_ms =
                      ttl != absl::InfiniteDuration() ? LeaseMillis(ttl) : 0};
}

absl::Status Malformed(absl::string_view what, absl::string_view endpoint) {
  return absl::InternalError(absl::StrCat(
      "redis at ", endpoint, " gave an unexpected reply to ", what));
}

ScriptCall AcquireScript(const Master& master, const Keyspace& keys,
                         const Liveness& liveness, absl::string_view name,
                         absl::string_view owner, absl::Duration lease,
                         bool will_wait,
                         std::optional<uint64_t> proposed_token) {
  // The script writes a fresh hold of these strings as they are: its
  // expiry (lease + 1 from the ms of its TIME, which the hold starts
  // after) and liveness deadline (TTL + 1, or -1) are formatted here.
  const int64_t lease_ms = LeaseMillis(lease);
  ScriptCall call{
      &master.scripts().acquire,
      {keys.LockKey(name)},
      {std::string(owner), absl::StrCat(lease_ms), absl::StrCat(lease_ms + 1),
       will_wait ? "1" : "0",
       liveness.ttl_ms > 0 ? absl::StrCat(liveness.ttl_ms + 1) : "-1"}};
  AddFloorAndProposal(keys, proposed_token, call);
  return call;
}

void AddFloorAndProposal(const Keyspace& keys,
                         std::optional<uint64_t> proposed_token,
                         ScriptCall& call) {
  if (!proposed_token.has_value()) return;
  call.keys.push_back(keys.floor());
  call.args.push_back(absl::StrCat(*proposed_token));
}

ScriptCall RefreshLivenessScript(const Master& master, const Keyspace& keys,
                                 const Liveness& liveness,
                                 absl::string_view name,
                                 absl::string_view owner, uint64_t token) {
  return ScriptCall{
      &master.scripts().refresh_liveness,
      {keys.LockKey(name)},
      {std::string(owner), absl::StrCat(token), absl::StrCat(liveness.ttl_ms)}};
}

absl::StatusOr<bool> ParseRefreshLiveness(const redisReply* r,
                                          absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_INTEGER) return Malformed("liveness", endpoint);
  return r->integer == 1;
}

namespace {

// The fields of a fresh hold's value before its owner: "v4", the token's
// seconds and microseconds, and six more, each followed by a space.
constexpr int kFieldsBeforeOwner = 9;

// A fresh hold's value (docs/redis.md, keys): its token and the part
// before the owner; nullopt when it is not one.
std::optional<std::pair<uint64_t, absl::string_view>> ReadFreshValue(
    absl::string_view value) {
  size_t end = 0;
  for (int i = 0; i < kFieldsBeforeOwner; ++i) {
    end = value.find(' ', end);
    if (end == absl::string_view::npos) return std::nullopt;
    ++end;
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(value.substr(0, end - 1), ' ');
  uint64_t sec = 0;
  uint64_t usec = 0;
  // A token the scripts' doubles hold exactly (below 2^53), as TIME's are.
  if (fields[0] != "v4" || !absl::SimpleAtoi(fields[1], &sec) ||
      !absl::SimpleAtoi(fields[2], &usec) || usec >= 1000000 ||
      sec > (uint64_t{1} << 53) / 1000000) {
    return std::nullopt;
  }
  return std::make_pair(sec * 1000000 + usec, value.substr(0, end));
}

}  // namespace

absl::StatusOr<AcquireReply> ParseAcquire(const redisReply* r,
                                          absl::string_view endpoint) {
  AcquireReply out;
  if (r->type == REDIS_REPLY_STRING) {
    // A free lock taken: the value written, which the release sends back.
    const auto fresh = ReadFreshValue(absl::string_view(r->str, r->len));
    if (!fresh.has_value()) return Malformed("acquire", endpoint);
    out.acquired = Acquired{fresh->first, 1};
    out.fresh_prefix = std::string(fresh->second);
    return out;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      r->element[0]->type != REDIS_REPLY_INTEGER) {
    return Malformed("acquire", endpoint);
  }
  if (r->element[0]->integer == 1 && r->elements == 3) {
    out.acquired = Acquired{static_cast<uint64_t>(r->element[1]->integer),
                            r->element[2]->integer};
    return out;
  }
  // pttl is -1 for a key without expiry, which we never write, and -2 when
  // it expired between the calls: look again at once.
  const int64_t pttl = r->element[1]->integer;
  out.holder_lease_left = absl::Milliseconds(pttl >= 0 ? pttl : 0);
  if (r->elements >= 3 && r->element[2]->type == REDIS_REPLY_STRING) {
    out.holder.assign(r->element[2]->str, r->element[2]->len);
  }
  return out;
}

ScriptCall ReleaseScript(const Master& master, const Keyspace& keys,
                         absl::string_view name, absl::string_view owner,
                         int64_t holds, absl::Duration keep_for,
                         absl::string_view fresh_prefix) {
  const int64_t keep_ms = KeepMillis(keep_for);
  return ScriptCall{
      &master.scripts().release,
      {keys.LockKey(name)},
      {keep_ms == 0 && !fresh_prefix.empty() ? absl::StrCat(fresh_prefix, owner)
                                             : std::string(),
       std::string(owner), absl::StrCat(holds), keys.ReleaseChannel(name),
       std::string(name), absl::StrCat(keep_ms)}};
}

absl::StatusOr<int64_t> ParseRelease(const redisReply* r,
                                     absl::string_view name,
                                     absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_INTEGER) return Malformed("release", endpoint);
  if (r->integer < 0) return NotOwnerError(name);
  return r->integer;
}

ScriptCall RenewScript(const Master& master, const Keyspace& keys,
                       const Liveness& liveness, absl::string_view name,
                       absl::string_view owner, absl::Duration lease) {
  return ScriptCall{&master.scripts().renew,
                    {keys.LockKey(name)},
                    {std::string(owner), absl::StrCat(LeaseMillis(lease)),
                     absl::StrCat(liveness.ttl_ms)}};
}

absl::Status ParseRenew(const redisReply* r, absl::string_view name,
                        absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_INTEGER) return Malformed("renew", endpoint);
  return r->integer == 1 ? absl::OkStatus() : NotOwnerError(name);
}

ScriptCall InspectScript(const Master& master, const Keyspace& keys,
                         absl::string_view name) {
  return ScriptCall{&master.scripts().inspect, {keys.LockKey(name)}, {}};
}

absl::StatusOr<LockInfo> ParseInspect(const redisReply* r,
                                      absl::string_view name,
                                      absl::string_view endpoint) {
  LockInfo info;
  info.name = std::string(name);
  if (r->type != REDIS_REPLY_ARRAY) return Malformed("inspect", endpoint);
  if (r->elements == 0) return info;
  if (r->elements != 6) return Malformed("inspect", endpoint);
  info.owner.assign(r->element[0]->str, r->element[0]->len);
  info.hold_count = r->element[1]->integer;
  // Held by nobody with a count: the marker of readers (C23), who are not
  // the lock's writer; HolderObjects::InspectLock shows them.
  if (info.owner.empty() && info.hold_count > 0) {
    LockInfo free;
    free.name = info.name;
    return free;
  }
  info.locked = true;
  info.fencing_token = static_cast<uint64_t>(r->element[2]->integer);
  info.since = absl::FromUnixMillis(r->element[3]->integer);
  info.remaining_lease =
      absl::Milliseconds(std::max<int64_t>(0, r->element[4]->integer));
  info.kept_after_release = info.owner.empty();  // the release script's
  if (r->element[5]->integer >= 0) {
    info.holder_live = r->element[5]->integer == 1;
  }
  return info;
}

ScriptCall RaiseTokenScript(const Master& master, const Keyspace& keys,
                            absl::string_view name, absl::string_view owner,
                            uint64_t token) {
  return ScriptCall{&master.scripts().raise_token,
                    {keys.LockKey(name), keys.floor()},
                    {std::string(owner), absl::StrCat(token)}};
}

ScriptCall ForceUnlockScript(const Master& master, const Keyspace& keys,
                             absl::string_view name) {
  return ScriptCall{&master.scripts().force_unlock,
                    {keys.LockKey(name)},
                    {keys.ReleaseChannel(name), std::string(name)}};
}

ScriptCall ForceUnlockIfTokenScript(const Master& master, const Keyspace& keys,
                                    absl::string_view name,
                                    uint64_t fencing_token) {
  return ScriptCall{&master.scripts().force_unlock_if_token,
                    {keys.LockKey(name)},
                    {keys.ReleaseChannel(name), std::string(name),
                     absl::StrCat(fencing_token)}};
}

absl::StatusOr<bool> ParseForceUnlockIfToken(const redisReply* r,
                                             absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_INTEGER) {
    return Malformed("force unlock on a token", endpoint);
  }
  return r->integer == 1;
}

namespace {

// Names may hold glob characters; SCAN's MATCH needs them escaped.
std::string GlobEscape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

absl::Status ParseScanPage(const redisReply* r, absl::string_view key_prefix,
                           std::string& cursor, std::vector<std::string>& names,
                           absl::string_view endpoint) {
  if (absl::Status s = ReplyError(r, "SCAN", endpoint); !s.ok()) return s;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      r->element[1]->type != REDIS_REPLY_ARRAY) {
    return Malformed("SCAN", endpoint);
  }
  cursor.assign(r->element[0]->str, r->element[0]->len);
  for (size_t i = 0; i < r->element[1]->elements; ++i) {
    const redisReply* key = r->element[1]->element[i];
    // Only a lock key MATCH let through ("<prefix><name>}"): a broken
    // server's other answers (a key shorter than the prefix, read before
    // its start) are no lock.
    if (key->type != REDIS_REPLY_STRING) return Malformed("SCAN", endpoint);
    absl::string_view name(key->str, key->len);
    if (absl::ConsumePrefix(&name, key_prefix) &&
        absl::ConsumeSuffix(&name, "}")) {
      names.emplace_back(name);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ScanLockNames(
    Master& master, const Keyspace& keys, absl::string_view prefix) {
  return ScanNames(master, keys.lock_prefix(), prefix);
}

absl::StatusOr<std::vector<std::string>> ScanNames(Master& master,
                                                   absl::string_view key_prefix,
                                                   absl::string_view prefix) {
  const std::string pattern =
      absl::StrCat(GlobEscape(key_prefix), GlobEscape(prefix), "*");
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    absl::StatusOr<std::vector<Reply>> replies = master.Send(
        {FormatCommand({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"})});
    if (!replies.ok()) return replies.status();
    if (absl::Status s = ParseScanPage((*replies)[0].get(), key_prefix, cursor,
                                       names, master.endpoint());
        !s.ok()) {
      return s;
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

absl::StatusOr<int64_t> ParseUsedMemory(const redisReply* r,
                                        absl::string_view endpoint) {
  if (absl::Status s = ReplyError(r, "INFO", endpoint); !s.ok()) return s;
  if (r->type != REDIS_REPLY_STRING) return Malformed("INFO", endpoint);
  constexpr absl::string_view kField = "used_memory:";
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(r->str, r->len), "\r\n")) {
    int64_t bytes = 0;
    if (absl::ConsumePrefix(&line, kField) && absl::SimpleAtoi(line, &bytes)) {
      return bytes;
    }
  }
  return Malformed("INFO memory", endpoint);
}

absl::StatusOr<int64_t> UsedMemory(Master& master) {
  absl::StatusOr<std::vector<Reply>> replies =
      master.Send({FormatCommand({"INFO", "memory"})});
  if (!replies.ok()) return replies.status();
  return ParseUsedMemory((*replies)[0].get(), master.endpoint());
}

}  // namespace dlock::redis
