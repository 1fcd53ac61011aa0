// Acquisition: re-entry, the node in the queue, and waiting for our turn.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "zk_backend.h"

namespace dlock::zk {

NodeData ZkBackend::Reentered(const LocalHold& hold,
                              absl::Duration lease) const {
  NodeData next = hold.data;
  const int64_t asked = LeaseMillis(lease);
  next.holds += 1;
  next.kept_ms = std::max(next.kept_ms, asked);
  next.lease_ms = std::max(asked, RemainingMs(hold.data, hold.mtime));
  return next;
}

absl::StatusOr<Grant> ZkBackend::Acquire(const AcquireCall& call) {
  if (ZkHold* held = ZkHold::Of(call.held); held != nullptr) {
    if (std::optional<absl::StatusOr<Grant>> again =
            ReenterKnown(call, *held)) {
      return *std::move(again);
    }
  }
  const std::string parent = ParentOf(call.name);
  NodeData data{.owner = std::string(call.owner),
                .holds = 1,
                .lease_ms = LeaseMillis(call.lease),
                .kept_ms = LeaseMillis(call.lease),
                .since_ms = 0};
  OwnNode own;
  std::optional<std::vector<std::string>> children;
  if (absl::Status s = CreateOwnNode(call, parent, data, own, children);
      !s.ok()) {
    return s;
  }
  return WaitTurn(call, parent, data, own, std::move(children));
}

std::optional<absl::StatusOr<Grant>> ZkBackend::ReenterKnown(
    const AcquireCall& call, ZkHold& held) {
  // Ended, or lost with its session: this is a fresh acquisition.
  if (!held.live()) return std::nullopt;
  absl::MutexLock turn(&held.write_turn());
  LocalHold hold = held.Get();
  if (Now() > hold.confirmed + absl::Milliseconds(hold.data.lease_ms)) {
    // The lease ran out: this is a fresh acquisition, not a re-entry.
    Forget(&held);
    QueueDelete(PendingDelete{.path = hold.path, .version = hold.version});
    return std::nullopt;
  }
  const absl::Status written = WriteRecomputed(
      call.name, call.owner, &held, hold,
      [&](const LocalHold& now) { return Reentered(now, call.lease); },
      "re-entry");
  if (IsGone(written)) return std::nullopt;  // gone: acquire afresh
  if (!written.ok()) return absl::StatusOr<Grant>(written);
  // The record, written in place, stays the hold's. Named again rather than
  // left null: should the core start the hold afresh (its local deadline
  // passed meanwhile), it must keep this record, not none.
  return absl::StatusOr<Grant>(Grant{.fencing_token = hold.czxid,
                                     .hold_count = hold.data.holds,
                                     .sent = hold.confirmed,
                                     .record = held.shared_from_this()});
}

absl::Status ZkBackend::CreateOwnNode(
    const AcquireCall& call, const std::string& parent, const NodeData& data,
    OwnNode& own, std::optional<std::vector<std::string>>& children) {
  // A unique prefix per attempt (client id, this backend's random instance
  // and a counter) lets us find the node again when the reply to its create
  // is lost (Curator's protection), and never another client's node.
  const std::string prefix =
      absl::StrCat(node_prefix_, attempts_.fetch_add(1), "-lock-");
  const std::string payload = Serialize(data);
  // A reply that did not come within the operation timeout does not say
  // whether the connection still works; retries stop at the caller's
  // deadline, or one operation timeout from now for a single attempt.
  const MonoTime give_up =
      std::max(call.deadline, Now() + session_->call_timeout());
  for (int attempt = 0; attempt < 5; ++attempt) {
    const MonoTime deadline = CallDeadline();
    // Pipelined: ZooKeeper answers one session's requests in order, so the
    // listing includes our node and costs no extra round trip.
    Call created = session_->Create(absl::StrCat(parent, "/", prefix), payload,
                                    ZOO_EPHEMERAL_SEQUENTIAL);
    Call listed = session_->Children(parent);
    Reply create = created.Wait(deadline);
    Reply list = listed.Wait(deadline);
    if (create.rc == ZOK) {
      own.path = create.path;
      own.name = own.path.substr(own.path.rfind('/') + 1);
      own.data = data;
      own.stat = create.stat;
      own.generation = create.generation;
      own.written = created.sent();
      session_->NoteServerTime(create.stat.mtime, Now());
      if (list.rc == ZOK) children = std::move(list.children);
      return absl::OkStatus();
    }
    if (create.rc == ZNONODE) {
      if (absl::Status s = EnsureParents(parent, deadline); !s.ok()) return s;
      continue;
    }
    if (!IsConnectionError(create.rc)) {
      return session_->ErrorStatus(
          create.rc,
          absl::StrCat("creating a node for lock '", call.name, "'"));
    }
    // The create may have happened. Look for it once we are back; if we
    // cannot, a background task removes it so it never holds the lock.
    const MonoTime until = std::min(std::max(call.deadline, Now()),
                                    Now() + session_->call_timeout());
    if (Now() >= give_up || !Reconnected(until)) {
      QueueDelete(
          PendingDelete{.path = parent, .prefix = prefix, .owner = data.owner});
      return session_->ErrorStatus(
          create.rc,
          absl::StrCat("creating a node for lock '", call.name, "'"));
    }
    Reply again = session_->Children(parent).Wait(CallDeadline());
    if (again.rc != ZOK) continue;
    for (const std::string& child : again.children) {
      if (!absl::StartsWith(child, prefix)) continue;
      own.path = absl::StrCat(parent, "/", child);
      own.name = child;
      own.data = data;
      own.generation = create.generation;
      if (ReloadOwn(own, CallDeadline()) != ZOK) break;
      // Its mtime is the create's, which may be a lease ago by now: on
      // ZooKeeper's clock its lease may be over, and a successor may remove
      // it as expired. Written again, it starts a fresh lease, and the hold
      // counts from that write (C19).
      const int rc = Touch(own, data.lease_ms);
      if (rc == ZNONODE) break;  // removed meanwhile: create again
      if (rc != ZOK) {
        Abandon(own);
        return session_->ErrorStatus(
            rc, absl::StrCat("adopting a node for lock '", call.name, "'"));
      }
      children = std::move(again.children);
      return absl::OkStatus();
    }
  }
  return absl::UnavailableError(
      absl::StrCat("could not create a node for lock '", call.name,
                   "' on ZooKeeper ", session_->endpoint(), " after retries"));
}

int ZkBackend::Touch(OwnNode& own, int64_t lease_ms,
                     std::optional<int64_t> since_ms) {
  int rc = ZBADVERSION;
  for (int attempt = 0; attempt < kWriteRetries && rc == ZBADVERSION;
       ++attempt) {
    NodeData next = own.data;
    next.lease_ms = std::max(lease_ms, RemainingMs(own.data, own.stat.mtime));
    next.kept_ms = std::max(next.kept_ms, lease_ms);
    if (since_ms.has_value() && next.since_ms == 0) next.since_ms = *since_ms;
    Call set = session_->Set(own.path, Serialize(next), own.stat.version);
    Reply r = set.Wait(CallDeadline());
    rc = r.rc;
    if (rc == ZOK) {
      own.data = std::move(next);
      own.stat = r.stat;
      own.written = set.sent();
      session_->NoteServerTime(r.stat.mtime, Now());
    } else if (rc == ZBADVERSION) {
      // Our version is old: a write of ours whose reply was lost, or, once
      // the node was first, a re-entry by another client of the same owner
      // token (C6). Writing our old data again would undo that re-entry;
      // the next write builds on what the node holds now.
      const int reloaded = ReloadOwn(own, CallDeadline());
      if (reloaded != ZOK) return reloaded;
    }
  }
  return rc;
}

int ZkBackend::ReloadOwn(OwnNode& own, MonoTime deadline) {
  Reply got = session_->Get(own.path, false).Wait(deadline);
  if (got.rc != ZOK) return got.rc;
  std::optional<NodeData> data = Parse(got.data);
  // Owners never change on a node; anything else is not our node.
  if (!data.has_value() || data->owner != own.data.owner) return ZNONODE;
  own.data = *std::move(data);
  own.stat = got.stat;
  return ZOK;
}

int ZkBackend::TakeOwnHoldOff(OwnNode& own, MonoTime deadline) {
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    int rc;
    if (own.data.holds <= 1) {
      rc = session_->Delete(own.path, own.stat.version).Wait(deadline).rc;
    } else {
      // Our hold off, the expiry kept, as a release of one hold does.
      NodeData next = own.data;
      next.holds -= 1;
      next.lease_ms =
          std::max<int64_t>(1, RemainingMs(own.data, own.stat.mtime));
      rc = session_->Set(own.path, Serialize(next), own.stat.version)
               .Wait(deadline)
               .rc;
    }
    if (rc == ZOK || rc == ZNONODE) return ZOK;
    if (rc != ZBADVERSION) return rc;
    rc = ReloadOwn(own, deadline);
    if (rc == ZNONODE) return ZOK;
    if (rc != ZOK) return rc;
  }
  return ZBADVERSION;
}

void ZkBackend::Abandon(OwnNode& own) {
  if (IsConnectionError(TakeOwnHoldOff(own, CallDeadline()))) {
    QueueDelete(PendingDelete{.path = own.path, .owner = own.data.owner});
  }
}

std::optional<absl::StatusOr<Grant>> ZkBackend::MaybeReenterHolder(
    const AcquireCall& call, const std::string& holder_path, OwnNode& own) {
  return ReenterHolder(call, holder_path,
                       session_->Get(holder_path, false).Wait(CallDeadline()),
                       own);
}

std::optional<absl::StatusOr<Grant>> ZkBackend::ReenterHolder(
    const AcquireCall& call, const std::string& holder_path, const Reply& read,
    OwnNode& own) {
  if (read.rc != ZOK) return std::nullopt;
  std::optional<NodeData> data = Parse(read.data);
  if (!data.has_value() || data->owner != call.owner ||
      Expired(*data, read.stat)) {
    return std::nullopt;
  }
  // A node of ours lives on the session we read it on: the server removed
  // the nodes of any earlier one before that session began.
  const bool ours = absl::StartsWith(
      absl::string_view(holder_path).substr(holder_path.rfind('/') + 1),
      node_prefix_);
  LocalHold hold{.path = holder_path,
                 .data = *data,
                 .version = read.stat.version,
                 .czxid = static_cast<uint64_t>(read.stat.czxid),
                 .mtime = read.stat.mtime,
                 .generation = ours ? read.generation : 0,
                 .confirmed = Now()};  // Write() below sets it
  const absl::Status written = WriteRecomputed(
      call.name, call.owner, nullptr, hold,
      [&](const LocalHold& now) { return Reentered(now, call.lease); },
      "re-entry");
  if (IsGone(written)) return std::nullopt;
  Abandon(own);
  if (!written.ok()) return absl::StatusOr<Grant>(written);
  return absl::StatusOr<Grant>(
      Grant{.fencing_token = hold.czxid,
            .hold_count = hold.data.holds,
            .sent = hold.confirmed,
            .record = NewRecord(call.name, call.owner, hold)});
}

absl::StatusOr<Grant> ZkBackend::WaitTurn(
    const AcquireCall& call, const std::string& parent, const NodeData& data,
    OwnNode& own, std::optional<std::vector<std::string>> children) {
  const absl::Duration lease = absl::Milliseconds(data.lease_ms);
  const bool token_owner = call.owner_kind == OwnerKind::kToken;
  // Whether our node was ever behind another: then it becomes first while we
  // are not looking, and must be written again when we see it first.
  bool waited = false;
  bool checked_holder = false;
  std::vector<std::string> foreign_kept;  // see WaitOutKept
  MonoTime next_refresh = Now() + lease / 3;
  auto fail = [&](absl::Status status) {
    Abandon(own);
    return status;
  };
  while (true) {
    if (call.cancel.IsCancelled()) {
      return fail(absl::CancelledError(
          absl::StrCat("wait for lock '", call.name, "' was cancelled")));
    }
    if (!children.has_value()) {
      Reply list = session_->Children(parent).Wait(CallDeadline());
      if (list.rc == ZOK) {
        children = std::move(list.children);
      } else if (list.rc == ZNONODE) {
        children.emplace();
      } else if (IsConnectionError(list.rc) && Now() < call.deadline &&
                 Reconnected(std::min(call.deadline,
                                      Now() + session_->call_timeout()))) {
        continue;
      } else {
        return fail(session_->ErrorStatus(
            list.rc,
            absl::StrCat("listing the queue of lock '", call.name, "'")));
      }
    }
    // Kept-lock nodes keep the lock taken past its last release.
    std::vector<std::string> kept;
    for (const std::string& child : *children) {
      if (IsKeptNode(child) &&
          std::find(foreign_kept.begin(), foreign_kept.end(), child) ==
              foreign_kept.end()) {
        kept.push_back(child);
      }
    }
    std::vector<std::string> queue = SortedQueue(*std::move(children));
    children.reset();
    auto mine = std::find(queue.begin(), queue.end(), own.name);
    if (mine == queue.end() || session_->generation() != own.generation) {
      // Our node is gone: the session expired, or it was removed as stale
      // or by a force unlock while we waited. Queue up again.
      if (Now() >= call.deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("lock '", call.name, "' is held by another owner"));
      }
      if (absl::Status s = CreateOwnNode(call, parent, data, own, children);
          !s.ok()) {
        return s;
      }
      waited = true;
      continue;
    }
    if (mine == queue.begin() && !kept.empty()) {
      // First, but not the holder while the lock is kept.
      waited = true;
      if (absl::Status s = WaitOutKept(call, parent, kept, own, data.lease_ms,
                                       next_refresh, foreign_kept);
          !s.ok()) {
        return fail(s);
      }
      continue;
    }
    if (mine == queue.begin()) {
      if (waited) {
        // The lease starts now, not when we queued (C2).
        const int rc =
            Touch(own, data.lease_ms, session_->EstimatedServerNowMs());
        if (rc == ZNONODE) continue;  // removed meanwhile: queue again
        if (rc != ZOK) {
          return fail(session_->ErrorStatus(
              rc, absl::StrCat("taking lock '", call.name, "'")));
        }
      }
      LocalHold hold{.path = own.path,
                     .data = own.data,
                     .version = own.stat.version,
                     .czxid = static_cast<uint64_t>(own.stat.czxid),
                     .mtime = own.stat.mtime,
                     .generation = own.generation,
                     .confirmed = own.written};
      // More than one hold when the owner token's other client re-entered
      // our node before we saw it first (C6).
      return Grant{.fencing_token = hold.czxid,
                   .hold_count = hold.data.holds,
                   .sent = hold.confirmed,
                   .record = NewRecord(call.name, call.owner, hold)};
    }
    // Behind another node, even if it goes before we sleep (the predecessor
    // is gone when we read it): by the time we see our node first, it may
    // have been first for a while, and another client of the same owner
    // token may have re-entered it (C6).
    waited = true;
    if (token_owner && !checked_holder && kept.empty()) {
      // An explicit owner token may hold the lock through another client.
      checked_holder = true;
      if (auto again = MaybeReenterHolder(
              call, absl::StrCat(parent, "/", queue[0]), own)) {
        return *std::move(again);
      }
    }
    const std::string predecessor = absl::StrCat(parent, "/", *std::prev(mine));
    // Registered before the watch is set, so that a delete in between is
    // not missed.
    WakeupHub::Waiter waiter(hub_, predecessor);
    Reply pred =
        session_->Get(predecessor, /*watch=*/true).Wait(CallDeadline());
    if (pred.rc == ZNONODE) continue;
    if (pred.rc != ZOK) {
      if (IsConnectionError(pred.rc) && Now() < call.deadline &&
          Reconnected(
              std::min(call.deadline, Now() + session_->call_timeout()))) {
        continue;
      }
      return fail(session_->ErrorStatus(
          pred.rc,
          absl::StrCat("watching the queue of lock '", call.name, "'")));
    }
    std::optional<NodeData> pred_data = Parse(pred.data);
    if (pred_data.has_value() && pred_data->owner == call.owner &&
        !token_owner && call.held == nullptr && kept.empty() &&
        mine == std::next(queue.begin()) && !Deleting(predecessor)) {
      // The holder is this very owner, yet the core has no hold of it: an
      // acquisition of ours whose grant never reached the caller (C21).
      // What the backend counts for the owner is the owner's, as on every
      // backend: re-entered, not waited out. (A node we are deleting, of a
      // hold given up or lost, is waited out: a fresh hold gets a fresh
      // token, C8.)
      if (auto again = ReenterHolder(call, predecessor, pred, own)) {
        return *std::move(again);
      }
    }
    int64_t pred_end = INT64_MAX;
    if (pred_data.has_value()) pred_end = pred.stat.mtime + pred_data->lease_ms;
    if (pred_end <= session_->EstimatedServerNowMs()) {
      // The predecessor's lease looks over. Decide on ZooKeeper's clock: our
      // own write stamps its time, and the versioned delete fails if the
      // predecessor renewed meanwhile (C2, C3).
      const int rc = Touch(own, data.lease_ms);
      next_refresh = Now() + lease / 3;
      if (rc == ZOK && pred_end <= own.stat.mtime) {
        session_->Delete(predecessor, pred.stat.version).Wait(CallDeadline());
        continue;
      }
      if (rc == ZNONODE) continue;
    }
    const MonoTime now = Now();
    if (now >= call.deadline) {
      return fail(absl::DeadlineExceededError(
          absl::StrCat("lock '", call.name, "' is held by another owner")));
    }
    MonoTime wake =
        std::min({call.deadline, now + settings_.fallback_poll, next_refresh});
    if (pred_end != INT64_MAX) {
      const int64_t left = pred_end - session_->EstimatedServerNowMs();
      wake = std::min(wake,
                      now + absl::Milliseconds(std::max<int64_t>(left, 0) + 1));
    }
    waiter.Wait(wake, call.cancel);
    waited = true;
    if (Now() >= next_refresh) {
      // Waiting nodes carry a lease too, so that a waiter that stopped (but
      // whose session lives) cannot block the queue forever.
      const int rc = Touch(own, data.lease_ms);
      next_refresh = Now() + lease / 3;
      if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION &&
          !IsConnectionError(rc)) {
        return fail(session_->ErrorStatus(
            rc, absl::StrCat("refreshing a waiter of lock '", call.name, "'")));
      }
    }
  }
}

absl::Status ZkBackend::WaitOutKept(const AcquireCall& call,
                                    const std::string& parent,
                                    const std::vector<std::string>& kept,
                                    OwnNode& own, int64_t lease_ms,
                                    MonoTime& next_refresh,
                                    std::vector<std::string>& foreign) {
  const absl::Duration lease = absl::Milliseconds(lease_ms);
  for (const std::string& child : kept) {
    const std::string path = absl::StrCat(parent, "/", child);
    // Registered before the watch is set, so that a delete in between (a
    // force unlock) is not missed.
    WakeupHub::Waiter waiter(hub_, path);
    Reply got = session_->Get(path, /*watch=*/true).Wait(CallDeadline());
    if (got.rc == ZNONODE) continue;
    if (got.rc != ZOK) {
      if (IsConnectionError(got.rc) && Now() < call.deadline &&
          Reconnected(
              std::min(call.deadline, Now() + session_->call_timeout()))) {
        return absl::OkStatus();
      }
      return session_->ErrorStatus(
          got.rc, absl::StrCat("reading the kept lock '", call.name, "'"));
    }
    std::optional<int64_t> end = KeptEnd(got);
    if (!end.has_value()) {  // not a kept-lock node of ours
      foreign.push_back(child);
      continue;
    }
    if (*end <= session_->EstimatedServerNowMs()) {
      // Over, it seems. Decided on ZooKeeper's clock: our write stamps its
      // time, and only a node over by then is deleted (C2, C3).
      const int rc = Touch(own, lease_ms);
      next_refresh = Now() + lease / 3;
      if (rc == ZNONODE) return absl::OkStatus();  // queue again
      if (rc == ZOK && *end <= own.stat.mtime) {
        session_->Delete(path, got.stat.version).Wait(CallDeadline());
        continue;
      }
    }
    const MonoTime now = Now();
    if (now >= call.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "lock '", call.name, "' is kept after its release by nobody"));
    }
    const int64_t left = *end - session_->EstimatedServerNowMs();
    const MonoTime wake =
        std::min({call.deadline, now + settings_.fallback_poll, next_refresh,
                  now + absl::Milliseconds(std::max<int64_t>(left, 0) + 1)});
    waiter.Wait(wake, call.cancel);
    if (Now() >= next_refresh) {
      // Our node's lease, as a waiter's (WaitTurn).
      const int rc = Touch(own, lease_ms);
      next_refresh = Now() + lease / 3;
      if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION &&
          !IsConnectionError(rc)) {
        return session_->ErrorStatus(
            rc, absl::StrCat("refreshing a waiter of lock '", call.name, "'"));
      }
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace dlock::zk
