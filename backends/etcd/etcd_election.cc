// The etcd:// backend's elections (C24), and the admin calls of every
// kind of object (a semaphore's: etcd_semaphore.cc), following clientv3
// concurrency's Election: the leadership is one key, the election's own
// (ObjectName), taken, re-entered, renewed and released as a lock's writer (so
// it rides the hold's lease, the client's liveness key and the watch that wakes
// waiters). Its value carries the leader's value; the term is the key's
// create revision, which only grows. Proclaim is a Txn comparing the key's
// create revision (the term) and mod revision, so a deposed leader never
// writes over its successor, and a write retried after a lost reply
// recognizes its first attempt (Overwrite). Observers wait on the
// namespace's watch, which wakes them on every write of the key.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/backend/wakeup.h"
#include "etcd_backend.h"

namespace dlock::etcd {
namespace {

ObjectInfo AsObject(ObjectKind kind, absl::string_view name,
                    const LockInfo& info, std::string value) {
  ObjectInfo out{.kind = kind, .name = std::string(name), .limit = 1};
  if (!info.locked || info.kept_after_release) return out;
  out.holders.push_back(HolderOf(info));
  out.value = std::move(value);
  return out;
}

}  // namespace

absl::Status EtcdBackend::Proclaim(const ProclaimCall& call) {
  const std::string object = ObjectName(ObjectKind::kElection, call.name);
  const std::string key = layout_.Key(object);
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(key);
    if (!kv.ok()) return kv.status();
    std::optional<HoldValue> value =
        kv->has_value() ? Decode((*kv)->value()) : std::nullopt;
    // Another term, or another leader: this one was deposed.
    if (!value.has_value() || value->owner != call.owner ||
        static_cast<uint64_t>((*kv)->create_revision()) != call.term) {
      return NotOwnerError(call.name);
    }
    value->value = std::string(call.value);
    absl::StatusOr<bool> written = Overwrite(key, **kv, *value, 0);
    if (!written.ok()) return written.status();
    if (*written) {
      hub_.Notify(object);  // this client's observers; others' by the watch
      return absl::OkStatus();
    }
  }
  return Contended(call.name, "proclaim");
}

std::unique_ptr<ObjectWatch> EtcdBackend::WatchObject(ObjectKind kind,
                                                      absl::string_view name) {
  // Registered before the watch starts: its start wakes the observer.
  std::unique_ptr<ObjectWatch> watch =
      std::make_unique<HubWatch>(hub_, ObjectName(kind, name));
  StartWatch();
  return watch;
}

absl::StatusOr<ObjectInfo> EtcdBackend::InspectObject(ObjectKind kind,
                                                      absl::string_view name) {
  if (kind == ObjectKind::kLock) return InspectLock(name);
  if (kind == ObjectKind::kSemaphore) return InspectSemaphore(name);
  const std::string object = ObjectName(kind, name);
  absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(layout_.Key(object));
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) return AsObject(kind, name, LockInfo{}, "");
  std::optional<HoldValue> value = Decode((*kv)->value());
  absl::StatusOr<absl::flat_hash_set<std::string>> live = liveness_.LiveAmong(
      value.has_value() ? value->live : std::vector<std::string>{});
  if (!live.ok()) return live.status();
  absl::StatusOr<LockInfo> info = Describe(name, **kv, *live);
  if (!info.ok()) return info.status();
  return AsObject(kind, name, *info, value.has_value() ? value->value : "");
}

absl::StatusOr<std::vector<ObjectInfo>> EtcdBackend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  if (kind == ObjectKind::kLock) {
    return InspectObjectsHeld(kind, LockNames(prefix));
  }
  if (kind == ObjectKind::kSemaphore) return ListSemaphores(prefix);
  absl::StatusOr<std::vector<Described>> held =
      DescribeFrom(ObjectName(kind, prefix));
  if (!held.ok()) return held.status();
  std::vector<ObjectInfo> out;
  for (Described& one : *held) {
    std::optional<NamedObject> object = ParseObjectName(one.info.name);
    if (!object.has_value() || object->kind != kind) continue;
    out.push_back(AsObject(kind, object->name, one.info, std::move(one.value)));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> EtcdBackend::LockNames(
    absl::string_view prefix) {
  absl::StatusOr<std::vector<LockInfo>> writers = List(prefix);
  if (!writers.ok()) return writers.status();
  std::set<std::string> names;
  for (const LockInfo& writer : *writers) names.insert(writer.name);
  // Each reader's key (and a waiting writer's intent) names its lock.
  absl::StatusOr<etcdserverpb::RangeResponse> readers =
      RangeOf(layout_.Key(ReadLocksPrefix(prefix)), /*keys_only=*/true);
  if (!readers.ok()) return readers.status();
  for (const mvccpb::KeyValue& kv : readers->kvs()) {
    std::optional<absl::string_view> key_name = layout_.NameOf(kv.key());
    if (!key_name.has_value()) continue;
    std::optional<NamedObject> object = ParseObjectName(*key_name);
    if (object.has_value() && object->readers) {
      names.insert(std::string(object->name));
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::Status EtcdBackend::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind == ObjectKind::kLock) return ForceUnlockLock(name, fencing_token);
  if (kind == ObjectKind::kSemaphore) {
    return ForceUnlockSemaphore(name, fencing_token);
  }
  absl::Status status = EndHolder(ObjectName(kind, name), fencing_token);
  if (IsTokenMismatch(status)) {
    return TokenMismatchError(name, *fencing_token);  // named plainly
  }
  return status;
}

}  // namespace dlock::etcd
