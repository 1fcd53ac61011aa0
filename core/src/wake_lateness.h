// Copyright dlock authors. How late a client's notifier thread has woken
// lately against the moments it planned to look (C20): under load the
// scheduler may run it tens of milliseconds late, or more, and a notice
// timed from a fixed lead would then come after the server could grant the
// lock to another. The notifier times its notices that much sooner
// (NoticeLead), within a bound.
#ifndef DLOCK_CORE_SRC_WAKE_LATENESS_H_
#define DLOCK_CORE_SRC_WAKE_LATENESS_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/clock.h"

namespace dlock::internal {

// The largest lateness seen, halving every kHalfLife since: a burst of load
// is remembered across many leases' notices, and its cost (notices sooner,
// explicit leases believed for less) fades within a few minutes of its end.
// Thread-safe.
class WakeLateness {
 public:
  static constexpr absl::Duration kHalfLife = absl::Seconds(30);
  // A longer gap is a pause (a stopped process, a suspended machine) that
  // no lead can cover; counted as this much, so that it does not cut holds
  // short for minutes after.
  static constexpr absl::Duration kLongestCounted = absl::Seconds(1);

  // The one for clients on `clock`. Those on Clock::Real() share one, as
  // they share the scheduler: a client that has not waited yet learns from
  // the others. A client on another clock (a test's) has its own.
  static std::shared_ptr<WakeLateness> For(const Clock& clock);

  // A wait planned to end at `planned` ended, by its deadline, at `woke`.
  void Observe(MonoTime planned, MonoTime woke) ABSL_LOCKS_EXCLUDED(mu_);
  // The lateness to plan for at `now`.
  absl::Duration Recent(MonoTime now) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Duration RecentLocked(MonoTime now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::Duration peak_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  MonoTime peak_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_WAKE_LATENESS_H_
