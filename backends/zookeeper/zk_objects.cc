// The zk:// backend's objects beyond the lock (issue 24): how an election
// is read, watched, listed and forced (C11, C12, C24). Its holds go through
// the lock's recipe on the election's own parent (zk_layout.h); Proclaim,
// a write of a hold, is in zk_release.cc.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "zk_backend.h"

namespace dlock::zk {
namespace {

// Registered on the object's parent before the caller reads it; the read
// (FindHolder with watch) sets the watches that notify that path: a child
// created or deleted, the first node's data written or deleted, the parent
// created. A session event wakes every waiter too.
class ParentWatch : public ObjectWatch {
 public:
  ParentWatch(WakeupHub& hub, const std::string& parent)
      : waiter_(hub, parent) {}
  bool Wait(MonoTime until, const CancelToken& cancel) override {
    return waiter_.Wait(until, cancel);
  }

 private:
  WakeupHub::Waiter waiter_;
};

}  // namespace

std::unique_ptr<ObjectWatch> ZkBackend::WatchObject(ObjectKind kind,
                                                    absl::string_view name) {
  if (kind != ObjectKind::kElection) return nullptr;
  return std::make_unique<ParentWatch>(hub_, ParentOf(kind, name));
}

absl::StatusOr<ObjectInfo> ZkBackend::InspectObject(ObjectKind kind,
                                                    absl::string_view name) {
  if (kind != ObjectKind::kElection) {
    return Backend::InspectObject(kind, name);
  }
  ObjectInfo info{.kind = kind, .name = std::string(name), .limit = 1};
  // With watches: an observer's WaitForChange() sleeps on what this read.
  absl::StatusOr<std::optional<Holder>> holder =
      FindHolder(name, kind, /*watch=*/true);
  if (!holder.ok()) return holder.status();
  if (!holder->has_value() ||
      writer_->Expired((*holder)->data, (*holder)->stat)) {
    return info;
  }
  const LockInfo leader = Describe(name, **holder);
  info.holders.push_back(HolderInfo{.owner = leader.owner,
                                    .hold_count = leader.hold_count,
                                    .fencing_token = leader.fencing_token,
                                    .remaining_lease = leader.remaining_lease,
                                    .since = leader.since,
                                    .holder_live = leader.holder_live});
  info.value = (*holder)->data.value.value_or("");
  return info;
}

absl::StatusOr<std::vector<ObjectInfo>> ZkBackend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  if (kind != ObjectKind::kElection) return Backend::ListObjects(kind, prefix);
  absl::StatusOr<std::vector<std::string>> names = NamesOf(kind, prefix);
  if (!names.ok()) return names.status();
  std::vector<ObjectInfo> out;
  for (const std::string& name : *names) {
    absl::StatusOr<ObjectInfo> info = InspectObject(kind, name);
    if (!info.ok()) return info.status();
    if (!info->holders.empty()) out.push_back(*std::move(info));
  }
  return out;
}

absl::Status ZkBackend::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind != ObjectKind::kElection) {
    return Backend::ForceUnlockObject(kind, name, fencing_token);
  }
  return DeleteHolder(kind, name, fencing_token);
}

}  // namespace dlock::zk
