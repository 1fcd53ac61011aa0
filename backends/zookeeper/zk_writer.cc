#include "zk_writer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"

namespace dlock::zk {

bool NodeWriter::IsConnectionError(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
         rc == ZSESSIONMOVED || rc == ZTHROTTLEDOP;
}

int64_t NodeWriter::RemainingMs(const NodeData& data, int64_t mtime) const {
  return mtime + data.lease_ms - session_.EstimatedServerNowMs();
}

NodeData NodeWriter::Reentered(const LocalHold& hold,
                               const AcquireCall& call) const {
  NodeData next = hold.data;
  const int64_t asked = LeaseMillis(call.lease);
  // Campaigning again while leading proclaims the value (C24).
  if (call.shape.kind == ObjectKind::kElection) next.value = ValueOf(call);
  next.holds += 1;
  next.kept_ms = std::max(next.kept_ms, asked);
  next.lease_ms = std::max(asked, RemainingMs(hold.data, hold.mtime));
  return next;
}

int NodeWriter::Touch(OwnNode& own, int64_t lease_ms,
                      std::optional<int64_t> since_ms,
                      const std::optional<std::string>& value) {
  int rc = ZBADVERSION;
  for (int attempt = 0; attempt < kWriteRetries && rc == ZBADVERSION;
       ++attempt) {
    NodeData next = own.data;
    next.lease_ms = std::max(lease_ms, RemainingMs(own.data, own.stat.mtime));
    next.kept_ms = std::max(next.kept_ms, lease_ms);
    if (since_ms.has_value() && next.since_ms == 0) next.since_ms = *since_ms;
    if (value.has_value()) next.value = value;
    Call set = session_.Set(own.path, Serialize(next), own.stat.version);
    Reply r = set.Wait(CallDeadline());
    rc = r.rc;
    if (rc == ZOK) {
      own.data = std::move(next);
      own.stat = r.stat;
      own.written = set.sent();
      session_.NoteServerTime(r.stat.mtime, Now());
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

int NodeWriter::ReloadOwn(OwnNode& own, MonoTime deadline) {
  Reply got = session_.Get(own.path, false).Wait(deadline);
  if (got.rc != ZOK) return got.rc;
  std::optional<NodeData> data = Parse(got.data);
  // Owners never change on a node; anything else is not our node.
  if (!data.has_value() || data->owner != own.data.owner) return ZNONODE;
  own.data = *std::move(data);
  own.stat = got.stat;
  return ZOK;
}

int NodeWriter::TakeOwnHoldOff(OwnNode& own, MonoTime deadline) {
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    int rc;
    if (own.data.holds <= 1) {
      rc = session_.Delete(own.path, own.stat.version).Wait(deadline).rc;
    } else {
      // Our hold off, the expiry kept, as a release of one hold does.
      NodeData next = own.data;
      next.holds -= 1;
      next.lease_ms =
          std::max<int64_t>(1, RemainingMs(own.data, own.stat.mtime));
      rc = session_.Set(own.path, Serialize(next), own.stat.version)
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

absl::Status NodeWriter::Write(absl::string_view name, absl::string_view owner,
                               ZkHold* record, LocalHold& hold,
                               const NodeData& next, absl::string_view what) {
  if (!Connected()) {
    return session_.ErrorStatus(ZCONNECTIONLOSS,
                                absl::StrCat(what, " of lock '", name, "'"));
  }
  const std::string payload = Serialize(next);
  Call set = session_.Set(hold.path, payload, hold.version);
  Reply r = set.Wait(CallDeadline());
  if (IsConnectionError(r.rc) &&
      Reconnected(Now() +
                  std::min(session_.call_timeout(), absl::Seconds(3)))) {
    // Sent, reply lost: it happened iff the node holds exactly our write.
    Reply check = session_.Get(hold.path, false).Wait(CallDeadline());
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
      session_.NoteServerTime(r.stat.mtime, Now());
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
      return session_.ErrorStatus(r.rc,
                                  absl::StrCat(what, " of lock '", name, "'"));
  }
}

absl::Status NodeWriter::WriteRecomputed(
    absl::string_view name, absl::string_view owner, ZkHold* record,
    LocalHold& hold, absl::FunctionRef<NodeData(const LocalHold&)> next,
    absl::string_view what) {
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    absl::Status s = Write(name, owner, record, hold, next(hold), what);
    if (!absl::IsAborted(s)) return s;
  }
  return KeptConflicting(name, what);
}

bool NodeWriter::Reload(LocalHold& hold, absl::string_view owner) {
  Reply got = session_.Get(hold.path, false).Wait(CallDeadline());
  if (got.rc != ZOK) return false;
  std::optional<NodeData> data = Parse(got.data);
  if (!data.has_value() || data->owner != owner) return false;
  hold.data = *std::move(data);
  hold.version = got.stat.version;
  hold.mtime = got.stat.mtime;
  return true;
}

bool NodeWriter::OurDeleteRan(const LocalHold& hold) {
  // Our delete went out, its reply was lost, and now the node is gone. Who
  // else removes a lock node?
  // - A successor, and only once the node's lease is over on ZooKeeper's
  //   clock: it deletes the node (at the version it read) only if the
  //   node's mtime plus lease_ms is not after the mtime of its own write.
  //   Our last confirmed write, which set lease_ms, was sent at
  //   `hold.confirmed`, so ZooKeeper stamped it no earlier; until
  //   confirmed + lease (less the drift margin) has passed here, the node's
  //   lease cannot be over there. This NONODE came back before that, so no
  //   successor can have removed the node before it was read.
  // - The end of the session that owns the node: then the session changed.
  // - A force unlock (C12) or the owner token's release from another
  //   client (C6), both asked by the owner's side: either way the lock was
  //   let go for the owner, and this release counts as done.
  // Past that point nothing tells our delete from a successor's, and only a
  // delete known to have taken effect may count (C4): the caller reports
  // the hold as not held.
  if (hold.generation != 0 && session_.generation() != hold.generation) {
    return false;
  }
  const absl::Duration lease = absl::Milliseconds(hold.data.lease_ms);
  return Now() < hold.confirmed + lease - DriftMargin(lease);
}

Call NodeWriter::ReleaseKeeping(const std::string& holder_path, int32_t version,
                                const std::string& kept_path, uint64_t token,
                                absl::Duration keep_for) {
  return session_.CreateAndDelete(
      kept_path,
      SerializeKept(KeptData{.keep_ms = LeaseMillis(keep_for), .token = token}),
      ZOO_PERSISTENT, holder_path, version);
}

absl::Status NodeWriter::KeptConflicting(absl::string_view name,
                                         absl::string_view what) const {
  return absl::UnavailableError(absl::StrCat(what, " of lock '", name,
                                             "' kept conflicting on ZooKeeper ",
                                             session_.endpoint()));
}

}  // namespace dlock::zk
