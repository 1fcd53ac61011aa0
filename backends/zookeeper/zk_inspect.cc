// The zk:// backend's introspection (C11) and force unlock (C12): the queue
// read as it is now, the holder first, kept-lock nodes beside it.
#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "zk_backend.h"
#include "zk_driver.h"
#include "zk_four_letter.h"

namespace dlock::zk {

absl::StatusOr<std::optional<ZkBackend::Holder>> ZkBackend::FindHolder(
    absl::string_view name, ObjectKind kind, bool watch) {
  const std::string parent = ParentOf(kind, name);
  const std::string reading =
      absl::StrCat("reading ", ObjectKindName(kind), " '", name, "'");
  for (int attempt = 0; attempt < NodeWriter::kWriteRetries; ++attempt) {
    Reply list =
        session_->Children(parent, watch).Wait(writer_->CallDeadline());
    if (list.rc == ZNONODE && watch) {
      // No child watch on a missing node: watch for its creation instead
      // (NONODE sets that watch too). Created meanwhile: list again.
      Reply exists =
          session_->Exists(parent, true).Wait(writer_->CallDeadline());
      if (exists.rc == ZOK) continue;
      if (exists.rc != ZNONODE)
        return session_->ErrorStatus(exists.rc, reading);
    }
    if (list.rc == ZNONODE) return std::nullopt;
    if (list.rc != ZOK) return session_->ErrorStatus(list.rc, reading);
    std::vector<std::string> queue = SortedQueue(std::move(list.children));
    if (queue.empty()) return std::nullopt;
    Holder holder;
    holder.path = absl::StrCat(parent, "/", queue[0]);
    Reply got = session_->Get(holder.path, watch).Wait(writer_->CallDeadline());
    if (got.rc == ZNONODE) continue;  // released meanwhile
    if (got.rc != ZOK) return session_->ErrorStatus(got.rc, reading);
    std::optional<NodeData> data = Parse(got.data);
    if (!data.has_value()) {
      return absl::InternalError(
          absl::StrCat("node ", holder.path, " on ZooKeeper ",
                       session_->endpoint(), " is not a dlock lock node"));
    }
    holder.data = *std::move(data);
    holder.stat = got.stat;
    return std::optional<Holder>(std::move(holder));
  }
  return absl::UnavailableError(absl::StrCat(
      "lock '", name, "' changed hands too fast to read on ZooKeeper ",
      session_->endpoint()));
}

absl::StatusOr<ZkBackend::Kept> ZkBackend::FindKept(absl::string_view name) {
  const std::string parent = ParentOf(name);
  const std::string reading = absl::StrCat("reading lock '", name, "'");
  Kept kept;
  Reply list = session_->Children(parent).Wait(writer_->CallDeadline());
  if (list.rc == ZNONODE) return kept;
  if (list.rc != ZOK) return session_->ErrorStatus(list.rc, reading);
  int64_t latest = 0;
  for (const std::string& child : list.children) {
    if (!IsKeptNode(child)) continue;
    kept.paths.push_back(absl::StrCat(parent, "/", child));
    Reply got =
        session_->Get(kept.paths.back(), false).Wait(writer_->CallDeadline());
    if (got.rc == ZNONODE) continue;
    if (got.rc != ZOK) return session_->ErrorStatus(got.rc, reading);
    std::optional<int64_t> end = KeptEnd(got);
    const int64_t now = session_->EstimatedServerNowMs();
    if (!end.has_value() || *end <= now || *end <= latest) continue;
    latest = *end;
    LockInfo info;
    info.name = std::string(name);
    info.locked = true;
    info.kept_after_release = true;
    info.fencing_token = ParseKept(got.data)->token;
    info.remaining_lease = absl::Milliseconds(*end - now);
    info.since = absl::FromUnixMillis(got.stat.ctime);
    kept.live = std::move(info);
  }
  return kept;
}

LockInfo ZkBackend::Describe(absl::string_view name,
                             const Holder& holder) const {
  LockInfo info;
  info.name = std::string(name);
  info.locked = true;
  // The holder's node lives on its session: held means live.
  info.holder_live = true;
  info.owner = holder.data.owner;
  info.hold_count = holder.data.holds;
  info.fencing_token = static_cast<uint64_t>(holder.stat.czxid);
  info.remaining_lease =
      absl::Milliseconds(holder.stat.mtime + holder.data.lease_ms -
                         session_->EstimatedServerNowMs());
  info.since = absl::FromUnixMillis(
      holder.data.since_ms != 0 ? holder.data.since_ms : holder.stat.ctime);
  return info;
}

absl::StatusOr<LockInfo> ZkBackend::Inspect(absl::string_view name) {
  absl::StatusOr<Kept> kept = FindKept(name);
  if (!kept.ok()) return kept.status();
  // While kept, the first node of the queue is a waiter, not a holder.
  if (kept->live.has_value()) return *std::move(kept->live);
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name);
  if (!holder.ok()) return holder.status();
  if (!WriterHolds(*holder)) {
    // Free, or held by readers alone: no writer (InspectObject shows them).
    LockInfo info;
    info.name = std::string(name);
    return info;
  }
  return Describe(name, **holder);
}

bool ZkBackend::WriterHolds(const std::optional<Holder>& first) const {
  // A reader first in the queue holds with the others ahead of any writer.
  return first.has_value() && !IsReadNode(first->path) &&
         !writer_->Expired(first->data, first->stat);
}

absl::StatusOr<std::vector<std::string>> ZkBackend::NamesOf(
    ObjectKind kind, absl::string_view prefix) {
  Reply list = session_->Children(base_).Wait(writer_->CallDeadline());
  std::vector<std::string> names;
  if (list.rc == ZNONODE) return names;
  if (list.rc != ZOK) {
    return session_->ErrorStatus(list.rc, absl::StrCat("listing ", base_));
  }
  for (const std::string& child : list.children) {
    std::optional<std::string> name = ObjectNameOf(kind, child);
    if (name.has_value() && absl::StartsWith(*name, prefix)) {
      names.push_back(*std::move(name));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::vector<LockInfo>> ZkBackend::List(
    absl::string_view prefix) {
  return InspectHeld(NamesOf(ObjectKind::kLock, prefix));
}

absl::StatusOr<ServerMemory> ZkBackend::ServerMemoryUse() {
  // Every member holds the whole tree: the first that answers will do. (The
  // C client's zoo_get_current_server() formats into one buffer shared by
  // the whole process, which its own threads overwrite.)
  absl::Status error;
  for (absl::string_view server : absl::StrSplit(session_->hosts(), ',')) {
    absl::StatusOr<std::string> mntr =
        FourLetterWord(server, "mntr", session_->call_timeout());
    if (!mntr.ok()) {
      if (mntr.status().code() == absl::StatusCode::kUnimplemented) {
        return mntr.status();
      }
      if (error.ok()) error = mntr.status();
      continue;
    }
    absl::StatusOr<int64_t> bytes =
        MntrValue(*mntr, "zk_approximate_data_size");
    if (!bytes.ok()) return bytes.status();
    // Paths and data only: ZooKeeper's own overhead per node is not counted.
    return ServerMemory{*bytes, "mntr zk_approximate_data_size"};
  }
  return error;
}

absl::Status ZkBackend::ForceUnlock(absl::string_view name) {
  const std::string what = absl::StrCat("force unlock of lock '", name, "'");
  absl::StatusOr<Kept> kept = FindKept(name);
  if (!kept.ok()) return kept.status();
  for (const std::string& path : kept->paths) {
    // Its watchers (the first waiter) wake and take the lock.
    Reply r = session_->Delete(path, -1).Wait(writer_->CallDeadline());
    if (r.rc != ZOK && r.rc != ZNONODE) {
      return session_->ErrorStatus(r.rc, what);
    }
  }
  // While it was kept, the first node of the queue is a waiter: it takes
  // the lock now, and is no hold to remove.
  if (kept->live.has_value()) return absl::OkStatus();
  // The writer and every reader (C23): each one's next renewal finds its
  // node gone.
  return ForceUnlockHolding(ObjectKind::kLock, name, std::nullopt);
}

absl::Status ZkBackend::ForceUnlockIfToken(absl::string_view name,
                                           uint64_t fencing_token) {
  // Kept after its release: the kept node carries the released hold's
  // token, as Inspect reports it; the queue's first node is a waiter.
  absl::StatusOr<Kept> kept = FindKept(name);
  if (!kept.ok()) return kept.status();
  if (kept->live.has_value()) {
    if (kept->live->fencing_token != fencing_token) {
      return TokenMismatchError(name, fencing_token);
    }
    return ForceUnlock(name);
  }
  return DeleteHolder(ObjectKind::kLock, name, fencing_token);
}

absl::Status ZkBackend::DeleteHolder(ObjectKind kind, absl::string_view name,
                                     std::optional<uint64_t> fencing_token) {
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name, kind);
  if (!holder.ok()) return holder.status();
  if (!fencing_token.has_value() && !holder->has_value()) {
    return absl::OkStatus();
  }
  // A lock's reader is not the holder Inspect shows: ForceUnlockObject
  // takes a reader's token.
  if (fencing_token.has_value() &&
      (!WriterHolds(*holder) ||
       static_cast<uint64_t>((*holder)->stat.czxid) != *fencing_token)) {
    return TokenMismatchError(name, *fencing_token);
  }
  // Deleting the holder node wakes its successor through its watch; the
  // former holder's next renewal or release finds the node gone (C12). The
  // token is the node's czxid and its sequential path is never reused:
  // deleting that path removes that hold and no later one. ZNONODE with a
  // token: released or force-unlocked since, so not held with the token.
  Reply r = session_->Delete((*holder)->path, -1).Wait(writer_->CallDeadline());
  if (r.rc == ZOK) return absl::OkStatus();
  if (r.rc == ZNONODE) {
    return fencing_token.has_value() ? TokenMismatchError(name, *fencing_token)
                                     : absl::OkStatus();
  }
  std::string what =
      absl::StrCat("force unlock of ", ObjectKindName(kind), " '", name, "'");
  if (fencing_token.has_value())
    absl::StrAppend(&what, " on token ", *fencing_token);
  return session_->ErrorStatus(r.rc, what);
}

}  // namespace dlock::zk
