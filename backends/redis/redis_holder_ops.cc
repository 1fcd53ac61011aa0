#include "redis_holder_ops.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"

namespace dlock::redis {
namespace {

// A lock's holders hash is its readers'.
std::string KeyOf(const Keyspace& keys, ObjectKind kind,
                  absl::string_view name) {
  return keys.ObjectKey(kind == ObjectKind::kLock ? 'r' : KindLetter(kind),
                        name);
}

bool IsRead(const HoldShape& shape) {
  return shape.kind == ObjectKind::kLock && shape.mode == HoldMode::kShared;
}

const char* ElectionFlag(ObjectKind kind) {
  return kind == ObjectKind::kElection ? "1" : "0";
}

absl::string_view Text(const redisReply* r) {
  return r->type == REDIS_REPLY_STRING ? absl::string_view(r->str, r->len)
                                       : absl::string_view();
}

bool AllIntegers(const redisReply* r, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER) return false;
  }
  return true;
}

}  // namespace

std::string ObjectMessage(ObjectKind kind, absl::string_view name) {
  if (kind == ObjectKind::kLock) return std::string(name);
  const char marked[] = {'\x1f', KindLetter(kind)};
  return absl::StrCat(absl::string_view(marked, 2), name);
}

ScriptCall HolderAcquireScript(const Master& master, const Keyspace& keys,
                               const Liveness& liveness,
                               const AcquireCall& call, bool will_wait,
                               absl::Duration place,
                               std::optional<uint64_t> proposed) {
  const bool election = call.shape.kind == ObjectKind::kElection;
  ScriptCall script{
      &master.scripts().sem_acquire,
      {KeyOf(keys, call.shape.kind, call.name)},
      {std::string(call.owner), absl::StrCat(LeaseMillis(call.lease)),
       will_wait ? "1" : "0", absl::StrCat(liveness.ttl_ms),
       absl::StrCat(election ? 1 : call.shape.limit),
       absl::StrCat(election ? 1 : call.shape.permits),
       absl::StrCat(absl::ToInt64Milliseconds(place)),
       keys.ReleaseChannel(call.name),
       ObjectMessage(call.shape.kind, call.name), ElectionFlag(call.shape.kind),
       std::string(call.value)}};
  AddFloorAndProposal(keys, proposed, script);
  return script;
}

absl::StatusOr<HolderAcquireReply> ParseHolderAcquire(
    const redisReply* r, const AcquireCall& call, absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      !AllIntegers(r, 0, 2)) {
    return Malformed("acquire", endpoint);
  }
  const int64_t verdict = r->element[0]->integer;
  const int64_t number = r->element[1]->integer;
  HolderAcquireReply out;
  switch (verdict) {
    case 1: {
      if (r->elements != 4 || r->element[2]->type != REDIS_REPLY_INTEGER) {
        return Malformed("acquire", endpoint);
      }
      std::optional<std::vector<int64_t>> slots =
          ParseSlots(Text(r->element[3]));
      if (!slots.has_value()) return Malformed("acquire", endpoint);
      out.attempt.acquired =
          Acquired{static_cast<uint64_t>(number), r->element[2]->integer};
      // A leadership holds no permit slot of its own to show.
      if (call.shape.kind == ObjectKind::kSemaphore) out.slots = *slots;
      return out;
    }
    case 0:
      out.attempt.holder_lease_left =
          absl::Milliseconds(std::max<int64_t>(number, 0));
      if (r->elements == 3) out.leader = std::string(Text(r->element[2]));
      return out;
    case -2:
      return LimitMismatchError(call.name, number, call.shape.limit);
    case -3:
      return PermitsMismatchError(call.name, number, call.shape.permits);
    default:
      return Malformed("acquire", endpoint);
  }
}

absl::StatusOr<HolderAcquireReply> ParseReadAcquire(
    const redisReply* reply, absl::string_view endpoint) {
  absl::StatusOr<AcquireReply> parsed = ParseAcquire(reply, endpoint);
  if (!parsed.ok()) return parsed.status();
  return HolderAcquireReply{.attempt = parsed->ToAttempt()};
}

ScriptCall HolderReleaseScript(const Master& master, const Keyspace& keys,
                               const HoldShape& shape, absl::string_view name,
                               absl::string_view owner, int64_t holds) {
  const ObjectKind kind = shape.kind;
  if (IsRead(shape)) {
    return ScriptCall{&master.scripts().read_release,
                      {keys.LockKey(name), KeyOf(keys, kind, name)},
                      {std::string(owner), absl::StrCat(holds),
                       keys.ReleaseChannel(name), std::string(name)}};
  }
  return ScriptCall{
      &master.scripts().sem_release,
      {KeyOf(keys, kind, name)},
      {std::string(owner), absl::StrCat(holds), keys.ReleaseChannel(name),
       ObjectMessage(kind, name), ElectionFlag(kind)}};
}

ScriptCall HolderRenewScript(const Master& master, const Keyspace& keys,
                             const Liveness& liveness, const HoldShape& shape,
                             absl::string_view name, absl::string_view owner,
                             absl::Duration lease) {
  if (IsRead(shape)) {
    return ScriptCall{&master.scripts().read_renew,
                      {keys.LockKey(name), KeyOf(keys, shape.kind, name)},
                      {std::string(owner), absl::StrCat(LeaseMillis(lease)),
                       absl::StrCat(liveness.ttl_ms)}};
  }
  return ScriptCall{&master.scripts().sem_renew,
                    {KeyOf(keys, shape.kind, name)},
                    {std::string(owner), absl::StrCat(LeaseMillis(lease)),
                     absl::StrCat(liveness.ttl_ms)}};
}

ScriptCall HolderRefreshLivenessScript(
    const Master& master, const Keyspace& keys, const Liveness& liveness,
    const HoldShape& shape, absl::string_view name, absl::string_view owner,
    uint64_t token) {
  ScriptCall call{
      &master.scripts().holder_refresh_liveness,
      {KeyOf(keys, shape.kind, name)},
      {std::string(owner), absl::StrCat(token), absl::StrCat(liveness.ttl_ms)}};
  // A read keeps its writer's deadline no earlier than its own.
  if (IsRead(shape)) call.keys.push_back(keys.LockKey(name));
  return call;
}

ScriptCall HolderAbandonScript(const Master& master, const Keyspace& keys,
                               ObjectKind kind, absl::string_view name,
                               absl::string_view owner) {
  return ScriptCall{&master.scripts().holders_abandon,
                    {KeyOf(keys, kind, name)},
                    {std::string(owner), kind == ObjectKind::kLock ? "w" : "q",
                     keys.ReleaseChannel(name), ObjectMessage(kind, name)}};
}

ScriptCall HoldersInspectScript(const Master& master, const Keyspace& keys,
                                ObjectKind kind, absl::string_view name) {
  return ScriptCall{
      &master.scripts().holders_inspect, {KeyOf(keys, kind, name)}, {}};
}

absl::StatusOr<ObjectInfo> ParseHoldersInspect(const redisReply* r,
                                               ObjectKind kind,
                                               absl::string_view name,
                                               absl::string_view endpoint) {
  constexpr size_t kHead = 4;
  constexpr size_t kPerHolder = 8;
  ObjectInfo info{.kind = kind, .name = std::string(name), .limit = 1};
  if (kind == ObjectKind::kSemaphore) info.limit = 0;  // none in force
  if (r->type != REDIS_REPLY_ARRAY) return Malformed("inspect", endpoint);
  if (r->elements == 0) return info;
  if (r->elements < kHead || (r->elements - kHead) % kPerHolder != 0 ||
      r->element[0]->type != REDIS_REPLY_INTEGER ||
      r->element[2]->type != REDIS_REPLY_INTEGER) {
    return Malformed("inspect", endpoint);
  }
  if (kind == ObjectKind::kSemaphore) info.limit = r->element[0]->integer;
  if (absl::string_view waiter = Text(r->element[1]); !waiter.empty()) {
    // A lock's waiter is a writer's intent (its number: readers refused).
    info.waiter = WaiterInfo{
        .owner = std::string(waiter),
        .permits = kind == ObjectKind::kLock ? 1 : r->element[2]->integer};
  }
  info.value = std::string(Text(r->element[3]));
  for (size_t i = kHead; i < r->elements; i += kPerHolder) {
    redisReply* const* h = r->element + i;
    if (!AllIntegers(r, i + 1, i + 7)) return Malformed("inspect", endpoint);
    std::optional<std::vector<int64_t>> slots = ParseSlots(Text(h[7]));
    if (!slots.has_value()) return Malformed("inspect", endpoint);
    HolderInfo holder{.owner = std::string(Text(h[0])),
                      .hold_count = h[1]->integer,
                      .fencing_token = static_cast<uint64_t>(h[3]->integer),
                      .remaining_lease = absl::Milliseconds(h[5]->integer),
                      .since = absl::FromUnixMillis(h[4]->integer)};
    if (kind == ObjectKind::kSemaphore) holder.slots = *std::move(slots);
    if (h[6]->integer >= 0) holder.holder_live = h[6]->integer == 1;
    holder.shared = kind == ObjectKind::kLock;  // a lock's readers
    info.holders.push_back(std::move(holder));
  }
  // Oldest first, as the other backends list them.
  std::sort(info.holders.begin(), info.holders.end(),
            [](const HolderInfo& a, const HolderInfo& b) {
              return a.fencing_token < b.fencing_token;
            });
  return info;
}

absl::StatusOr<LockWithReaders> ParseInspectWithReaders(
    const redisReply* r, absl::string_view name, absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
    return Malformed("inspect", endpoint);
  }
  absl::StatusOr<LockInfo> writer = ParseInspect(r->element[0], name, endpoint);
  if (!writer.ok()) return writer.status();
  absl::StatusOr<ObjectInfo> readers =
      ParseHoldersInspect(r->element[1], ObjectKind::kLock, name, endpoint);
  if (!readers.ok()) return readers.status();
  return LockWithReaders{.writer = *std::move(writer),
                         .readers = *std::move(readers)};
}

ScriptCall HoldersForceUnlockScript(const Master& master, const Keyspace& keys,
                                    ObjectKind kind, absl::string_view name,
                                    std::optional<uint64_t> fencing_token) {
  return ScriptCall{
      &master.scripts().holders_force_unlock,
      {KeyOf(keys, kind, name)},
      {fencing_token.has_value() ? absl::StrCat(*fencing_token) : "",
       keys.ReleaseChannel(name), ObjectMessage(kind, name),
       ElectionFlag(kind)}};
}

ScriptCall ReadAcquireScript(const Master& master, const Keyspace& keys,
                             const Liveness& liveness, const AcquireCall& call,
                             bool will_wait, std::optional<uint64_t> proposed) {
  ScriptCall script{
      &master.scripts().read_acquire,
      {keys.LockKey(call.name), KeyOf(keys, ObjectKind::kLock, call.name)},
      {std::string(call.owner), absl::StrCat(LeaseMillis(call.lease)),
       will_wait ? "1" : "0", absl::StrCat(liveness.ttl_ms)}};
  AddFloorAndProposal(keys, proposed, script);
  return script;
}

ScriptCall WriteAcquireScript(const Master& master, const Keyspace& keys,
                              const Liveness& liveness, const AcquireCall& call,
                              bool will_wait, absl::Duration intent,
                              std::optional<uint64_t> proposed) {
  ScriptCall script{
      &master.scripts().write_acquire,
      {keys.LockKey(call.name), KeyOf(keys, ObjectKind::kLock, call.name)},
      {std::string(call.owner), absl::StrCat(LeaseMillis(call.lease)),
       will_wait ? "1" : "0", absl::StrCat(liveness.ttl_ms),
       absl::StrCat(absl::ToInt64Milliseconds(intent))}};
  AddFloorAndProposal(keys, proposed, script);
  return script;
}

bool IsUpgradeRefusal(const redisReply* r) {
  return r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
         r->element[0]->type == REDIS_REPLY_INTEGER &&
         r->element[0]->integer == -4;
}

void AddReadersKey(const Keyspace& keys, absl::string_view name,
                   ScriptCall& call) {
  call.keys.push_back(KeyOf(keys, ObjectKind::kLock, name));
}

ScriptCall HolderRaiseTokenScript(const Master& master, const Keyspace& keys,
                                  ObjectKind kind, absl::string_view name,
                                  absl::string_view owner, uint64_t token) {
  return ScriptCall{&master.scripts().holder_raise_token,
                    {KeyOf(keys, kind, name), keys.floor()},
                    {std::string(owner), absl::StrCat(token)}};
}

std::string ObjectNamesPrefix(const Keyspace& keys, ObjectKind kind) {
  std::string key_prefix = KeyOf(keys, kind, "");
  // ObjectKey ends with the closing brace; the names come before it.
  key_prefix.pop_back();
  return key_prefix;
}

ScriptCall ElectionProclaimScript(const Master& master, const Keyspace& keys,
                                  const ProclaimCall& call) {
  return ScriptCall{&master.scripts().election_proclaim,
                    {KeyOf(keys, ObjectKind::kElection, call.name)},
                    {std::string(call.owner), absl::StrCat(call.term),
                     std::string(call.value), keys.ReleaseChannel(call.name),
                     ObjectMessage(ObjectKind::kElection, call.name)}};
}

}  // namespace dlock::redis
