// Release and renewal of the zk:// backend: versioned writes and deletes of
// the holder node, and what a reply lost with the connection leaves open.
#include <algorithm>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/errors.h"
#include "zk_backend.h"

namespace dlock::zk {
namespace {

absl::Status LeaseRanOut(absl::string_view name, absl::string_view what) {
  return LostError(name, absl::StrCat("its lease ran out before the ", what));
}

// The watchdog's batch holds the write turns of the records it renews while
// its writes are in flight (ZkHold::write_turn()). Outside the analysis: the
// turns are taken in a loop and let go together.
bool TakeTurn(ZkHold& record,
              std::vector<absl::Mutex*>& taken) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!record.write_turn().TryLock()) return false;
  taken.push_back(&record.write_turn());
  return true;
}

void LetGo(std::vector<absl::Mutex*>& taken) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (absl::Mutex* turn : taken) turn->Unlock();
  taken.clear();
}

}  // namespace

absl::Status ZkBackend::Write(absl::string_view name, absl::string_view owner,
                              ZkHold* record, LocalHold& hold,
                              const NodeData& next, absl::string_view what) {
  if (!Connected()) {
    return session_->ErrorStatus(ZCONNECTIONLOSS,
                                 absl::StrCat(what, " of lock '", name, "'"));
  }
  const std::string payload = Serialize(next);
  Call set = session_->Set(hold.path, payload, hold.version);
  Reply r = set.Wait(CallDeadline());
  if (IsConnectionError(r.rc) &&
      Reconnected(Now() +
                  std::min(session_->call_timeout(), absl::Seconds(3)))) {
    // Sent, reply lost: it happened iff the node holds exactly our write.
    Reply check = session_->Get(hold.path, false).Wait(CallDeadline());
    if (check.rc == ZOK && check.stat.version == hold.version + 1 &&
        check.data == payload) {
      r = check;
    }
  }
  switch (r.rc) {
    case ZOK: {
      hold.data = next;
      hold.version = r.stat.version;
      hold.mtime = r.stat.mtime;
      hold.confirmed = set.sent();
      session_->NoteServerTime(r.stat.mtime, Now());
      if (record != nullptr) record->Wrote(hold);
      return absl::OkStatus();
    }
    case ZBADVERSION:
      if (Reload(hold, owner)) return absl::AbortedError("version conflict");
      [[fallthrough]];
    case ZNONODE:
      Forget(record);
      return NotOwnerError(name);
    default:
      return session_->ErrorStatus(r.rc,
                                   absl::StrCat(what, " of lock '", name, "'"));
  }
}

absl::Status ZkBackend::WriteRecomputed(
    absl::string_view name, absl::string_view owner, ZkHold* record,
    LocalHold& hold, absl::FunctionRef<NodeData(const LocalHold&)> next,
    absl::string_view what) {
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    absl::Status s = Write(name, owner, record, hold, next(hold), what);
    if (!absl::IsAborted(s)) return s;
  }
  return KeptConflicting(name, what);
}

absl::StatusOr<int64_t> ZkBackend::Release(const ReleaseCall& call) {
  const absl::string_view name = call.name;
  const absl::string_view owner = call.owner;
  ZkHold* const record = ZkHold::Of(call.record);
  if (absl::Status lost = LostWithSession(name, record); !lost.ok()) {
    return lost;
  }
  absl::MutexLockMaybe turn(record == nullptr ? nullptr
                                              : &record->write_turn());
  absl::StatusOr<std::optional<LocalHold>> found = HoldOf(name, owner, record);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NotOwnerError(name);
  LocalHold hold = **found;
  if (Now() > hold.confirmed + absl::Milliseconds(hold.data.lease_ms)) {
    Forget(record);
    if (hold.generation != 0) {
      QueueDelete(PendingDelete{.path = hold.path, .version = hold.version});
    }
    return LeaseRanOut(name, "release");
  }
  bool delete_sent = false;
  // Keeping the lock: the delete goes in one multi with the create of a
  // kept-lock node named after this hold's token, so a kept-lock node of
  // this hold exists exactly when the release ran (zk_layout.h).
  const bool keep = call.keep_for > absl::ZeroDuration();
  const MonoTime keep_until = Now() + call.keep_for;
  const std::string kept_path =
      keep ? absl::StrCat(ParentOf(name), "/", KeptNodeName(hold.czxid)) : "";
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    if (!call.all_holds && hold.data.holds > call.holds) {
      // Fewer holds, the same expiry: the write moves mtime to now.
      NodeData next = hold.data;
      next.holds -= call.holds;
      next.lease_ms = std::max<int64_t>(1, RemainingMs(hold.data, hold.mtime));
      absl::Status s = Write(name, owner, record, hold, next, "release");
      if (absl::IsAborted(s)) continue;
      if (!s.ok()) return s;
      return next.holds;
    }
    if (!Connected()) {
      return session_->ErrorStatus(
          ZCONNECTIONLOSS, absl::StrCat("release of lock '", name, "'"));
    }
    Reply r =
        keep ? ReleaseKeeping(hold.path, hold.version, kept_path, hold.czxid,
                              keep_until - Now())
                   .Wait(CallDeadline())
             : session_->Delete(hold.path, hold.version).Wait(CallDeadline());
    // NODEEXISTS: this hold's kept-lock node, made by our earlier multi.
    if (r.rc == ZOK || (keep && r.rc == ZNODEEXISTS)) {
      Forget(record);
      if (keep) {
        absl::MutexLock lock(&mu_);
        made_keep_ = true;
      }
      return 0;
    }
    if (r.rc == ZNONODE) {
      Forget(record);
      if (delete_sent && keep) {
        Reply kept = session_->Exists(kept_path, false).Wait(CallDeadline());
        if (kept.rc == ZOK) return 0;
        if (kept.rc != ZNONODE) {
          return session_->ErrorStatus(
              kept.rc, absl::StrCat("release of lock '", name, "'"));
        }
      } else if (delete_sent && OurDeleteRan(hold)) {
        return 0;
      }
      return NotOwnerError(name);
    }
    if (r.rc == ZBADVERSION) {
      if (Reload(hold, owner)) continue;
      Forget(record);
      return NotOwnerError(name);
    }
    if (!IsConnectionError(r.rc)) {
      return session_->ErrorStatus(
          r.rc, absl::StrCat("release of lock '", name, "'"));
    }
    // The delete went out and its reply was lost. Try again once the
    // connection is back; failing that, a background task retries until the
    // delete is confirmed. Until then the node keeps everyone else out.
    delete_sent = true;
    if (!Reconnected(Now() +
                     std::min(session_->call_timeout(), absl::Seconds(3)))) {
      // Not known to have happened: the core retries the release (C21),
      // reading the node from ZooKeeper.
      Forget(record);
      QueueDelete(PendingDelete{.path = hold.path,
                                .version = hold.version,
                                .kept_path = kept_path,
                                .kept_token = hold.czxid,
                                .keep_until = keep_until});
      return session_->ErrorStatus(
          r.rc, absl::StrCat("release of lock '", name, "'"));
    }
  }
  return KeptConflicting(name, "release");
}

Call ZkBackend::ReleaseKeeping(const std::string& holder_path, int32_t version,
                               const std::string& kept_path, uint64_t token,
                               absl::Duration keep_for) {
  return session_->CreateAndDelete(
      kept_path,
      SerializeKept(KeptData{.keep_ms = LeaseMillis(keep_for), .token = token}),
      ZOO_PERSISTENT, holder_path, version);
}

absl::Status ZkBackend::KeptConflicting(absl::string_view name,
                                        absl::string_view what) const {
  return absl::UnavailableError(absl::StrCat(what, " of lock '", name,
                                             "' kept conflicting on ZooKeeper ",
                                             session_->endpoint()));
}

bool ZkBackend::OurDeleteRan(const LocalHold& hold) {
  // Our delete went out, its reply was lost, and now the node is gone. Who
  // else removes a lock node?
  // - A successor, and only once the node's lease is over on ZooKeeper's
  //   clock: it deletes the node (at the version it read) only if the
  //   node's mtime plus lease_ms is not after the mtime of its own write.
  //   Our last confirmed write, which set lease_ms, was sent at
  //   `hold.confirmed`, so ZooKeeper stamped it no earlier; until
  //   confirmed + lease (less a drift margin) has passed here, the node's
  //   lease cannot be over there. This NONODE came back before that, so no
  //   successor can have removed the node before it was read.
  // - The end of the session that owns the node: then the session changed.
  // - A force unlock (C12) or the owner token's release from another
  //   client (C6), both asked by the owner's side: either way the lock was
  //   let go for the owner, and this release counts as done.
  // Past that point nothing tells our delete from a successor's, and only a
  // delete known to have taken effect may count (C4): the caller reports
  // the hold as not held.
  if (hold.generation != 0 && session_->generation() != hold.generation) {
    return false;
  }
  const absl::Duration lease = absl::Milliseconds(hold.data.lease_ms);
  return Now() < hold.confirmed + lease - DriftMargin(lease);
}

absl::Status ZkBackend::Renew(const RenewCall& call) {
  ZkHold* const record = ZkHold::Of(call.record);
  if (absl::Status lost = LostWithSession(call.name, record); !lost.ok()) {
    return lost;
  }
  absl::MutexLockMaybe turn(record == nullptr ? nullptr
                                              : &record->write_turn());
  absl::StatusOr<std::optional<LocalHold>> found =
      HoldOf(call.name, call.owner, record);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NotOwnerError(call.name);
  LocalHold hold = **found;
  if (Now() > hold.confirmed + absl::Milliseconds(hold.data.lease_ms)) {
    Forget(record);
    if (hold.generation != 0) {
      QueueDelete(PendingDelete{.path = hold.path, .version = hold.version});
    }
    return LeaseRanOut(call.name, "renewal");
  }
  const int64_t lease_ms = LeaseMillis(call.lease);
  return WriteRecomputed(
      call.name, call.owner, record, hold,
      [lease_ms](const LocalHold& now) {
        NodeData next = now.data;
        next.kept_ms = std::max(next.kept_ms, lease_ms);
        next.lease_ms = next.kept_ms;
        return next;
      },
      "renewal");
}

std::vector<absl::Status> ZkBackend::RenewMany(
    absl::Span<const RenewCall> calls) {
  // The watchdog's batch goes out pipelined: one round trip for all of them.
  struct InFlight {
    size_t index;
    ZkHold* record;
    LocalHold hold;
    NodeData next;
    Call call;
  };
  std::vector<absl::Status> results(calls.size());
  std::vector<InFlight> in_flight;
  std::vector<size_t> one_by_one;
  std::vector<absl::Mutex*> turns;
  const MonoTime now = Now();
  for (size_t i = 0; i < calls.size(); ++i) {
    // Ended, lost, or taken elsewhere: Renew() says what. A record another
    // write of ours is under way on (a release, say) waits for it there.
    ZkHold* record = ZkHold::Of(calls[i].record);
    if (record == nullptr || !record->live() || !TakeTurn(*record, turns)) {
      one_by_one.push_back(i);
      continue;
    }
    LocalHold hold = record->Get();
    if (now > hold.confirmed + absl::Milliseconds(hold.data.lease_ms) ||
        !Connected()) {
      one_by_one.push_back(i);
      continue;
    }
    NodeData next = hold.data;
    next.kept_ms = std::max(next.kept_ms, LeaseMillis(calls[i].lease));
    next.lease_ms = next.kept_ms;
    Call call = session_->Set(hold.path, Serialize(next), hold.version);
    in_flight.push_back(
        InFlight{i, record, std::move(hold), next, std::move(call)});
  }
  const MonoTime deadline = CallDeadline();
  for (InFlight& f : in_flight) {
    Reply r = f.call.Wait(deadline);
    const RenewCall& c = calls[f.index];
    if (r.rc == ZOK) {
      f.hold.data = f.next;
      f.hold.version = r.stat.version;
      f.hold.mtime = r.stat.mtime;
      f.hold.confirmed = f.call.sent();
      session_->NoteServerTime(r.stat.mtime, Now());
      f.record->Wrote(f.hold);
    } else if (r.rc == ZNONODE) {
      Forget(f.record);
      results[f.index] = NotOwnerError(c.name);
    } else {
      one_by_one.push_back(f.index);  // a conflict or a lost reply
    }
  }
  LetGo(turns);
  for (size_t i : one_by_one) results[i] = Renew(calls[i]);
  return results;
}

void ZkBackend::SweepKept(MonoTime until) {
  // Deleted only well after its end, as estimated from ZooKeeper's clock:
  // the estimate may be off by the round trip it was taken in.
  constexpr int64_t kMarginMs = 5000;
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    if (sweep_names_.empty()) {
      const MonoTime now = Now();
      if (now < next_sweep_) return;
      next_sweep_ = now + settings_.kept_sweep;
    }
    names.swap(sweep_names_);
  }
  auto deadline = [&] { return std::min(until, CallDeadline()); };
  if (names.empty()) {
    Reply list = session_->Children(base_).Wait(deadline());
    if (list.rc != ZOK) return;
    names = std::move(list.children);
  }
  while (!names.empty() && Now() < until) {
    const std::string parent = absl::StrCat(base_, "/", names.back());
    names.pop_back();
    Reply children = session_->Children(parent).Wait(deadline());
    if (children.rc != ZOK) continue;
    for (const std::string& child : children.children) {
      if (!IsKeptNode(child)) continue;
      const std::string path = absl::StrCat(parent, "/", child);
      Reply got = session_->Get(path, false).Wait(deadline());
      if (got.rc != ZOK) continue;
      const std::optional<int64_t> end = KeptEnd(got);
      if (!end.has_value() ||
          *end + kMarginMs > session_->EstimatedServerNowMs()) {
        continue;
      }
      // At the version read: a node rewritten since is left alone.
      (void)session_->Delete(path, got.stat.version).Wait(deadline());
    }
  }
  absl::MutexLock lock(&mu_);
  sweep_names_ = std::move(names);
}

}  // namespace dlock::zk
