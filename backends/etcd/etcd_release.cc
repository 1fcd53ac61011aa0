// The etcd:// backend's release, introspection and force unlock.
#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "etcd_backend.h"

namespace dlock::etcd {
absl::StatusOr<int64_t> EtcdBackend::Release(const ReleaseCall& call) {
  if (call.shape.IsLockWriter()) return ReleaseWriter(call);
  const std::string object = HoldObjectName(call.shape, call.name, call.owner);
  absl::StatusOr<int64_t> left = ReleaseWriter(OnKey(call, object));
  // A permit holder's or reader's key is its own: its waiters wait on the
  // semaphore's or lock's name (the watch tells other clients').
  if (left.ok() && *left == 0 && call.shape.kind != ObjectKind::kElection) {
    hub_.Notify(ObjectName(call.shape.kind, call.name));
  }
  return left;
}

absl::StatusOr<int64_t> EtcdBackend::ReleaseWriter(const ReleaseCall& call) {
  const EtcdHold* record =
      call.record == nullptr ? nullptr : EtcdHold::Of(call.record);
  const std::string key = layout_.Key(call.name);
  if (record != nullptr && call.all_holds &&
      call.keep_for == absl::ZeroDuration()) {
    std::optional<absl::StatusOr<int64_t>> whole =
        ReleaseWhole(call, key, *record);
    if (whole.has_value()) return *std::move(whole);
  }
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::optional<int64_t>> left =
        ReleaseOnce(call, key, record);
    if (!left.ok()) return left.status();
    if (left->has_value()) return **left;
  }
  return Contended(call.name, "release");
}

std::optional<absl::StatusOr<int64_t>> EtcdBackend::ReleaseWhole(
    const ReleaseCall& call, const std::string& key, const EtcdHold& record) {
  const LeaseState lease = record.lease();
  // A key its create alone wrote (its mod revision still the create's: no
  // re-entry, move or proclaim since) is
  // a hold of this client alone, on a lease no other client keeps alive:
  // deleted, it leaves that lease carrying nothing, for the next hold
  // (etcd_hold.h), one Raft write fewer than a grant.
  int sends = 0;
  absl::StatusOr<etcdserverpb::TxnResponse> deleted =
      client_->Txn(DeleteIfWrittenAt(key, record.create_revision()),
                   {.idempotent = true, .sends = &sends});
  if (deleted.ok() && deleted->succeeded()) {
    hub_.Notify(call.name);
    spares_.Return(lease.ttl, lease);
    return absl::StatusOr<int64_t>(0);
  }
  if (deleted.ok()) {
    const mvccpb::KeyValue* kv = ReadKey(*deleted);
    // Another generation of the key, or this one's gone at the first send
    // (ended by someone else): never revoke this hold's lease, which a
    // newer hold may carry if a release of this one was confirmed before
    // (#22082). Read it.
    if (kv == nullptr ? sends == 1
                      : kv->create_revision() != record.create_revision()) {
      return std::nullopt;
    }
  }
  // Rewritten since its create, gone after a resend (the first may have
  // deleted it), or the outcome unknown: the lease carries this generation
  // of the key at most, and was not given back. Revoking it deletes the key
  // and nothing else.
  absl::Status revoked = client_->LeaseRevoke(lease.id);
  if (revoked.ok()) {
    hub_.Notify(call.name);
    return absl::StatusOr<int64_t>(0);
  }
  // Gone, or moved to a longer lease by a re-entry elsewhere: read it.
  if (!absl::IsNotFound(revoked)) return absl::StatusOr<int64_t>(revoked);
  return std::nullopt;
}

absl::StatusOr<std::optional<int64_t>> EtcdBackend::ReleaseOnce(
    const ReleaseCall& call, const std::string& key, const EtcdHold* record) {
  absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(key);
  if (!kv.ok()) return kv.status();
  std::optional<HoldValue> value =
      kv->has_value() ? Decode((*kv)->value()) : std::nullopt;
  // A record names one generation of the key: never another (#22082).
  if (!value.has_value() ||
      (record != nullptr &&
       (*kv)->create_revision() != record->create_revision())) {
    return NotOwnerError(call.name);
  }
  if (value->kept()) {
    // This hold's own keep, by a release whose reply was lost (C21).
    if (record != nullptr && call.keep_for > absl::ZeroDuration()) {
      return std::optional<int64_t>(0);
    }
    return NotOwnerError(call.name);
  }
  if (value->owner != call.owner) return NotOwnerError(call.name);
  const int64_t left =
      std::max<int64_t>(value->holds - call.CountToSubtract(), 0);
  if (left > 0) {
    value->holds = left;
    absl::StatusOr<bool> written = Overwrite(key, **kv, *value, 0);
    if (!written.ok()) return written.status();
    if (!*written) return std::nullopt;
    return std::optional<int64_t>(left);
  }
  if (call.keep_for > absl::ZeroDuration()) {
    absl::StatusOr<bool> kept = Keep(call, key, **kv);
    if (!kept.ok()) return kept.status();
    if (!*kept) return std::nullopt;
  } else {
    // By a hold this client may not know (C6): its lease may be another
    // client's, given to that client's next hold if its release came first.
    absl::StatusOr<bool> ended = EndHold(**kv);
    if (!ended.ok()) return ended.status();
    if (!*ended) return std::nullopt;  // changed meanwhile: read it again
  }
  hub_.Notify(call.name);
  return std::optional<int64_t>(0);
}

absl::StatusOr<bool> EtcdBackend::Keep(const ReleaseCall& call,
                                       const std::string& key,
                                       const mvccpb::KeyValue& kv) {
  // A lease of its own, granted before the write: the keep lasts at least
  // keep_for from this call on etcd's clock.
  absl::StatusOr<LeaseState> lease = GrantLease(call.keep_for);
  if (!lease.ok()) return lease.status();
  const HoldValue kept{.holds = 0,
                       .lease_ms = KeepMillis(call.keep_for),
                       .since_ms = absl::ToUnixMillis(absl::Now())};
  absl::StatusOr<bool> written = Overwrite(key, kv, kept, lease->id);
  if (!written.ok() || !*written) {
    RevokeQuietly(lease->id);
    return written;
  }
  RevokeQuietly(kv.lease());  // the released hold's: it carries no key now
  return true;
}

absl::StatusOr<LockInfo> EtcdBackend::Describe(
    absl::string_view name, const mvccpb::KeyValue& kv,
    const absl::flat_hash_set<std::string>& live) {
  LockInfo info;
  info.name = std::string(name);
  absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> ttl =
      client_->LeaseTimeToLive(kv.lease());
  if (!ttl.ok()) return ttl.status();
  if (ttl->ttl() < 0) return info;  // its lease ended as we read it: free
  info.locked = true;
  info.fencing_token = static_cast<uint64_t>(kv.create_revision());
  absl::Duration most = absl::Seconds(ttl->grantedttl());
  if (std::optional<HoldValue> value = Decode(kv.value())) {
    info.owner = value->owner;
    info.hold_count = value->holds;
    info.since = absl::FromUnixMillis(value->since_ms);
    info.kept_after_release = value->kept();
    most = std::min(most, absl::Milliseconds(value->lease_ms));
    if (!value->live.empty()) {
      info.holder_live = absl::c_any_of(
          value->live,
          [&](const std::string& id) { return live.contains(id); });
    }
  }
  // etcd tells whole seconds left, truncated: the middle of that second,
  // and never more than the lease (or keep) asked.
  info.remaining_lease =
      std::min(absl::Seconds(ttl->ttl()) + absl::Milliseconds(500), most);
  return info;
}

absl::StatusOr<LockInfo> EtcdBackend::Inspect(absl::string_view name) {
  absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(layout_.Key(name));
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) {
    LockInfo info;
    info.name = std::string(name);
    return info;
  }
  std::optional<HoldValue> value = Decode((*kv)->value());
  absl::StatusOr<absl::flat_hash_set<std::string>> live = liveness_.LiveAmong(
      value.has_value() ? value->live : std::vector<std::string>{});
  if (!live.ok()) return live.status();
  return Describe(name, **kv, *live);
}

absl::StatusOr<std::vector<LockInfo>> EtcdBackend::List(
    absl::string_view prefix) {
  absl::StatusOr<std::vector<Described>> held = DescribeFrom(prefix);
  if (!held.ok()) return held.status();
  std::vector<LockInfo> out;
  for (Described& one : *held) {
    // Elections' keys sort among the locks' (etcd_layout.h).
    std::optional<NamedObject> object = ParseObjectName(one.info.name);
    if (object.has_value() && object->kind == ObjectKind::kLock &&
        !object->readers) {
      out.push_back(std::move(one.info));
    }
  }
  return out;
}

absl::StatusOr<std::vector<EtcdBackend::Described>> EtcdBackend::DescribeFrom(
    absl::string_view object_prefix) {
  const std::string from = layout_.Key(object_prefix);
  absl::StatusOr<etcdserverpb::RangeResponse> response = RangeOf(from);
  if (!response.ok()) return response.status();
  // The liveness of every holder, in one read.
  std::vector<std::string> ids;
  for (const mvccpb::KeyValue& kv : response->kvs()) {
    if (std::optional<HoldValue> value = Decode(kv.value())) {
      ids.insert(ids.end(), value->live.begin(), value->live.end());
    }
  }
  absl::StatusOr<absl::flat_hash_set<std::string>> live =
      liveness_.LiveAmong(ids);
  if (!live.ok()) return live.status();
  std::vector<Described> out;
  for (const mvccpb::KeyValue& kv : response->kvs()) {
    std::optional<absl::string_view> name = layout_.NameOf(kv.key());
    if (!name.has_value()) continue;
    absl::StatusOr<LockInfo> info = Describe(*name, kv, *live);
    if (!info.ok()) return info.status();
    if (!info->locked) continue;
    std::optional<HoldValue> value = Decode(kv.value());
    out.push_back({*std::move(info), value.has_value() ? value->value : ""});
  }
  return out;  // etcd answers in key order, which is name order
}

absl::Status EtcdBackend::ForceUnlock(absl::string_view name) {
  return ForceUnlockLock(name, std::nullopt);  // its readers too (C23)
}

absl::Status EtcdBackend::ForceUnlockIfToken(absl::string_view name,
                                             uint64_t fencing_token) {
  return EndHolder(name, fencing_token);
}

absl::StatusOr<bool> EtcdBackend::TakeOver(const AcquireCall& call,
                                           const std::string& key,
                                           const mvccpb::KeyValue& kv,
                                           const HoldValue& held,
                                           int64_t read_revision) {
  const absl::string_view name = call.name;
  // Before the look: a deletion after the read wakes a waiter.
  if (Now() < call.deadline) {
    liveness_.WakeWhenGone(name, held.live, read_revision + 1);
  }
  // Seen live lately, and the watch told no deletion since.
  if (liveness_.KnownLive(held.live)) return false;
  // Exact: a sharer's re-entry since the read (which names its own live
  // key) changes the mod revision, and so does a retry's first attempt.
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare& same = *txn.add_compare();
  same.set_key(key);
  same.set_target(etcdserverpb::Compare::MOD);
  same.set_result(etcdserverpb::Compare::EQUAL);
  same.set_mod_revision(kv.mod_revision());
  for (const std::string& id : held.live) {
    *txn.add_compare() =
        CompareCreateRevision(LivenessKey(id), etcdserverpb::Compare::EQUAL, 0);
  }
  *txn.add_success() = DeleteOp(key);
  *txn.add_failure() = RangeOp(key);
  absl::StatusOr<etcdserverpb::TxnResponse> response =
      client_->Txn(txn, {.idempotent = true});
  if (!response.ok()) return response.status();
  if (!response->succeeded()) {
    const mvccpb::KeyValue* now = ReadKey(*response);
    // That very write of the hold: a client it names is live.
    if (now != nullptr && now->mod_revision() == kv.mod_revision()) {
      liveness_.SawLive(held.live);
      return false;
    }
    // Changed or over since the read (a release, a sharer's re-entry,
    // another waiter's takeover, or this call's first attempt, whose reply
    // was lost): look again. Whoever ended it revoked its lease.
    return true;
  }
  // Every key it names is gone: no deletion is left to wake anyone.
  liveness_.Unwatch(name, held.live);
  // The lease carried this generation of the key alone: the holder's
  // renewals fail from now on (it was told lost at its liveness deadline).
  RevokeQuietly(kv.lease());
  hub_.Notify(name);
  return true;
}

absl::Status EtcdBackend::EndHolder(absl::string_view name,
                                    std::optional<uint64_t> token) {
  const std::string key = layout_.Key(name);
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(key);
    if (!kv.ok()) return kv.status();
    if (token.has_value() &&
        (!kv->has_value() ||
         static_cast<uint64_t>((*kv)->create_revision()) != *token)) {
      return TokenMismatchError(name, *token);
    }
    if (!kv->has_value()) return absl::OkStatus();
    absl::StatusOr<bool> ended = EndHold(**kv);
    if (!ended.ok()) return ended.status();
    if (*ended) {
      hub_.Notify(name);
      return absl::OkStatus();
    }
    // Changed or ended meanwhile: look again.
  }
  return Contended(name, "force unlock");
}

absl::StatusOr<ServerMemory> EtcdBackend::ServerMemoryUse() {
  absl::StatusOr<etcdserverpb::StatusResponse> status = client_->Status();
  if (!status.ok()) return status.status();
  return ServerMemory{.bytes = status->dbsizeinuse(),
                      .source = "etcd Maintenance.Status dbSizeInUse"};
}

}  // namespace dlock::etcd
