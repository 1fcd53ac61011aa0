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
  const MonoTime sent = clock.Now();
  absl::StatusOr<absl::Duration> ttl =
      client.leases().KeepAliveOnce(lease, deadline);
  if (!ttl.ok()) return ttl.status();
  return LeaseState{.id = lease, .ttl = *ttl, .alive_until = sent + *ttl};
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

absl::StatusOr<bool> EtcdBackend::Overwrite(const std::string& key,
                                            const mvccpb::KeyValue& kv,
                                            HoldValue value, int64_t lease) {
  value.write_id = NewWriteId();
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = CompareCreateRevision(key, etcdserverpb::Compare::EQUAL,
                                             kv.create_revision());
  etcdserverpb::Compare& mod = *txn.add_compare();
  mod.set_key(key);
  mod.set_target(etcdserverpb::Compare::MOD);
  mod.set_result(etcdserverpb::Compare::EQUAL);
  mod.set_mod_revision(kv.mod_revision());
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

}  // namespace dlock::etcd
