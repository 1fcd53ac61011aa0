// The zk:// backend's semaphore queue (C22): the lock's queue recipe with
// admission instead of "first takes it". Each node's name carries its
// permits and N (zk_layout.h), its data "w" or "h <slots>". A node is
// admitted when the permits of the nodes ahead plus its own fit in N and
// its predecessor is admitted already, so admissions happen one after
// another in queue order and each grant's token (the node's czxid) exceeds
// every earlier grant's. Validated with kazoo
// (docs/design/validation/zookeeper_primitives.py).
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"
#include "zk_queue.h"

namespace dlock::zk {
namespace {

int64_t PermitsAhead(const std::vector<std::string>& names) {
  int64_t sum = 0;
  for (const std::string& name : names) {
    if (std::optional<PermitsAsked> asked = PermitsOf(name)) {
      sum += asked->permits;
    }
  }
  return sum;
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
  // The nodes ahead, read in one round trip; the predecessor's read sets
  // the watch a waiter behind it sleeps on.
  std::vector<std::string> paths;
  std::vector<Call> calls;
  for (size_t i = 0; i < names.size(); ++i) {
    paths.push_back(absl::StrCat(t.parent, "/", names[i]));
    calls.push_back(session_.Get(paths.back(), i + 1 == names.size()));
  }
  std::vector<Reply> ahead;
  for (Call& call : calls) {
    ahead.push_back(call.Wait(writer_.CallDeadline()));
    if (ahead.back().rc == ZNONODE) return std::nullopt;  // changed: look again
    if (ahead.back().rc != ZOK) {
      return ReconnectOrFail(
          t, ahead.back().rc,
          absl::StrCat("reading the queue of semaphore '", t.call.name, "'"));
    }
  }
  if (Next again = ReenterOwnGrant(t, paths, ahead)) return again;
  const bool after_admitted =
      ahead.empty() ||
      AdmittedSlots(Parse(ahead.back().data).value_or(NodeData{}).value)
          .has_value();
  if (after_admitted && PermitsAhead(names) + t.call.shape.permits <= limit) {
    return Admit(t, ahead);
  }
  t.waited = true;
  if (after_admitted) return WaitForRoom(t, waiter, paths, ahead);
  // Behind a waiter: until it is admitted or leaves (its data watch), or
  // its lease ends, which only a waiter that stopped lets happen.
  const int64_t end = LeaseEnd(ahead.back());
  if (DeleteIfOver(t, paths.back(), ahead.back(), end) != Over::kNo) {
    return std::nullopt;
  }
  if (writer_.Now() >= t.call.deadline) {
    return Fail(t, HeldByAnother(t.call.name, ObjectKind::kSemaphore));
  }
  return Sleep(t, waiter, end);
}

LockQueue::Next LockQueue::Admit(Turn& t, const std::vector<Reply>& ahead) {
  std::vector<bool> taken(t.call.shape.limit, false);
  for (const Reply& read : ahead) {
    std::optional<NodeData> data = Parse(read.data);
    if (!data.has_value()) continue;
    for (int64_t slot :
         AdmittedSlots(data->value).value_or(std::vector<int64_t>{})) {
      if (slot >= 0 && slot < t.call.shape.limit) taken[slot] = true;
    }
  }
  std::vector<int64_t> slots;
  for (int64_t slot = 0;
       slot < t.call.shape.limit &&
       static_cast<int64_t>(slots.size()) < t.call.shape.permits;
       ++slot) {
    if (!taken[slot]) slots.push_back(slot);
  }
  // The admission write starts the lease (C2) and is what a successor
  // waits to see.
  const int rc =
      writer_.Touch(t.own, t.data.lease_ms, session_.EstimatedServerNowMs(),
                    AdmittedValue(slots));
  if (rc == ZNONODE) return std::nullopt;  // removed meanwhile: queue again
  if (rc != ZOK) {
    return Fail(t, session_.ErrorStatus(
                       rc, absl::StrCat("admitting a holder of semaphore '",
                                        t.call.name, "'")));
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
