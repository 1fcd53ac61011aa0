// The calls on keys and leases that the etcd:// backend's operations share.
#include "etcd_leases.h"

#include "absl/strings/str_cat.h"
#include "etcd_backend.h"
#include "etcd_lease_keeper.h"

namespace dlock::etcd {

absl::StatusOr<std::optional<mvccpb::KeyValue>> EtcdBackend::Get(
    const std::string& key) {
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  absl::StatusOr<etcdserverpb::RangeResponse> response = client_->Range(range);
  if (!response.ok()) return response.status();
  if (response->kvs_size() == 0) return std::nullopt;
  return response->kvs(0);
}

absl::Duration GrantTtl(absl::Duration lease) {
  return absl::Ceil(absl::Milliseconds(LeaseMillis(lease)), absl::Seconds(1));
}

absl::StatusOr<LeaseState> GrantLease(Client& client, const Clock& clock,
                                      absl::Duration lease) {
  const absl::Duration ttl = GrantTtl(lease);
  const MonoTime sent = clock.Now();
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> granted =
      client.LeaseGrant(ttl);
  if (!granted.ok()) return granted.status();
  const absl::Duration given = absl::Seconds(granted->ttl());
  return LeaseState{
      .id = granted->id(), .ttl = given, .alive_until = sent + given};
}

absl::StatusOr<LeaseState> KeepLeaseAlive(Client& client, const Clock& clock,
                                          int64_t lease, absl::Time deadline) {
  return KeepLeasesAlive(client, clock, absl::MakeConstSpan(&lease, 1),
                         deadline)
      .front();
}

std::vector<absl::StatusOr<LeaseState>> KeepLeasesAlive(
    Client& client, const Clock& clock, absl::Span<const int64_t> leases,
    absl::Time deadline) {
  const MonoTime sent = clock.Now();
  std::vector<absl::StatusOr<absl::Duration>> ttls =
      client.leases().KeepAliveEach(leases, deadline);
  std::vector<absl::StatusOr<LeaseState>> states;
  states.reserve(leases.size());
  for (size_t i = 0; i < leases.size(); ++i) {
    if (!ttls[i].ok()) {
      states.push_back(ttls[i].status());
    } else {
      states.push_back(LeaseState{
          .id = leases[i], .ttl = *ttls[i], .alive_until = sent + *ttls[i]});
    }
  }
  return states;
}

absl::StatusOr<LeaseState> EtcdBackend::GrantLease(absl::Duration lease) {
  return etcd::GrantLease(*client_, clock_, lease);
}

absl::StatusOr<LeaseState> EtcdBackend::KeepAlive(int64_t lease) {
  return KeepLeaseAlive(*client_, clock_, lease,
                        MonotonicNow() + client_->options().call_timeout);
}

absl::StatusOr<LeaseState> EtcdBackend::LeaseOf(const mvccpb::KeyValue& kv) {
  if (kv.lease() == 0) {
    return absl::NotFoundError(
        absl::StrCat("key ", kv.key(), " lives on no lease"));
  }
  const MonoTime sent = Now();
  absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> known =
      client_->LeaseTimeToLive(kv.lease());
  if (!known.ok()) return known.status();
  if (known->ttl() < 0) {
    return absl::NotFoundError(absl::StrCat("lease ", kv.lease(), " is gone"));
  }
  // etcd truncates what is left to whole seconds: it lives at least that.
  return LeaseState{.id = kv.lease(),
                    .ttl = absl::Seconds(known->grantedttl()),
                    .alive_until = sent + absl::Seconds(known->ttl())};
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdBackend::RangeOf(
    const std::string& prefix, bool keys_only) {
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixEnd(prefix));
  range.set_keys_only(keys_only);
  return client_->Range(range);
}

void EtcdBackend::RevokeQuietly(int64_t lease) {
  // Unused or emptied: if this fails it expires by itself.
  (void)client_->LeaseRevoke(lease);
}

absl::StatusOr<bool> EtcdBackend::EndHold(const mvccpb::KeyValue& kv) {
  absl::StatusOr<etcdserverpb::TxnResponse> deleted = client_->Txn(
      DeleteIfWrittenAt(kv.key(), kv.mod_revision()), {.idempotent = true});
  if (!deleted.ok()) return deleted.status();
  // Changed or gone since the read: its lease may carry another hold now
  // (a release gives it to the client's next one, ReleaseWhole). A retry
  // after a lost reply that deleted it lands here too, and leaves the lease
  // to its holder, whose next renewal finds the key gone.
  if (!deleted->succeeded()) return false;
  // Deleted by this call, so by no release: the lease went to no other
  // hold, and carries nothing now. Its holder's renewals fail from now on.
  RevokeQuietly(kv.lease());
  return true;
}

absl::StatusOr<bool> EtcdBackend::Overwrite(const std::string& key,
                                            const mvccpb::KeyValue& kv,
                                            HoldValue value, int64_t lease) {
  value.write_id = NewWriteId();
  // The mod revision alone pins the key's generation too (etcd_client.h).
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() =
      CompareModRevision(key, etcdserverpb::Compare::EQUAL, kv.mod_revision());
  etcdserverpb::RequestOp put = PutOp(key, Encode(value), lease);
  if (lease == 0) put.mutable_request_put()->set_ignore_lease(true);
  *txn.add_success() = std::move(put);
  *txn.add_failure() = RangeOp(key);
  absl::StatusOr<etcdserverpb::TxnResponse> response =
      client_->Txn(txn, {.idempotent = true});
  if (!response.ok()) return response.status();
  if (response->succeeded()) return true;
  // A retry of ours whose first attempt committed finds our write there.
  const mvccpb::KeyValue* now = ReadKey(*response);
  if (now == nullptr) return false;
  std::optional<HoldValue> found = Decode(now->value());
  return found.has_value() && found->write_id == value.write_id;
}

absl::Status EtcdBackend::ReadyAttempt(absl::Duration lease, Acquiring& a) {
  if (absl::Status s = ReadySpare(lease, a); !s.ok()) return s;
  absl::StatusOr<std::optional<ClientLiveness::Record>> live =
      liveness_.ForGrant();
  if (!live.ok()) return live.status();
  a.live = *std::move(live);
  return absl::OkStatus();
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdBackend::SendCreate(
    const etcdserverpb::TxnRequest& txn, Acquiring& a) {
  absl::StatusOr<etcdserverpb::TxnResponse> response =
      client_->Txn(txn, {.idempotent = true});
  // Unanswered, it may have put a key on the spare lease.
  if (!response.ok()) a.spare_maybe_used = true;
  return response;
}

std::optional<Attempt> EtcdBackend::Won(const etcdserverpb::TxnResponse& put,
                                        Acquiring& a, uint64_t token) {
  // Idempotent: a retry that finds the key on our spare lease (unique to
  // this hold) knows that its first attempt created it.
  const mvccpb::KeyValue* kv = ReadKey(put);
  if (!put.succeeded() && (kv == nullptr || kv->lease() != a.spare->id)) {
    return std::nullopt;
  }
  const int64_t revision =
      put.succeeded() ? put.header().revision() : kv->create_revision();
  a.record = std::make_shared<EtcdHold>(revision, *a.spare, token);
  a.sent = a.spare->alive_until - a.spare->ttl;
  a.spare.reset();
  return Attempt{.acquired = Acquired{a.record->fencing_token(), 1}};
}

absl::StatusOr<Grant> EtcdBackend::AcquireOwnKey(
    const AcquireCall& call, absl::string_view wait_on,
    absl::FunctionRef<absl::StatusOr<Attempt>(const AcquireCall&, Acquiring&)>
        attempt) {
  const std::string object = HoldObjectName(call.shape, call.name, call.owner);
  const AcquireCall own = OnKey(call, object);
  if (call.held != nullptr) {
    // The core knows its hold (a semaphore's slots stay, C22).
    std::optional<absl::StatusOr<Grant>> again =
        ReenterKnown(own, layout_.Key(object), *EtcdHold::Of(call.held));
    if (again.has_value()) return *std::move(again);
  }
  Acquiring a;
  absl::StatusOr<Grant> grant =
      AcquireWithWakeups(call, wait_on, hub_, settings_.fallback_poll,
                         [&] { return Watched(attempt(own, a)); });
  PutSpareBack(call.lease, a);
  // A place (or intent) left behind would hold back every later caller.
  if (a.place_lease != 0) RevokeQuietly(a.place_lease);
  if (!grant.ok()) return grant.status();
  grant->slots = a.slots;
  return Granted(own, a, *std::move(grant));
}

}  // namespace dlock::etcd
