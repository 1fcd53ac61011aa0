// The zk:// backend's objects beyond the lock (issue 24): how elections and
// semaphores are read, watched, listed and forced (C11, C12, C22, C24).
// Their holds go through the queue recipe on the object's own parent
// (zk_layout.h; a semaphore's admission in zk_admission.cc); Proclaim, a
// write of a hold, is in zk_release.cc.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/errors.h"
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

absl::StatusOr<std::vector<ZkBackend::Holder>> ZkBackend::ReadQueue(
    ObjectKind kind, absl::string_view name) {
  const std::string parent = ParentOf(kind, name);
  const std::string reading =
      absl::StrCat("reading ", ObjectKindName(kind), " '", name, "'");
  std::vector<Holder> out;
  Reply list = session_->Children(parent).Wait(writer_->CallDeadline());
  if (list.rc == ZNONODE) return out;
  if (list.rc != ZOK) return session_->ErrorStatus(list.rc, reading);
  std::vector<Call> calls;
  std::vector<std::string> paths;
  for (const std::string& child : SortedQueue(std::move(list.children))) {
    paths.push_back(absl::StrCat(parent, "/", child));
    calls.push_back(session_->Get(paths.back(), false));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    Reply got = calls[i].Wait(writer_->CallDeadline());
    if (got.rc == ZNONODE) continue;  // released meanwhile
    if (got.rc != ZOK) return session_->ErrorStatus(got.rc, reading);
    std::optional<NodeData> data = Parse(got.data);
    if (!data.has_value()) continue;  // not a dlock node
    out.push_back(
        Holder{.path = paths[i], .data = *std::move(data), .stat = got.stat});
  }
  return out;
}

absl::StatusOr<std::optional<ZkBackend::Holder>> ZkBackend::FindGrant(
    ObjectKind kind, absl::string_view name, absl::string_view owner) {
  absl::StatusOr<std::vector<Holder>> queue = ReadQueue(kind, name);
  if (!queue.ok()) return queue.status();
  for (Holder& node : *queue) {
    const bool holds = kind == ObjectKind::kSemaphore
                           ? AdmittedSlots(node.data.value).has_value()
                           : IsReadNode(node.path);
    if (node.data.owner == owner && holds &&
        !writer_->Expired(node.data, node.stat)) {
      return std::optional<Holder>(std::move(node));
    }
  }
  return std::optional<Holder>();
}

std::vector<ZkBackend::Holder> ZkBackend::Holding(
    ObjectKind kind, std::vector<Holder> queue) const {
  std::vector<Holder> out;
  // A lock's write nodes so far: a reader holds when each is its owner's.
  std::vector<std::string> writers;
  for (size_t i = 0; i < queue.size(); ++i) {
    Holder& node = queue[i];
    bool holds = AdmittedSlots(node.data.value).has_value();
    if (kind == ObjectKind::kLock) {
      const absl::string_view reader = OwnerOfReader(node.data.owner);
      holds =
          IsReadNode(node.path)
              ? std::all_of(writers.begin(), writers.end(),
                            [&](const std::string& w) { return w == reader; })
              : i == 0;
      if (!IsReadNode(node.path)) writers.push_back(node.data.owner);
    }
    if (holds && !writer_->Expired(node.data, node.stat)) {
      out.push_back(std::move(node));
    }
  }
  return out;
}

absl::StatusOr<ObjectInfo> ZkBackend::InspectHolding(ObjectKind kind,
                                                     absl::string_view name) {
  ObjectInfo info{.kind = kind, .name = std::string(name), .limit = 1};
  absl::StatusOr<std::vector<Holder>> queue = ReadQueue(kind, name);
  if (!queue.ok()) return queue.status();
  if (kind == ObjectKind::kSemaphore) {
    // The same N in every node's name (kLimitMismatch); none: none in force.
    info.limit = 0;
    for (const Holder& node : *queue) {
      if (std::optional<PermitsAsked> asked =
              PermitsOf(node.path.substr(node.path.rfind('/') + 1))) {
        info.limit = asked->limit;
      }
    }
  }
  for (const Holder& node : Holding(kind, *std::move(queue))) {
    HolderInfo holder = HolderOf(Describe(name, node));
    holder.shared = IsReadNode(node.path);
    if (holder.shared)
      holder.owner = std::string(OwnerOfReader(node.data.owner));
    holder.fencing_token =
        TokenOf(node.data, static_cast<uint64_t>(node.stat.czxid));
    holder.slots =
        AdmittedSlots(node.data.value).value_or(std::vector<int64_t>{});
    info.holders.push_back(std::move(holder));
  }
  return info;
}

absl::Status ZkBackend::ForceUnlockHolding(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  absl::StatusOr<std::vector<Holder>> queue = ReadQueue(kind, name);
  if (!queue.ok()) return queue.status();
  bool found = false;
  for (const Holder& node : Holding(kind, *std::move(queue))) {
    if (fencing_token.has_value() &&
        TokenOf(node.data, static_cast<uint64_t>(node.stat.czxid)) !=
            *fencing_token) {
      continue;
    }
    // Its path is never reused: deleting it removes this hold only. The
    // waiters' watches wake them.
    Reply r = session_->Delete(node.path, -1).Wait(writer_->CallDeadline());
    if (r.rc != ZOK && r.rc != ZNONODE) {
      return session_->ErrorStatus(
          r.rc, absl::StrCat("force unlock of ", ObjectKindName(kind), " '",
                             name, "'"));
    }
    found = found || r.rc == ZOK;
  }
  if (fencing_token.has_value() && !found) {
    return TokenMismatchError(name, *fencing_token);
  }
  return absl::OkStatus();
}

std::unique_ptr<ObjectWatch> ZkBackend::WatchObject(ObjectKind kind,
                                                    absl::string_view name) {
  if (kind == ObjectKind::kLock) return nullptr;
  return std::make_unique<ParentWatch>(hub_, ParentOf(kind, name));
}

absl::StatusOr<ObjectInfo> ZkBackend::InspectObject(ObjectKind kind,
                                                    absl::string_view name) {
  if (kind == ObjectKind::kSemaphore) return InspectHolding(kind, name);
  if (kind == ObjectKind::kLock) {
    // Kept after its release: nobody holds it, the keep says until when.
    absl::StatusOr<Kept> kept = FindKept(name);
    if (!kept.ok()) return kept.status();
    if (kept->live.has_value()) return Backend::InspectObject(kind, name);
    return InspectHolding(kind, name);
  }
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
  info.holders.push_back(HolderOf(Describe(name, **holder)));
  info.value = (*holder)->data.value.value_or("");
  return info;
}

absl::StatusOr<std::vector<ObjectInfo>> ZkBackend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  // A lock is listed for its writer, its readers, or its keep.
  return InspectObjectsHeld(kind, NamesOf(kind, prefix));
}

absl::Status ZkBackend::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind == ObjectKind::kElection) {
    return DeleteHolder(kind, name, fencing_token);
  }
  if (kind == ObjectKind::kLock) {
    // Kept after its release: the keep goes, as ForceUnlock(IfToken) do.
    absl::StatusOr<Kept> kept = FindKept(name);
    if (!kept.ok()) return kept.status();
    if (kept->live.has_value()) {
      return Backend::ForceUnlockObject(kind, name, fencing_token);
    }
  }
  // Whoever holds as one reading shows: a lock's writer or readers (never a
  // waiter granted after it), a semaphore's holders.
  return ForceUnlockHolding(kind, name, fencing_token);
}

}  // namespace dlock::zk
