// The zk:// backend's readers (C23), Curator's InterProcessReadWriteLock
// rules in the lock's own queue: read nodes end in "-read-lock-<seq>" and
// store their owner as "r:<owner>" (zk_layout.h). A reader holds when no
// write node other than its owner's own is ahead of it, so a writer waits
// exactly for the nodes queued before it (FIFO: later readers never pass
// it), and a writer's own read shares its lock with the writer's token.
// Validated with kazoo (docs/design/validation/zookeeper_primitives.py).
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"
#include "zk_queue.h"

namespace dlock::zk {

absl::StatusOr<Grant> LockQueue::WaitRead(Turn& t) {
  while (true) {
    // Registered before the reads whose watches it sleeps on (the session's
    // watcher wakes the parent's path for its queue's nodes too).
    WakeupHub::Waiter waiter(hub_, t.parent);
    std::optional<std::vector<std::string>> listed;
    if (Next end = NextListing(t, /*watch=*/false, listed)) {
      return *std::move(end);
    }
    if (!listed.has_value()) continue;  // reconnected: list again
    std::vector<std::string> children = *std::move(listed);
    QueueView view = LookAtQueue(children, t.own.name, t.foreign_kept);
    if (session_.generation() != t.own.generation) {
      view.position = QueueView::Position::kGone;
    }
    Next next;
    if (view.position == QueueView::Position::kGone) {
      next = Requeue(t);
    } else if (!view.kept.empty()) {
      next = WaitOutKept(t, view.kept);  // a kept lock keeps readers out too
    } else {
      next = ReadTurn(t, waiter, SortedQueue(std::move(children)));
    }
    if (next) return *std::move(next);
  }
}

LockQueue::Next LockQueue::ReadTurn(Turn& t, WakeupHub::Waiter& waiter,
                                    const std::vector<std::string>& queue) {
  std::vector<std::string> paths;
  std::vector<Call> calls;
  for (const std::string& name : queue) {
    if (name == t.own.name) break;
    if (IsReadNode(name)) continue;
    paths.push_back(absl::StrCat(t.parent, "/", name));
    calls.push_back(session_.Get(paths.back(), /*watch=*/true));
  }
  const absl::string_view owner = OwnerOfReader(t.call.owner);
  std::optional<uint64_t> own_writer;
  std::optional<Reply> blocking;
  size_t blocking_at = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    Reply read = calls[i].Wait(writer_.CallDeadline());
    if (read.rc == ZNONODE) return std::nullopt;  // changed: look again
    if (read.rc != ZOK) {
      return ReconnectOrFail(
          t, read.rc,
          absl::StrCat("reading the queue of lock '", t.call.name, "'"));
    }
    std::optional<NodeData> data = Parse(read.data);
    if (data.has_value() && data->owner == owner) {
      if (!own_writer) own_writer = static_cast<uint64_t>(read.stat.czxid);
      continue;
    }
    blocking = std::move(read);
    blocking_at = i;
  }
  if (!blocking.has_value()) {
    if (!own_writer.has_value()) return Take(t);
    // The writer's own read: it carries the writer's token, and the write
    // starts its lease.
    const int rc =
        writer_.Touch(t.own, t.data.lease_ms, session_.EstimatedServerNowMs(),
                      absl::StrCat(*own_writer));
    if (rc == ZNONODE) return std::nullopt;  // removed meanwhile: queue again
    if (rc != ZOK) {
      return Fail(t, session_.ErrorStatus(
                         rc, absl::StrCat("reading lock '", t.call.name, "'")));
    }
    return Granted(t);
  }
  t.waited = true;
  const int64_t end = LeaseEnd(*blocking);
  if (DeleteIfOver(t, paths[blocking_at], *blocking, end) != Over::kNo) {
    return std::nullopt;
  }
  if (writer_.Now() >= t.call.deadline) {
    return Fail(t, HeldByAnother(t.call.name));
  }
  return Sleep(t, waiter, end);
}

LockQueue::Next LockQueue::RefuseUpgrade(
    Turn& t, const std::vector<std::string>& reads) {
  std::vector<Call> calls;
  for (const std::string& name : reads) {
    calls.push_back(session_.Get(absl::StrCat(t.parent, "/", name), false));
  }
  const std::string reader = ReaderOwner(t.call.owner);
  for (Call& call : calls) {
    Reply read = call.Wait(writer_.CallDeadline());
    if (read.rc != ZOK) continue;  // gone, or looked at again later
    std::optional<NodeData> data = Parse(read.data);
    if (data.has_value() && data->owner == reader &&
        !writer_.Expired(*data, read.stat)) {
      return Fail(t, UpgradeRefusedError(t.call.name));
    }
  }
  return std::nullopt;
}

}  // namespace dlock::zk
