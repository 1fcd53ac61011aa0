// Copyright dlock authors. The numbers the client core lives by: the
// shortest lease, how often a failed renewal or release is tried again, the
// margin for clock drift in a hold's local deadline (C19), how early a loss
// is told (C20), and which answers mean that the backend has no hold.
#ifndef DLOCK_CORE_SRC_LEASE_POLICY_H_
#define DLOCK_CORE_SRC_LEASE_POLICY_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/duration.h"

namespace dlock::internal {

inline constexpr absl::Duration kMinLease = absl::Milliseconds(10);
// A renewal or release that failed for a transient reason is tried again
// this soon, or sooner for short leases (C7, C21).
inline constexpr absl::Duration kMaxRetry = absl::Seconds(1);
inline constexpr absl::Duration kMinRetry = absl::Milliseconds(5);

inline absl::Status ValidateLease(absl::Duration lease) {
  if (lease < kMinLease || lease > kLongestLease) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease must be ",
        DurationRangeText({.min = kMinLease, .max = kLongestLease}), ", not ",
        FormatDurationForPeople(lease)));
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

// What a backend answers when the owner does not hold the lock (any more).
inline bool IsGone(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) || absl::IsNotFound(status);
}

// A release of this many holds takes off all of them, whatever the count.
inline constexpr int64_t kAllHolds = int64_t{1} << 40;

// Default owners ("c:<client id>:<instance>:<thread>") belong to one client
// object of one process; explicit owner tokens ("t:...") may be shared.
inline bool IsThreadOwner(absl::string_view owner) {
  return owner.size() > 2 && owner[0] == 'c' && owner[1] == ':';
}

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_LEASE_POLICY_H_
