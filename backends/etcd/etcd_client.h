// Copyright dlock authors. The etcd v3 client dlock's etcd backend runs on:
// the KV calls (Range, Put, DeleteRange, Txn), leases (Grant, Revoke,
// TimeToLive, and a keepalive stream: etcd_lease_keeper.h) and watches
// (etcd_watch.h), over gRPC with protocol definitions of dlock's own
// (proto/), against every member of a cluster in turn.
//
// Errors are absl::Status naming the endpoint and the call, never the
// password. A call goes to one member at a time and moves to the next when
// the member cannot be reached or has no leader; reads are retried until
// their deadline. A member is asked only once connected, so a member that
// could not be reached never got the request.
//
// RETRYING WRITES. A write whose reply was lost may have been applied
// (etcd's "request timed out" and "leader changed" mean the same, and so
// does a deadline): retrying it blindly may apply it twice, and reporting it
// failed may be wrong when it committed (Jepsen's analysis of jetcd, 2024).
// So a write is retried after such a failure only if the caller says it is
// idempotent (CallOptions::idempotent); otherwise the call ends with
// Unavailable, IsOutcomeUnknown() true, and the caller decides. Making a
// write idempotent is the caller's work, by this rule:
//   1. Guard it with a compare that its own first application falsifies,
//      on a value only this attempt writes:
//        create: Compare(CREATE, key) == 0, then Put(key, unique value);
//        change or delete of a key you created at revision R:
//          Compare(CREATE, key) == R (and the value, if others may write
//          it), then Put or Delete;
//        change or delete of the write of a key you read at mod revision
//          M: Compare(MOD, key) == M alone, then Put or Delete (a mod
//          revision names one write of one generation of the key: etcd
//          writes a key once per revision, and revisions only grow).
//      Never guard a delete by the value alone: the same owner may have
//      created the key again since (etcd #22082).
//   2. Put a Range of the key in `failure`, so that a retry that finds the
//      guard false shows what the first attempt did: the key with your
//      unique value (and lease) means your create committed; for a delete
//      guarded by CREATE == R, a key that is absent or has another create
//      revision means yours is gone.
//   3. Read `succeeded` with that in mind: a retried idempotent write may
//      answer succeeded=false for a first attempt that committed.
// Put and DeleteRange have no guard: a retried Put may overwrite a newer
// value, a retried DeleteRange may delete a newer key. Send them with
// idempotent=true only when that cannot matter. LeaseRevoke is idempotent
// by nature and always retried (a lease revoked twice is gone either way).
#ifndef DLOCK_BACKENDS_ETCD_ETCD_CLIENT_H_
#define DLOCK_BACKENDS_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd_kv.pb.h"
#include "etcd_options.h"
#include "etcd_rpc.pb.h"
#include "etcd_status.h"
#include "etcd_watch.h"

namespace dlock::etcd {

class Endpoints;
class LeaseKeeper;
struct CallSpec;

// The client's deadlines and schedules are points on the core's clock
// (Clock::Real(), dlock/clock.h), carried as absl::Time, so that a step of
// the wall clock neither expires them at once nor delays them an hour.
absl::Time MonotonicNow();

struct CallOptions {
  // When the call gives up, from MonotonicNow(); InfinitePast(): now +
  // ClientOptions::call_timeout.
  absl::Time deadline = absl::InfinitePast();
  // For writes: true when a retry after a lost reply cannot apply it twice
  // and its answer tells what the first attempt did (RETRYING WRITES above).
  bool idempotent = false;
  // When not null, Txn sets it to how many times it sent the request: more
  // than one, and an earlier one may have been applied.
  int* sends = nullptr;
};

// Thread-safe. Calls block the calling thread until their answer or their
// deadline.
class Client {
 public:
  // InvalidArgument for options that cannot work (no endpoint, a TLS file
  // that cannot be read). Connects lazily: a cluster that is down fails the
  // first call, not this.
  static absl::StatusOr<std::unique_ptr<Client>> Create(
      const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientOptions& options() const;

  // Reads; retried across endpoints until the deadline. Linearizable
  // unless the request asks for a serializable read.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(
      const etcdserverpb::RangeRequest& request, CallOptions call = {});
  // Writes (RETRYING WRITES above).
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(
      const etcdserverpb::TxnRequest& request, CallOptions call = {});
  absl::StatusOr<etcdserverpb::PutResponse> Put(
      const etcdserverpb::PutRequest& request, CallOptions call = {});
  absl::StatusOr<etcdserverpb::DeleteRangeResponse> DeleteRange(
      const etcdserverpb::DeleteRangeRequest& request, CallOptions call = {});

  // A lease of `ttl` (whole seconds, at least 1 s; etcd may raise it to its
  // minimum). A grant retried after a lost reply would leave an unused
  // lease that expires by itself, so grants are retried.
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> LeaseGrant(
      absl::Duration ttl, CallOptions call = {});
  // Ends the lease and deletes its keys. NotFound when etcd does not know
  // the lease at the first try; OK when a retry finds it gone.
  absl::Status LeaseRevoke(int64_t lease, CallOptions call = {});
  // What etcd knows of the lease: TTL -1 when it is gone.
  absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> LeaseTimeToLive(
      int64_t lease, bool with_keys = false, CallOptions call = {});

  // The status of the member that answers: its version and database size.
  absl::StatusOr<etcdserverpb::StatusResponse> Status(CallOptions call = {});

  // The client's one keepalive stream, started on first use.
  LeaseKeeper& leases();

  // A watch of `spec` calling `on_update` from a thread of its own until it
  // is cancelled (etcd_watch.h). It may outlive the client.
  std::unique_ptr<Watch> StartWatch(const WatchSpec& spec,
                                    Watch::Callback on_update);

 private:
  explicit Client(std::unique_ptr<Endpoints> endpoints);
  absl::Time Deadline(const CallOptions& call) const;
  CallSpec WriteSpec(absl::string_view method, const CallOptions& call) const;

  // Shared with the watches, which may outlive the client.
  std::shared_ptr<Endpoints> endpoints_;
  absl::Mutex mu_;
  std::unique_ptr<LeaseKeeper> keeper_ ABSL_GUARDED_BY(mu_);
};

// Builders of the requests a lock recipe sends.

// The end of the range of every key that starts with `prefix`.
std::string PrefixEnd(absl::string_view prefix);

etcdserverpb::Compare CompareCreateRevision(
    absl::string_view key, etcdserverpb::Compare::CompareResult result,
    int64_t revision);
etcdserverpb::Compare CompareModRevision(
    absl::string_view key, etcdserverpb::Compare::CompareResult result,
    int64_t revision);
etcdserverpb::Compare CompareValue(absl::string_view key,
                                   etcdserverpb::Compare::CompareResult result,
                                   absl::string_view value);
etcdserverpb::RequestOp PutOp(absl::string_view key, absl::string_view value,
                              int64_t lease = 0);
etcdserverpb::RequestOp DeleteOp(absl::string_view key);
etcdserverpb::RequestOp RangeOp(absl::string_view key);

// The create-if-absent of rule 1 above: puts `value` (with `lease`) at `key`
// if the key does not exist; otherwise reads it.
etcdserverpb::TxnRequest CreateIfAbsent(absl::string_view key,
                                        absl::string_view value,
                                        int64_t lease = 0);
// Deletes `key` if it still has the create revision `create_revision`;
// otherwise reads it.
etcdserverpb::TxnRequest DeleteIfCreatedAt(absl::string_view key,
                                           int64_t create_revision);
// Deletes `key` if it is still the write at `mod_revision` (rule 1: one
// compare, which also pins the key's generation); otherwise reads it.
etcdserverpb::TxnRequest DeleteIfWrittenAt(absl::string_view key,
                                           int64_t mod_revision);

// The key a txn's first response read (a Range in `failure`), if any.
const mvccpb::KeyValue* ReadKey(const etcdserverpb::TxnResponse& response);

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_CLIENT_H_
