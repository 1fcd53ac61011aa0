// The zk:// backend's calls about a hold it granted: re-entry of a hold the
// core knows (C5), release and renewal, through the node writer.
#include <algorithm>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/errors.h"
#include "zk_backend.h"

namespace dlock::zk {
namespace {

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

// A renewal keeps the longest lease any acquisition asked for (C5).
NodeData Renewed(const NodeData& data, absl::Duration lease) {
  NodeData next = data;
  next.kept_ms = std::max(next.kept_ms, LeaseMillis(lease));
  next.lease_ms = next.kept_ms;
  return next;
}

bool LeaseOver(const LocalHold& hold, MonoTime now) {
  return now > hold.confirmed + absl::Milliseconds(hold.data.lease_ms);
}

}  // namespace

absl::StatusOr<Grant> ZkBackend::Acquire(const AcquireCall& asked) {
  // A reader's node names its owner "r:<owner>" (zk_layout.h): every write
  // and check of it below compares that.
  const std::string reader = ReaderOwner(asked.owner);
  AcquireCall call = asked;
  if (call.shape.mode == HoldMode::kShared) call.owner = reader;
  if (ZkHold* held = ZkHold::Of(call.held); held != nullptr) {
    if (std::optional<absl::StatusOr<Grant>> again =
            ReenterKnown(call, *held)) {
      return *std::move(again);
    }
  }
  return queue_->Acquire(call, ParentOf(call.shape.kind, call.name));
}

std::optional<absl::StatusOr<Grant>> ZkBackend::ReenterKnown(
    const AcquireCall& call, ZkHold& held) {
  // Ended, or lost with its session: this is a fresh acquisition.
  if (!held.live()) return std::nullopt;
  absl::MutexLock turn(&held.write_turn());
  LocalHold hold = held.Get();
  if (LeaseOver(hold, Now())) {
    // The lease ran out: this is a fresh acquisition, not a re-entry.
    Forget(&held);
    janitor_->Queue(PendingDelete{.path = hold.path, .version = hold.version});
    return std::nullopt;
  }
  const absl::Status written = writer_->WriteRecomputed(
      call.name, call.owner, &held, hold,
      [&](const LocalHold& now) { return writer_->Reentered(now, call); },
      "re-entry");
  if (IsGone(written)) return std::nullopt;  // gone: acquire afresh
  if (!written.ok()) return absl::StatusOr<Grant>(written);
  // The record, written in place, stays the hold's. Named again rather than
  // left null: should the core start the hold afresh (its local deadline
  // passed meanwhile), it must keep this record, not none.
  return absl::StatusOr<Grant>(
      Grant{.fencing_token = TokenOf(hold.data, hold.czxid),
            .hold_count = hold.data.holds,
            .sent = hold.confirmed,
            .record = held.shared_from_this()});
}

absl::Status ZkBackend::LostWithSession(absl::string_view name,
                                        const ZkHold* record) {
  if (record == nullptr) return absl::OkStatus();
  std::optional<absl::Status> lost = record->lost();
  return lost.has_value() ? LostError(name, lost->message()) : absl::OkStatus();
}

absl::Status ZkBackend::LeaseRanOut(absl::string_view name, ZkHold* record,
                                    const LocalHold& hold,
                                    absl::string_view what) {
  Forget(record);
  if (hold.generation != 0) {
    janitor_->Queue(PendingDelete{.path = hold.path, .version = hold.version});
  }
  return LostError(name, absl::StrCat("its lease ran out before the ", what));
}

absl::StatusOr<int64_t> ZkBackend::Release(const ReleaseCall& asked) {
  const std::string reader = ReaderOwner(asked.owner);
  ReleaseCall call = asked;
  if (call.shape.mode == HoldMode::kShared) call.owner = reader;
  ZkHold* const record = ZkHold::Of(call.record);
  if (absl::Status lost = LostWithSession(call.name, record); !lost.ok()) {
    return lost;
  }
  absl::MutexLockMaybe turn(record == nullptr ? nullptr
                                              : &record->write_turn());
  absl::StatusOr<std::optional<LocalHold>> found =
      HoldOf(call.name, call.owner, record, call.shape);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NotOwnerError(call.name);
  Releasing r{.call = call, .record = record, .hold = **found};
  if (LeaseOver(r.hold, Now())) {
    return LeaseRanOut(call.name, record, r.hold, "release");
  }
  r.keep = call.keep_for > absl::ZeroDuration();
  r.keep_until = Now() + call.keep_for;
  if (r.keep) {
    r.kept_path =
        absl::StrCat(ParentOf(call.name), "/", KeptNodeName(r.hold.czxid));
  }
  return TakeHoldsOff(r);
}

absl::StatusOr<int64_t> ZkBackend::TakeHoldsOff(Releasing& r) {
  const ReleaseCall& call = r.call;
  for (int attempt = 0; attempt < NodeWriter::kWriteRetries; ++attempt) {
    if (!call.all_holds && r.hold.data.holds > call.holds) {
      // Fewer holds, the same expiry: the write moves mtime to now.
      NodeData next = r.hold.data;
      next.holds -= call.holds;
      next.lease_ms =
          std::max<int64_t>(1, writer_->RemainingMs(r.hold.data, r.hold.mtime));
      absl::Status s = writer_->Write(call.name, call.owner, r.record, r.hold,
                                      next, "release");
      if (absl::IsAborted(s)) continue;
      if (!s.ok()) return s;
      return next.holds;
    }
    absl::StatusOr<std::optional<int64_t>> deleted = DeleteHold(r);
    if (!deleted.ok()) return deleted.status();
    if (deleted->has_value()) return **deleted;
  }
  return writer_->KeptConflicting(call.name, "release");
}

absl::StatusOr<std::optional<int64_t>> ZkBackend::DeleteHold(Releasing& r) {
  const std::string what = absl::StrCat("release of lock '", r.call.name, "'");
  if (!writer_->Connected()) {
    return session_->ErrorStatus(ZCONNECTIONLOSS, what);
  }
  Reply reply =
      r.keep ? writer_
                   ->ReleaseKeeping(r.hold.path, r.hold.version, r.kept_path,
                                    r.hold.czxid, r.keep_until - Now())
                   .Wait(writer_->CallDeadline())
             : session_->Delete(r.hold.path, r.hold.version)
                   .Wait(writer_->CallDeadline());
  // NODEEXISTS: this hold's kept-lock node, made by our earlier multi.
  if (reply.rc == ZOK || (r.keep && reply.rc == ZNODEEXISTS)) {
    Forget(r.record);
    if (r.keep) janitor_->NoteKeep();
    return std::optional<int64_t>(0);
  }
  if (reply.rc == ZNONODE) return DeletedMeanwhile(r);
  if (reply.rc == ZBADVERSION) {
    if (writer_->Reload(r.hold, r.call.owner)) return std::nullopt;
    Forget(r.record);
    return NotOwnerError(r.call.name);
  }
  if (!NodeWriter::IsConnectionError(reply.rc)) {
    return session_->ErrorStatus(reply.rc, what);
  }
  // The delete went out and its reply was lost. Try again once the
  // connection is back; failing that, the janitor retries until the delete
  // is confirmed. Until then the node keeps everyone else out.
  r.delete_sent = true;
  if (writer_->Reconnected(
          Now() + std::min(session_->call_timeout(), absl::Seconds(3)))) {
    return std::nullopt;
  }
  // Not known to have happened: the core retries the release (C21), reading
  // the node from ZooKeeper.
  Forget(r.record);
  janitor_->Queue(PendingDelete{.path = r.hold.path,
                                .version = r.hold.version,
                                .kept_path = r.kept_path,
                                .kept_token = r.hold.czxid,
                                .keep_until = r.keep_until});
  return session_->ErrorStatus(reply.rc, what);
}

absl::StatusOr<int64_t> ZkBackend::DeletedMeanwhile(Releasing& r) {
  Forget(r.record);
  if (r.delete_sent && r.keep) {
    Reply kept =
        session_->Exists(r.kept_path, false).Wait(writer_->CallDeadline());
    if (kept.rc == ZOK) return 0;
    if (kept.rc != ZNONODE) {
      return session_->ErrorStatus(
          kept.rc, absl::StrCat("release of lock '", r.call.name, "'"));
    }
  } else if (r.delete_sent && writer_->OurDeleteRan(r.hold)) {
    return 0;
  }
  return NotOwnerError(r.call.name);
}

absl::Status ZkBackend::Renew(const RenewCall& asked) {
  const std::string reader = ReaderOwner(asked.owner);
  RenewCall call = asked;
  if (call.shape.mode == HoldMode::kShared) call.owner = reader;
  ZkHold* const record = ZkHold::Of(call.record);
  if (absl::Status lost = LostWithSession(call.name, record); !lost.ok()) {
    return lost;
  }
  absl::MutexLockMaybe turn(record == nullptr ? nullptr
                                              : &record->write_turn());
  absl::StatusOr<std::optional<LocalHold>> found =
      HoldOf(call.name, call.owner, record, call.shape);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NotOwnerError(call.name);
  LocalHold hold = **found;
  if (LeaseOver(hold, Now())) {
    return LeaseRanOut(call.name, record, hold, "renewal");
  }
  return writer_->WriteRecomputed(
      call.name, call.owner, record, hold,
      [&](const LocalHold& now) { return Renewed(now.data, call.lease); },
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
    if (LeaseOver(hold, now) || !writer_->Connected()) {
      one_by_one.push_back(i);
      continue;
    }
    NodeData next = Renewed(hold.data, calls[i].lease);
    Call call = session_->Set(hold.path, Serialize(next), hold.version);
    in_flight.push_back(
        InFlight{i, record, std::move(hold), next, std::move(call)});
  }
  const MonoTime deadline = writer_->CallDeadline();
  for (InFlight& f : in_flight) {
    Reply r = f.call.Wait(deadline);
    if (r.rc == ZOK) {
      f.hold.data = f.next;
      f.hold.version = r.stat.version;
      f.hold.mtime = r.stat.mtime;
      f.hold.confirmed = f.call.sent();
      session_->NoteServerTime(r.stat.mtime, Now());
      f.record->Wrote(f.hold);
    } else if (r.rc == ZNONODE) {
      Forget(f.record);
      results[f.index] = NotOwnerError(calls[f.index].name);
    } else {
      one_by_one.push_back(f.index);  // a conflict or a lost reply
    }
  }
  LetGo(turns);
  for (size_t i : one_by_one) results[i] = Renew(calls[i]);
  return results;
}

absl::StatusOr<std::optional<LocalHold>> ZkBackend::HoldOf(
    absl::string_view name, absl::string_view owner, const ZkHold* record,
    const HoldShape& shape) {
  const std::string reading = absl::StrCat("reading lock '", name, "'");
  if (record != nullptr) {
    LocalHold hold = record->Get();
    if (record->live()) return std::optional<LocalHold>(std::move(hold));
    // Ended here (a release whose reply was lost, a race with another
    // call): its own node, as ZooKeeper has it now, and never another hold
    // of the same owner.
    Reply got = session_->Get(hold.path, false).Wait(writer_->CallDeadline());
    if (got.rc == ZNONODE) return std::optional<LocalHold>();
    if (got.rc != ZOK) return session_->ErrorStatus(got.rc, reading);
    std::optional<NodeData> data = Parse(got.data);
    if (!data.has_value() || data->owner != owner ||
        writer_->Expired(*data, got.stat)) {
      return std::optional<LocalHold>();
    }
    hold.data = *std::move(data);
    hold.version = got.stat.version;
    hold.mtime = got.stat.mtime;
    return std::optional<LocalHold>(std::move(hold));
  }
  // Not taken through this client: an owner token may hold it elsewhere.
  absl::StatusOr<std::optional<Holder>> holder =
      shape.IsLockWriter() || shape.kind == ObjectKind::kElection
          ? FindHolder(name, shape.kind)
          : FindGrant(shape.kind, name, owner);
  if (!holder.ok()) return holder.status();
  if (!holder->has_value() || (*holder)->data.owner != owner ||
      writer_->Expired((*holder)->data, (*holder)->stat)) {
    return std::optional<LocalHold>();
  }
  const Holder& h = **holder;
  const int64_t age_ms = session_->EstimatedServerNowMs() - h.stat.mtime;
  return std::optional<LocalHold>(
      LocalHold{.path = h.path,
                .data = h.data,
                .version = h.stat.version,
                .czxid = static_cast<uint64_t>(h.stat.czxid),
                .mtime = h.stat.mtime,
                .generation = 0,
                .confirmed = Now() - absl::Milliseconds(age_ms)});
}

absl::Status ZkBackend::Proclaim(const ProclaimCall& call) {
  ZkHold* const record = ZkHold::Of(call.record);
  if (absl::Status lost = LostWithSession(call.name, record); !lost.ok()) {
    return lost;
  }
  absl::MutexLockMaybe turn(record == nullptr ? nullptr
                                              : &record->write_turn());
  absl::StatusOr<std::optional<LocalHold>> found = HoldOf(
      call.name, call.owner, record, HoldShape{.kind = ObjectKind::kElection});
  if (!found.ok()) return found.status();
  // The term is the node's czxid: another node of the owner's is another
  // term, not this leadership.
  if (!found->has_value() || (*found)->czxid != call.term) {
    return NotOwnerError(call.name);
  }
  LocalHold hold = **found;
  if (LeaseOver(hold, Now())) {
    return LeaseRanOut(call.name, record, hold, "proclaim");
  }
  // A versioned write of the leader's own node: its observers' data watch
  // fires. The lease keeps its end (the write moves mtime to now).
  return writer_->WriteRecomputed(
      call.name, call.owner, record, hold,
      [&](const LocalHold& now) {
        NodeData next = now.data;
        next.value = std::string(call.value);
        next.lease_ms =
            std::max<int64_t>(1, writer_->RemainingMs(now.data, now.mtime));
        return next;
      },
      "proclaim");
}

}  // namespace dlock::zk
