// The zk:// backend's semaphore queue (C22): the lock's queue recipe with
// admission instead of "first takes it". Each node's name carries its
// permits and N (zk_layout.h), its data "w" or "h <slots>". A node is
// admitted when the permits of the nodes ahead plus its own fit in N,
// decided from one read of the queue; it admits the waiters ahead with
// itself in one multi, so admissions still happen in queue order and each
// grant's token (the node's czxid) exceeds every earlier grant's, per slot
// too. Validated with kazoo (docs/design/validation/zookeeper_primitives.py)
// for the one-by-one recipe this replaced (issue 24: a convoy).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"
#include "zk_queue.h"

namespace dlock::zk {
namespace {

// The permits of the nodes at `paths`, from their names.
int64_t PermitsAhead(const std::vector<std::string>& paths) {
  int64_t sum = 0;
  for (const std::string& path : paths) {
    if (std::optional<PermitsAsked> asked =
            PermitsOf(absl::string_view(path).substr(path.rfind('/') + 1))) {
      sum += asked->permits;
    }
  }
  return sum;
}

// What the reads of the nodes ahead of ours say.
struct Ahead {
  bool last_admitted = true;  // the node right ahead (true: none)
  bool all_admitted = true;
  // A node whose data is not a dlock node's (another program's, or
  // corrupted): we cannot write it into our admission, nor tell whether it
  // is admitted or when its lease ends.
  bool foreign = false;
};

Ahead LookAhead(const std::vector<Reply>& ahead) {
  Ahead a;
  for (const Reply& read : ahead) {
    std::optional<NodeData> data = Parse(read.data);
    a.foreign = a.foreign || !data.has_value();
    a.last_admitted =
        data.has_value() && AdmittedSlots(data->value).has_value();
    a.all_admitted = a.all_admitted && a.last_admitted;
  }
  return a;
}

}  // namespace

absl::StatusOr<Grant> LockQueue::WaitAdmission(Turn& t) {
  while (true) {
    // Registered before the listing and the reads whose watches it sleeps
    // on: the session's watcher wakes the parent's path for a child more
    // or less and for the data of the nodes in its queue.
    WakeupHub::Waiter waiter(hub_, t.parent);
    std::optional<std::vector<std::string>> children;
    if (Next end = NextListing(t, /*watch=*/true, children)) {
      return *std::move(end);
    }
    if (!children.has_value()) continue;  // reconnected: list again
    if (Next end = Admission(t, waiter, *std::move(children))) {
      return *std::move(end);
    }
  }
}

LockQueue::Next LockQueue::Admission(Turn& t, WakeupHub::Waiter& waiter,
                                     std::vector<std::string> children) {
  const int64_t limit = t.call.shape.limit;
  for (const std::string& child : children) {
    std::optional<PermitsAsked> asked = PermitsOf(child);
    if (asked.has_value() && asked->limit != limit) {
      return Fail(t, LimitMismatchError(t.call.name, asked->limit, limit));
    }
  }
  const std::vector<std::string> queue = SortedQueue(std::move(children));
  auto mine = std::find(queue.begin(), queue.end(), t.own.name);
  if (mine == queue.end() || session_.generation() != t.own.generation) {
    return Requeue(t);
  }
  const std::vector<std::string> names(queue.begin(), mine);
  std::vector<std::string> paths;
  for (const std::string& name : names) {
    paths.push_back(absl::StrCat(t.parent, "/", name));
  }
  // A waiter behind a waiter sleeps on its predecessor only (its data
  // watch), registered before the read that sets it.
  std::optional<WakeupHub::Waiter> behind;
  if (!paths.empty()) behind.emplace(hub_, paths.back());
  std::vector<Reply> ahead;
  const std::string predecessor = paths.empty() ? "" : paths.back();
  if (Next end = ReadQueue(t, paths, ahead)) return end;
  if (Next again = ReenterOwnGrant(t, paths, ahead)) return again;
  if (AdmittedSlots(t.own.data.value).has_value()) {
    return AdmittedByAnother(t);
  }
  const Ahead state = LookAhead(ahead);
  // Room for ours behind every node ahead, admitted or not: FIFO, and no
  // waiting for the waiters ahead to admit themselves one by one, unless
  // we cannot write them. A foreign node ahead is waited for as a lock's
  // waiter waits behind one (docs/zookeeper.md): until it goes, on the
  // watches and the fallback poll, up to the deadline.
  if (PermitsAhead(paths) + t.call.shape.permits <= limit &&
      (state.all_admitted || !(t.admit_alone || state.foreign))) {
    return Admit(t, queue, paths, ahead);
  }
  t.waited = true;
  if (state.last_admitted) return WaitForRoom(t, waiter, paths, ahead);
  // Behind a waiter: until it is admitted or leaves (its data watch, set
  // only if it was there), or its lease ends, which only a waiter that
  // stopped lets happen.
  if (paths.back() != predecessor) return std::nullopt;
  const int64_t end = LeaseEnd(ahead.back());
  if (DeleteIfOver(t, paths.back(), ahead.back(), end) != Over::kNo) {
    return std::nullopt;
  }
  if (writer_.Now() >= t.call.deadline) {
    return Fail(t, HeldByAnother(t.call.name, ObjectKind::kSemaphore));
  }
  return Sleep(t, *behind, end);
}

LockQueue::Next LockQueue::ReadQueue(Turn& t, std::vector<std::string>& paths,
                                     std::vector<Reply>& ahead) {
  // The nodes ahead and ours, in one round trip; the predecessor's read
  // sets the watch a waiter behind it sleeps on.
  std::vector<Call> calls;
  for (size_t i = 0; i < paths.size(); ++i) {
    calls.push_back(session_.Get(paths[i], i + 1 == paths.size()));
  }
  // Ours only when the read costs no round trip of its own, or a multi
  // found it changed: a node admitted by another fails our next multi.
  if (paths.empty() && !t.reread_own) return std::nullopt;
  t.reread_own = false;
  Call own = session_.Get(t.own.path, false);
  std::vector<std::string> present;
  for (size_t i = 0; i < calls.size(); ++i) {
    Reply read = calls[i].Wait(writer_.CallDeadline());
    // A node gone (released, given up) counts no more: nodes never come
    // back, so the rest of the listing stands.
    if (read.rc == ZNONODE) continue;
    if (read.rc != ZOK) {
      return ReconnectOrFail(
          t, read.rc,
          absl::StrCat("reading the queue of semaphore '", t.call.name, "'"));
    }
    present.push_back(paths[i]);
    ahead.push_back(std::move(read));
  }
  paths = std::move(present);
  Reply read = own.Wait(writer_.CallDeadline());
  std::optional<NodeData> data = Parse(read.data);
  if (read.rc == ZOK && data.has_value() && data->owner == t.own.data.owner) {
    if (!AdmittedSlots(data->value).has_value()) t.seen_waiting = own.sent();
    t.own.data = *std::move(data);
    t.own.stat = read.stat;
  } else if (read.rc == ZNONODE) {
    return Requeue(t);  // removed (stale, force unlock): queue again
  } else {
    return ReconnectOrFail(
        t, read.rc,
        absl::StrCat("reading our node of semaphore '", t.call.name, "'"));
  }
  return std::nullopt;
}

LockQueue::Next LockQueue::Admit(Turn& t, const std::vector<std::string>& queue,
                                 const std::vector<std::string>& paths,
                                 const std::vector<Reply>& ahead) {
  const int64_t limit = t.call.shape.limit;
  std::vector<bool> taken(limit, false);
  auto lowest_free = [&](int64_t permits) {
    std::vector<int64_t> slots;
    for (int64_t slot = 0;
         slot < limit && static_cast<int64_t>(slots.size()) < permits; ++slot) {
      if (!taken[slot]) slots.push_back(slot);
    }
    for (int64_t slot : slots) taken[slot] = true;
    return slots;
  };
  std::vector<std::optional<NodeData>> data;
  for (const Reply& read : ahead) {
    data.push_back(Parse(read.data));
    if (!data.back().has_value()) continue;
    for (int64_t slot :
         AdmittedSlots(data.back()->value).value_or(std::vector<int64_t>{})) {
      if (slot >= 0 && slot < limit) taken[slot] = true;
    }
  }
  // The waiters ahead first, in queue order, each with the lowest slots
  // left: admitted with ours, they are never admitted after a node behind
  // them, so each slot passes to growing tokens (czxid).
  const int64_t server_now = session_.EstimatedServerNowMs();
  std::vector<Session::VersionedWrite> writes;
  for (size_t i = 0; i < ahead.size(); ++i) {
    if (!data[i].has_value()) {
      t.admit_alone = true;  // not a node we can write: wait for it
      return std::nullopt;
    }
    if (AdmittedSlots(data[i]->value).has_value()) continue;
    NodeData next = *data[i];
    const std::string name = paths[i].substr(paths[i].rfind('/') + 1);
    next.value = AdmittedValue(
        lowest_free(PermitsOf(name).value_or(PermitsAsked{}).permits));
    if (next.since_ms == 0) next.since_ms = server_now;
    writes.push_back({paths[i], Serialize(next), ahead[i].stat.version});
  }
  NodeData next = t.own.data;
  next.lease_ms = std::max(t.data.lease_ms,
                           writer_.RemainingMs(t.own.data, t.own.stat.mtime));
  next.kept_ms = std::max(next.kept_ms, t.data.lease_ms);
  if (next.since_ms == 0) next.since_ms = server_now;
  next.value = AdmittedValue(lowest_free(t.call.shape.permits));
  writes.push_back({t.own.path, Serialize(next), t.own.stat.version});
  return WriteAdmission(t, queue, writes, std::move(next));
}

LockQueue::Next LockQueue::WriteAdmission(
    Turn& t, const std::vector<std::string>& queue,
    const std::vector<Session::VersionedWrite>& writes, NodeData next) {
  // The admission write starts our lease (C2) and is what a successor
  // waits to see.
  Call set = writes.size() == 1 ? session_.Set(writes[0].path, writes[0].data,
                                               writes[0].version)
                                : session_.SetAll(writes);
  Reply r = set.Wait(writer_.CallDeadline());
  if (r.rc == ZOK) {
    t.own.data = std::move(next);
    t.own.stat = r.stat;
    t.own.written = set.sent();
    session_.NoteServerTime(r.stat.mtime, writer_.Now());
    return Granted(t);
  }
  // A node changed or went meanwhile (admitted, ours perhaps, re-entered,
  // released): read the same queue again, no listing needed, since nodes
  // only join behind ours and a node gone reads as gone.
  if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
    t.reread_own = true;
    t.children = queue;
    t.watched = false;
    return std::nullopt;
  }
  if (r.rc == ZNOAUTH && writes.size() > 1) {
    t.admit_alone = true;
    return std::nullopt;
  }
  return ReconnectOrFail(
      t, r.rc,
      absl::StrCat("admitting a holder of semaphore '", t.call.name, "'"));
}

LockQueue::Next LockQueue::AdmittedByAnother(Turn& t) {
  if (writer_.Now() - t.seen_waiting < t.lease / 3) {
    t.own.written = t.seen_waiting;
    return Granted(t);
  }
  const int rc =
      writer_.Touch(t.own, t.data.lease_ms, session_.EstimatedServerNowMs());
  if (rc == ZNONODE) return std::nullopt;  // removed meanwhile: queue again
  if (rc != ZOK) {
    return ReconnectOrFail(
        t, rc,
        absl::StrCat("taking the permits of semaphore '", t.call.name, "'"));
  }
  return Granted(t);
}

LockQueue::Next LockQueue::WaitForRoom(Turn& t, WakeupHub::Waiter& waiter,
                                       const std::vector<std::string>& paths,
                                       const std::vector<Reply>& ahead) {
  // A release frees room through the child watch: only a listing that set
  // one may be slept on.
  if (!t.watched) return std::nullopt;
  int64_t first_end = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < ahead.size(); ++i) {
    const int64_t end = LeaseEnd(ahead[i]);
    switch (DeleteIfOver(t, paths[i], ahead[i], end)) {
      case Over::kDeleted:
      case Over::kOwnNodeGone:
        return std::nullopt;  // look again
      case Over::kNo:
        first_end = std::min(first_end, end);
        break;
    }
  }
  if (writer_.Now() >= t.call.deadline) {
    return Fail(t, HeldByAnother(t.call.name, ObjectKind::kSemaphore));
  }
  return Sleep(t, waiter, first_end);
}

LockQueue::Next LockQueue::ReenterOwnGrant(
    Turn& t, const std::vector<std::string>& paths,
    const std::vector<Reply>& ahead) {
  for (size_t i = 0; i < ahead.size(); ++i) {
    std::optional<NodeData> data = Parse(ahead[i].data);
    if (!data.has_value() || data->owner != t.call.owner ||
        !AdmittedSlots(data->value).has_value() ||
        writer_.Expired(*data, ahead[i].stat)) {
      continue;
    }
    // A thread owner's node that is not being deleted is an acquisition of
    // ours whose grant never reached the core (C21); a token's may be held
    // through another client (C6).
    if (!t.token_owner &&
        (t.call.held != nullptr || janitor_.Deleting(paths[i]))) {
      continue;
    }
    const int64_t held = PermitsOf(paths[i].substr(paths[i].rfind('/') + 1))
                             .value_or(PermitsAsked{})
                             .permits;
    if (held != t.call.shape.permits) {
      return Fail(
          t, PermitsMismatchError(t.call.name, held, t.call.shape.permits));
    }
    return ReenterHolder(t.call, paths[i], ahead[i], t.own);
  }
  return std::nullopt;
}

}  // namespace dlock::zk
