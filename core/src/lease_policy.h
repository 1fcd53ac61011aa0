// Copyright dlock authors. The numbers the client core lives by besides the
// rules it shares with backends (dlock/backend/rules.h): how often a failed
// renewal or release is tried again, and how early a loss is told (C20).
#ifndef DLOCK_CORE_SRC_LEASE_POLICY_H_
#define DLOCK_CORE_SRC_LEASE_POLICY_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/backend/rules.h"
#include "dlock/duration.h"

namespace dlock::internal {

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

// The notifier tells a loss this much before the local deadline, so that
// the notice precedes any other owner's grant even when the notifier's
// thread is scheduled late (C20): a fixed part, plus as much as the notifier
// has lately woken late (`lateness`, WakeLateness::Recent()). That part is
// bounded by a quarter of `span`, the shortest time over which the hold's
// deadline is renewed (its lease, or the liveness TTL where shorter), so
// that a renewal or heartbeat still comes well before the notice time and a
// hold keeps most of its lease however slow the scheduler: a thread stalled
// longer than the lead is told late, and only fencing (C8) covers that.
inline absl::Duration NoticeLead(absl::Duration lease, absl::Duration lateness,
                                 absl::Duration span) {
  const absl::Duration fixed = std::min(lease / 20, absl::Milliseconds(20));
  return std::max(fixed, std::min(fixed + lateness, span / 4));
}

// A final release whose hold has more than this left before its notice
// time is sent on the caller's thread, with no hand-off: the backends' call
// timeouts (operation_timeout; by default 5 s or less, but ZooKeeper's
// session timeout, 10 s) end it sooner. One closer to its deadline is sent
// on a helper thread, so that its caller is answered at the deadline. Either
// way the hold is told lost at the deadline if no confirmation came (C20).
inline constexpr absl::Duration kInlineReleaseHorizon = absl::Seconds(5);

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_LEASE_POLICY_H_
