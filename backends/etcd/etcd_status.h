// Copyright dlock authors. What a failed etcd call means: gRPC's status and
// etcd's error text ("etcdserver: ...") read into what the client does next
// (try another endpoint, authenticate again, give up) and into the
// absl::Status the caller gets, naming the endpoint.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_STATUS_H_
#define DLOCK_BACKENDS_ETCD_ETCD_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dlock::etcd {

// The payload (absl::Status::GetPayload) that marks an Unavailable error of
// a write that may have been applied; IsOutcomeUnknown() reads it.
inline constexpr absl::string_view kOutcomeUnknownPayloadUrl =
    "type.dlock.dev/dlock.etcd.OutcomeUnknown";

// True when `status` is the failure of a call that may have taken effect on
// the server although no reply said so: a lost reply, a deadline, etcd's
// "request timed out" or "leader changed". Always Unavailable.
bool IsOutcomeUnknown(const absl::Status& status);

// `status` (Unavailable) marked as of unknown outcome, its message saying
// that the call may have been applied.
absl::Status OutcomeUnknown(absl::Status status);

// What one attempt's failure means for the call it belongs to.
enum class AttemptFailure {
  // etcd refused it before it could be applied ("no leader", "too many
  // requests"), or it never left: another endpoint may serve it.
  kNotApplied,
  // It may have been applied (the reply was lost, the deadline passed,
  // "request timed out", "leader changed"): only a call that is safe to
  // repeat may be retried.
  kMaybeApplied,
  // The auth token expired or the member forgot it (a restart): authenticate
  // again and retry; etcd checks the token before applying anything.
  kBadToken,
  // etcd's answer (permission denied, lease not found, a compacted
  // revision, a bad argument): give it to the caller.
  kFinal,
};

struct ClassifiedFailure {
  AttemptFailure kind;
  // The error for the caller: the code etcd meant, the message naming the
  // endpoint and the call ("etcd 127.0.0.1:2379: Txn: etcdserver: ...").
  absl::Status status;
};

// Reads a failed attempt (`status` not OK) of `method` at `endpoint`.
ClassifiedFailure ClassifyFailure(const grpc::Status& status,
                                  absl::string_view endpoint,
                                  absl::string_view method);

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_STATUS_H_
