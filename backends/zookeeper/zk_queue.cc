#include "zk_queue.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"

namespace dlock::zk {
namespace {

std::string PathOf(const std::string& parent, absl::string_view child) {
  return absl::StrCat(parent, "/", child);
}

}  // namespace

absl::Status HeldByAnother(absl::string_view name, ObjectKind kind) {
  return absl::DeadlineExceededError(absl::StrCat(
      ObjectKindName(kind), " '", name, "' is held by another owner"));
}

absl::StatusOr<Grant> LockQueue::Acquire(const AcquireCall& call,
                                         const std::string& parent) {
  const int64_t lease_ms = LeaseMillis(call.lease);
  Turn t{.call = call,
         .parent = parent,
         .data = NodeData{.owner = std::string(call.owner),
                          .holds = 1,
                          .lease_ms = lease_ms,
                          .kept_ms = lease_ms,
                          .since_ms = 0,
                          .value = ValueOf(call)},
         .lease = absl::Milliseconds(lease_ms),
         .token_owner = call.owner_kind == OwnerKind::kToken};
  const HoldMode mode = call.shape.mode;
  if (mode == HoldMode::kPermits) {
    t.data.value = WaitingValue();
    t.tag = PermitsTag(
        PermitsAsked{.permits = call.shape.permits, .limit = call.shape.limit});
  } else if (mode == HoldMode::kShared) {
    t.tag = std::string(kReadTag);
  }
  if (absl::Status s = CreateOwnNode(t); !s.ok()) return s;
  t.next_refresh = writer_.Now() + t.lease / 3;
  switch (mode) {
    case HoldMode::kPermits:
      return WaitAdmission(t);
    case HoldMode::kShared:
      return WaitRead(t);
    case HoldMode::kExclusive:
      break;
  }
  return WaitTurn(t);
}

absl::StatusOr<Grant> LockQueue::WaitTurn(Turn& t) {
  while (true) {
    std::optional<std::vector<std::string>> children;
    if (Next end = NextListing(t, /*watch=*/false, children)) {
      return *std::move(end);
    }
    if (!children.has_value()) continue;  // reconnected: list again
    QueueView view =
        LookAtQueue(*std::move(children), t.own.name, t.foreign_kept);
    // Our node lives on its session: once that ended, the node is gone.
    if (session_.generation() != t.own.generation) {
      view.position = QueueView::Position::kGone;
    }
    Next next;
    switch (view.position) {
      case QueueView::Position::kGone:
        next = Requeue(t);
        break;
      case QueueView::Position::kKept:
        next = WaitOutKept(t, view.kept);
        break;
      case QueueView::Position::kFirst:
        next = Take(t);
        break;
      case QueueView::Position::kBehind:
        next = WaitBehind(t, view);
        break;
    }
    if (next) return *std::move(next);
  }
}

LockQueue::Next LockQueue::NextListing(
    Turn& t, bool watch, std::optional<std::vector<std::string>>& children) {
  if (t.call.cancel.IsCancelled()) {
    return Fail(t, WaitCancelledError(t.call.name));
  }
  if (!t.children.has_value()) {
    if (Next end = List(t, watch)) return end;
  }
  children = std::move(t.children);
  t.children.reset();
  return std::nullopt;
}

LockQueue::Next LockQueue::List(Turn& t, bool watch) {
  Reply list = session_.Children(t.parent, watch).Wait(writer_.CallDeadline());
  t.watched = watch && list.rc == ZOK;
  if (list.rc == ZOK) {
    t.children = std::move(list.children);
  } else if (list.rc == ZNONODE) {
    t.children.emplace();  // our node is gone with its parent
  } else {
    return ReconnectOrFail(
        t, list.rc,
        absl::StrCat("listing the queue of lock '", t.call.name, "'"));
  }
  return std::nullopt;
}

LockQueue::Next LockQueue::Requeue(Turn& t) {
  // Our node is gone: the session expired, or it was removed as stale or by
  // a force unlock while we waited. Queue up again.
  if (writer_.Now() >= t.call.deadline) return HeldByAnother(t.call.name);
  if (absl::Status s = CreateOwnNode(t); !s.ok()) return s;
  t.waited = true;
  return std::nullopt;
}

LockQueue::Next LockQueue::Take(Turn& t) {
  if (t.waited) {
    // The lease starts now, not when we queued (C2).
    const int rc =
        writer_.Touch(t.own, t.data.lease_ms, session_.EstimatedServerNowMs());
    if (rc == ZNONODE) return std::nullopt;  // removed meanwhile: queue again
    if (rc != ZOK) {
      return Fail(t, session_.ErrorStatus(
                         rc, absl::StrCat("taking lock '", t.call.name, "'")));
    }
  }
  return Granted(t);
}

LockQueue::Next LockQueue::Granted(Turn& t) {
  const LocalHold hold{.path = t.own.path,
                       .data = t.own.data,
                       .version = t.own.stat.version,
                       .czxid = static_cast<uint64_t>(t.own.stat.czxid),
                       .mtime = t.own.stat.mtime,
                       .generation = t.own.generation,
                       .confirmed = t.own.written};
  // More than one hold when the owner token's other client re-entered our
  // node before we saw it first (C6).
  return absl::StatusOr<Grant>(GrantOf(t.call, hold));
}

LockQueue::Next LockQueue::WaitOutKept(Turn& t,
                                       const std::vector<std::string>& kept) {
  // First, but not the holder while the lock is kept: deletes the kept-lock
  // nodes that are over, else waits for the first live one to end or go
  // (its watch), the deadline, the fallback poll or our node's refresh;
  // then looks at the queue again.
  t.waited = true;
  for (const std::string& child : kept) {
    bool look_again = false;
    if (Next end = WaitOutOneKept(t, child, look_again)) return end;
    if (look_again) break;
  }
  return std::nullopt;
}

LockQueue::Next LockQueue::WaitOutOneKept(Turn& t, const std::string& child,
                                          bool& look_again) {
  const std::string path = PathOf(t.parent, child);
  // Registered before the watch is set, so that a delete in between (a
  // force unlock) is not missed.
  WakeupHub::Waiter waiter(hub_, path);
  Reply got = session_.Get(path, /*watch=*/true).Wait(writer_.CallDeadline());
  if (got.rc == ZNONODE) return std::nullopt;  // the next one
  look_again = true;
  if (got.rc != ZOK) {
    return ReconnectOrFail(
        t, got.rc, absl::StrCat("reading the kept lock '", t.call.name, "'"));
  }
  std::optional<int64_t> end = KeptEnd(got);
  if (!end.has_value()) {  // not a kept-lock node of ours
    t.foreign_kept.push_back(child);
    look_again = false;
    return std::nullopt;
  }
  switch (DeleteIfOver(t, path, got, *end)) {
    case Over::kDeleted:
      look_again = false;  // the next one
      return std::nullopt;
    case Over::kOwnNodeGone:
      return std::nullopt;
    case Over::kNo:
      break;
  }
  if (writer_.Now() >= t.call.deadline) {
    return Fail(t, absl::DeadlineExceededError(
                       absl::StrCat("lock '", t.call.name,
                                    "' is kept after its release by nobody")));
  }
  return Sleep(t, waiter, *end);
}

LockQueue::Next LockQueue::WaitBehind(Turn& t, const QueueView& view) {
  // Behind another node, even if it goes before we sleep (the predecessor is
  // gone when we read it): by the time we see our node first, it may have
  // been first for a while, and another client of the same owner token may
  // have re-entered it (C6).
  t.waited = true;
  if (t.token_owner && !t.checked_holder && view.kept.empty()) {
    // An explicit owner token may hold the lock through another client.
    t.checked_holder = true;
    if (Next again =
            MaybeReenterHolder(t.call, PathOf(t.parent, view.holder), t.own)) {
      return again;
    }
    if (Next refused = RefuseUpgrade(t, view.reads_ahead)) return refused;
  }
  const std::string predecessor = PathOf(t.parent, view.predecessor);
  // Registered before the watch is set, so that a delete in between is not
  // missed.
  WakeupHub::Waiter waiter(hub_, predecessor);
  Reply pred =
      session_.Get(predecessor, /*watch=*/true).Wait(writer_.CallDeadline());
  if (pred.rc == ZNONODE) return std::nullopt;
  if (pred.rc != ZOK) {
    return ReconnectOrFail(
        t, pred.rc,
        absl::StrCat("watching the queue of lock '", t.call.name, "'"));
  }
  if (Next again = AdoptOwnHolder(t, view, predecessor, pred)) return again;
  const int64_t pred_end = LeaseEnd(pred);
  if (DeleteIfOver(t, predecessor, pred, pred_end) != Over::kNo) {
    return std::nullopt;  // deleted, or our node is gone: look again
  }
  if (writer_.Now() >= t.call.deadline) {
    return Fail(t, HeldByAnother(t.call.name));
  }
  return Sleep(t, waiter, pred_end);
}

LockQueue::Next LockQueue::AdoptOwnHolder(Turn& t, const QueueView& view,
                                          const std::string& predecessor,
                                          const Reply& read) {
  std::optional<NodeData> data = Parse(read.data);
  // The holder is this very owner, yet the core has no hold of it: an
  // acquisition of ours whose grant never reached the caller (C21). What
  // the backend counts for the owner is the owner's, as on every backend:
  // re-entered, not waited out. (A node we are deleting, of a hold given up
  // or lost, is waited out: a fresh hold gets a fresh token, C8.)
  if (data.has_value() && data->owner == t.call.owner && !t.token_owner &&
      t.call.held == nullptr && view.kept.empty() && view.next_in_line &&
      !janitor_.Deleting(predecessor)) {
    return ReenterHolder(t.call, predecessor, read, t.own);
  }
  return std::nullopt;
}

LockQueue::Over LockQueue::DeleteIfOver(Turn& t, const std::string& path,
                                        const Reply& read, int64_t end) {
  if (end > session_.EstimatedServerNowMs()) return Over::kNo;
  // Over, it seems. Decided on ZooKeeper's clock: our own write stamps its
  // time, and only a node over by then is deleted, at the version read, so
  // that one renewed meanwhile stays (C2, C3).
  const int rc = writer_.Touch(t.own, t.data.lease_ms);
  t.next_refresh = writer_.Now() + t.lease / 3;
  if (rc == ZOK && end <= t.own.stat.mtime) {
    session_.Delete(path, read.stat.version).Wait(writer_.CallDeadline());
    return Over::kDeleted;
  }
  return rc == ZNONODE ? Over::kOwnNodeGone : Over::kNo;
}

LockQueue::Next LockQueue::Sleep(Turn& t, WakeupHub::Waiter& waiter,
                                 int64_t until_ms) {
  const MonoTime now = writer_.Now();
  MonoTime wake = std::min(
      {t.call.deadline, now + settings_.fallback_poll, t.next_refresh});
  if (until_ms != std::numeric_limits<int64_t>::max()) {
    const int64_t left = until_ms - session_.EstimatedServerNowMs();
    wake = std::min(wake,
                    now + absl::Milliseconds(std::max<int64_t>(left, 0) + 1));
  }
  waiter.Wait(wake, t.call.cancel);
  t.waited = true;
  return RefreshIfDue(t);
}

LockQueue::Next LockQueue::RefreshIfDue(Turn& t) {
  if (writer_.Now() < t.next_refresh) return std::nullopt;
  // Waiting nodes carry a lease too, so that a waiter that stopped (but whose
  // session lives) cannot block the queue forever.
  const int rc = writer_.Touch(t.own, t.data.lease_ms);
  t.next_refresh = writer_.Now() + t.lease / 3;
  if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION &&
      !NodeWriter::IsConnectionError(rc)) {
    return Fail(t, session_.ErrorStatus(
                       rc, absl::StrCat("refreshing a waiter of lock '",
                                        t.call.name, "'")));
  }
  return std::nullopt;
}

LockQueue::Next LockQueue::ReconnectOrFail(Turn& t, int rc,
                                           absl::string_view what) {
  const MonoTime now = writer_.Now();
  if (NodeWriter::IsConnectionError(rc) && now < t.call.deadline &&
      writer_.Reconnected(
          std::min(t.call.deadline, now + session_.call_timeout()))) {
    return std::nullopt;
  }
  return Fail(t, session_.ErrorStatus(rc, what));
}

LockQueue::Next LockQueue::Fail(Turn& t, absl::Status status) {
  janitor_.Abandon(t.own);
  return absl::StatusOr<Grant>(std::move(status));
}

absl::Status LockQueue::CreateOwnNode(Turn& t) {
  // A unique prefix per attempt (client id, this backend's random instance
  // and a counter) lets us find the node again when the reply to its create
  // is lost (Curator's protection), and never another client's node.
  const std::string prefix = absl::StrCat(
      settings_.node_prefix, attempts_.fetch_add(1), "-", t.tag, "lock-");
  const std::string payload = Serialize(t.data);
  // A reply that did not come within the operation timeout does not say
  // whether the connection still works; retries stop at the caller's
  // deadline, or one operation timeout from now for a single attempt.
  const MonoTime give_up = std::max(t.call.deadline, writer_.CallDeadline());
  const std::string creating =
      absl::StrCat("creating a node for lock '", t.call.name, "'");
  for (int attempt = 0; attempt < 5; ++attempt) {
    const MonoTime deadline = writer_.CallDeadline();
    // Pipelined: ZooKeeper answers one session's requests in order, so the
    // listing includes our node and costs no extra round trip.
    Call created = session_.Create(PathOf(t.parent, prefix), payload,
                                   ZOO_EPHEMERAL_SEQUENTIAL);
    Call listed = session_.Children(t.parent);
    Reply create = created.Wait(deadline);
    Reply list = listed.Wait(deadline);
    if (create.rc == ZOK) {
      t.own = OwnNode{.path = create.path,
                      .name = create.path.substr(create.path.rfind('/') + 1),
                      .data = t.data,
                      .stat = create.stat,
                      .generation = create.generation,
                      .written = created.sent()};
      session_.NoteServerTime(create.stat.mtime, writer_.Now());
      if (list.rc == ZOK) t.children = std::move(list.children);
      t.watched = false;
      return absl::OkStatus();
    }
    if (create.rc == ZNONODE) {
      if (absl::Status s = EnsureParents(t.parent, deadline); !s.ok()) return s;
      continue;
    }
    if (!NodeWriter::IsConnectionError(create.rc)) {
      return session_.ErrorStatus(create.rc, creating);
    }
    // The create may have happened. Look for it once we are back; if we
    // cannot, the janitor removes it so it never holds the lock.
    const MonoTime now = writer_.Now();
    const MonoTime until =
        std::min(std::max(t.call.deadline, now), now + session_.call_timeout());
    if (now >= give_up || !writer_.Reconnected(until)) {
      janitor_.Queue(PendingDelete{
          .path = t.parent, .prefix = prefix, .owner = t.data.owner});
      return session_.ErrorStatus(create.rc, creating);
    }
    absl::StatusOr<bool> found = FindLostCreate(t, prefix, create.generation);
    if (!found.ok() || *found) return found.status();
  }
  return absl::UnavailableError(
      absl::StrCat("could not create a node for lock '", t.call.name,
                   "' on ZooKeeper ", session_.endpoint(), " after retries"));
}

absl::StatusOr<bool> LockQueue::FindLostCreate(Turn& t,
                                               const std::string& prefix,
                                               uint64_t generation) {
  Reply again = session_.Children(t.parent).Wait(writer_.CallDeadline());
  if (again.rc != ZOK) return false;
  for (const std::string& child : again.children) {
    if (!absl::StartsWith(child, prefix)) continue;
    t.own = OwnNode{.path = PathOf(t.parent, child),
                    .name = child,
                    .data = t.data,
                    .generation = generation};
    if (writer_.ReloadOwn(t.own, writer_.CallDeadline()) != ZOK) return false;
    // Its mtime is the create's, which may be a lease ago by now: on
    // ZooKeeper's clock its lease may be over, and a successor may remove
    // it as expired. Written again, it starts a fresh lease, and the hold
    // counts from that write (C19).
    const int rc = writer_.Touch(t.own, t.data.lease_ms);
    if (rc == ZNONODE) return false;  // removed meanwhile: create again
    if (rc != ZOK) {
      janitor_.Abandon(t.own);
      return session_.ErrorStatus(
          rc, absl::StrCat("adopting a node for lock '", t.call.name, "'"));
    }
    t.children = std::move(again.children);
    t.watched = false;
    return true;
  }
  return false;
}

absl::Status LockQueue::EnsureParents(const std::string& parent,
                                      MonoTime deadline) {
  // The lock-name node and the namespace node are containers: ZooKeeper
  // deletes them once their last child is gone, so names never accumulate.
  auto create = [&](const std::string& path, int mode, bool open_acl) {
    Reply r = session_.Create(path, "", mode, open_acl).Wait(deadline);
    return r.rc == ZNODEEXISTS ? ZOK : r.rc;
  };
  int rc = create(parent, ZOO_CONTAINER, false);
  if (rc == ZNONODE) {
    for (const std::string& path : settings_.ancestors) {
      rc = create(path, ZOO_PERSISTENT, true);
      if (rc != ZOK) break;
    }
    if (rc == ZOK) rc = create(settings_.base, ZOO_CONTAINER, false);
    if (rc == ZOK) rc = create(parent, ZOO_CONTAINER, false);
  }
  if (rc == ZOK) return absl::OkStatus();
  return session_.ErrorStatus(rc, absl::StrCat("creating ", parent));
}

LockQueue::Next LockQueue::MaybeReenterHolder(const AcquireCall& call,
                                              const std::string& holder_path,
                                              OwnNode& own) {
  return ReenterHolder(
      call, holder_path,
      session_.Get(holder_path, false).Wait(writer_.CallDeadline()), own);
}

LockQueue::Next LockQueue::ReenterHolder(const AcquireCall& call,
                                         const std::string& holder_path,
                                         const Reply& read, OwnNode& own) {
  if (read.rc != ZOK) return std::nullopt;
  std::optional<NodeData> data = Parse(read.data);
  if (!data.has_value() || data->owner != call.owner ||
      writer_.Expired(*data, read.stat)) {
    return std::nullopt;
  }
  // A node of ours lives on the session we read it on: the server removed
  // the nodes of any earlier one before that session began.
  const bool ours = absl::StartsWith(
      absl::string_view(holder_path).substr(holder_path.rfind('/') + 1),
      settings_.node_prefix);
  LocalHold hold{.path = holder_path,
                 .data = *data,
                 .version = read.stat.version,
                 .czxid = static_cast<uint64_t>(read.stat.czxid),
                 .mtime = read.stat.mtime,
                 .generation = ours ? read.generation : 0,
                 .confirmed = writer_.Now()};  // Write() below sets it
  const absl::Status written = writer_.WriteRecomputed(
      call.name, call.owner, nullptr, hold,
      [&](const LocalHold& now) { return writer_.Reentered(now, call); },
      "re-entry");
  if (IsGone(written)) return std::nullopt;
  janitor_.Abandon(own);
  if (!written.ok()) return absl::StatusOr<Grant>(written);
  return absl::StatusOr<Grant>(GrantOf(call, hold));
}

Grant LockQueue::GrantOf(const AcquireCall& call, const LocalHold& hold) {
  return Grant{
      .fencing_token = TokenOf(hold.data, hold.czxid),
      .hold_count = hold.data.holds,
      .sent = hold.confirmed,
      .record = holds_.NewRecord(call, hold),
      .slots = AdmittedSlots(hold.data.value).value_or(std::vector<int64_t>{})};
}

}  // namespace dlock::zk
