#include "dlock/backend/backend.h"

#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

absl::Status KindNotOffered(ObjectKind kind) {
  return absl::UnimplementedError(
      absl::StrCat("this backend keeps no ", ObjectKindName(kind), " objects"));
}

}  // namespace

HolderInfo HolderOf(const LockInfo& lock) {
  return HolderInfo{.owner = lock.owner,
                    .hold_count = lock.hold_count,
                    .fencing_token = lock.fencing_token,
                    .remaining_lease = lock.remaining_lease,
                    .since = lock.since,
                    .holder_live = lock.holder_live};
}

ObjectInfo LockObject(const LockInfo& lock) {
  ObjectInfo info{.kind = ObjectKind::kLock, .name = lock.name, .limit = 1};
  if (lock.kept_after_release) {
    info.kept_after_release = true;
    info.kept_remaining = lock.remaining_lease;
  } else if (lock.locked) {
    info.holders.push_back(HolderOf(lock));
  }
  return info;
}

bool ListsAsHeld(const ObjectInfo& info) {
  return !info.holders.empty() || info.kept_after_release ||
         info.waiter.has_value();
}

std::vector<absl::Status> Backend::RenewMany(
    absl::Span<const RenewCall> calls) {
  std::vector<absl::Status> results;
  results.reserve(calls.size());
  for (const RenewCall& call : calls) results.push_back(Renew(call));
  return results;
}

MonoTime Backend::HeldUntil(absl::string_view, absl::string_view,
                            const HoldRecord*) {
  return MonoTime::InfiniteFuture();
}

absl::Status Backend::RenewLiveness(absl::Duration) {
  return absl::UnimplementedError("this backend keeps no liveness record");
}

absl::StatusOr<std::vector<LockInfo>> Backend::List(absl::string_view) {
  return absl::UnimplementedError("this backend cannot list its locks");
}

absl::StatusOr<std::vector<LockInfo>> Backend::InspectHeld(
    const absl::StatusOr<std::vector<std::string>>& names) {
  if (!names.ok()) return names.status();
  std::vector<LockInfo> out;
  for (const std::string& name : *names) {
    absl::StatusOr<LockInfo> info = Inspect(name);
    if (!info.ok()) return info.status();
    if (info->locked) out.push_back(*std::move(info));
  }
  return out;
}

absl::StatusOr<std::vector<ObjectInfo>> Backend::InspectObjectsHeld(
    ObjectKind kind, const absl::StatusOr<std::vector<std::string>>& names) {
  if (!names.ok()) return names.status();
  std::vector<ObjectInfo> out;
  for (const std::string& name : *names) {
    absl::StatusOr<ObjectInfo> info = InspectObject(kind, name);
    if (!info.ok()) return info.status();
    if (ListsAsHeld(*info)) out.push_back(*std::move(info));
  }
  return out;
}

absl::Status Backend::ForceUnlockIfToken(absl::string_view, uint64_t) {
  return absl::UnimplementedError(
      "this backend cannot force-unlock on a fencing token");
}

absl::StatusOr<ServerMemory> Backend::ServerMemoryUse() {
  return absl::UnimplementedError(
      "this backend's server does not report its memory use");
}

absl::StatusOr<std::vector<Grant>> Backend::AcquireAll(
    absl::Span<const AcquireCall>, MonoTime, const CancelToken&) {
  return absl::UnimplementedError(
      "this backend cannot take several locks in one atomic step");
}

absl::Status Backend::Proclaim(const ProclaimCall&) {
  return KindNotOffered(ObjectKind::kElection);
}

std::unique_ptr<ObjectWatch> Backend::WatchObject(ObjectKind,
                                                  absl::string_view) {
  return nullptr;
}

absl::StatusOr<ObjectInfo> Backend::InspectObject(ObjectKind kind,
                                                  absl::string_view name) {
  if (kind != ObjectKind::kLock) return KindNotOffered(kind);
  absl::StatusOr<LockInfo> lock = Inspect(name);
  if (!lock.ok()) return lock.status();
  return LockObject(*lock);
}

absl::StatusOr<std::vector<ObjectInfo>> Backend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  if (kind != ObjectKind::kLock) return KindNotOffered(kind);
  absl::StatusOr<std::vector<LockInfo>> locks = List(prefix);
  if (!locks.ok()) return locks.status();
  std::vector<ObjectInfo> out;
  out.reserve(locks->size());
  for (const LockInfo& lock : *locks) out.push_back(LockObject(lock));
  return out;
}

absl::Status Backend::ForceUnlockObject(ObjectKind kind, absl::string_view name,
                                        std::optional<uint64_t> fencing_token) {
  if (kind != ObjectKind::kLock) return KindNotOffered(kind);
  return fencing_token.has_value() ? ForceUnlockIfToken(name, *fencing_token)
                                   : ForceUnlock(name);
}

const char* FencingStrengthName(FencingStrength strength) {
  switch (strength) {
    case FencingStrength::kProcess:
      return "process";
    case FencingStrength::kServerMemory:
      return "server-memory";
    case FencingStrength::kDurable:
      return "durable";
  }
  return "unknown";
}

const char* WaiterOrderName(WaiterOrder order) {
  switch (order) {
    case WaiterOrder::kNone:
      return "none";
    case WaiterOrder::kHeadReserved:
      return "head-reserved";
    case WaiterOrder::kFifo:
      return "fifo";
  }
  return "unknown";
}

const char* MultiLockModeName(MultiLockMode mode) {
  switch (mode) {
    case MultiLockMode::kOrdered:
      return "ordered";
    case MultiLockMode::kAtomicWithinSlot:
      return "atomic-within-slot";
    case MultiLockMode::kAtomic:
      return "atomic";
  }
  return "unknown";
}

absl::string_view ObjectKindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kLock:
      return "lock";
    case ObjectKind::kSemaphore:
      return "semaphore";
    case ObjectKind::kElection:
      return "election";
  }
  return "unknown";
}

}  // namespace dlock
