// Copyright dlock authors. The numbers the client core lives by: the
// shortest lease, how often a failed renewal or release is tried again, the
// margin for clock drift in a hold's local deadline (C19), how early a loss
// is told (C20), and which errors leave an operation's outcome unknown.
#ifndef DLOCK_CORE_SRC_LEASE_POLICY_H_
#define DLOCK_CORE_SRC_LEASE_POLICY_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace dlock::internal {

inline constexpr absl::Duration kMinLease = absl::Milliseconds(10);
// A renewal or release that failed for a transient reason is tried again
// this soon, or sooner for short leases (C7, C21).
inline constexpr absl::Duration kMaxRetry = absl::Seconds(1);
inline constexpr absl::Duration kMinRetry = absl::Milliseconds(5);

inline absl::Status ValidateLease(absl::Duration lease) {
  if (lease < kMinLease || lease == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease must be finite and at least ", absl::FormatDuration(kMinLease),
        ", not ", absl::FormatDuration(lease)));
  }
  return absl::OkStatus();
}

inline absl::Duration RetryEvery(absl::Duration lease) {
  return std::clamp(lease / 10, kMinRetry, kMaxRetry);
}

// How far the local clock may run slow against the backend's while a lease
// runs (C19): 1% of the lease plus 2 ms, as the Redlock algorithm allows.
inline absl::Duration DriftMargin(absl::Duration lease) {
  return lease / 100 + absl::Milliseconds(2);
}

// The notifier tells a loss this much before the local deadline, so that
// the notice precedes any other owner's grant even when the notifier's
// thread is scheduled late (C20).
inline absl::Duration NoticeLead(absl::Duration lease) {
  return std::min(lease / 20, absl::Milliseconds(20));
}

// Errors after which the request may still have run on the backend (a
// reply lost or too late). A wait that ran out is not one: its last attempt
// was answered.
inline bool MayHaveHappened(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsUnknown(status);
}

inline bool IsGone(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) || absl::IsNotFound(status);
}

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_LEASE_POLICY_H_
