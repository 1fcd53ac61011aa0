#include "wake_lateness.h"

#include <algorithm>
#include <cmath>

namespace dlock::internal {

std::shared_ptr<WakeLateness> WakeLateness::For(const Clock& clock) {
  if (&clock != &Clock::Real()) return std::make_shared<WakeLateness>();
  static auto* shared =  // never destroyed, as Clock::Real()
      new std::shared_ptr<WakeLateness>(std::make_shared<WakeLateness>());
  return *shared;
}

void WakeLateness::Observe(MonoTime planned, MonoTime woke) {
  const absl::Duration late = std::min(woke - planned, kLongestCounted);
  absl::MutexLock lock(&mu_);
  if (late > RecentLocked(woke)) {
    peak_ = late;
    peak_at_ = woke;
  }
}

absl::Duration WakeLateness::Recent(MonoTime now) const {
  absl::MutexLock lock(&mu_);
  return RecentLocked(now);
}

absl::Duration WakeLateness::RecentLocked(MonoTime now) const {
  if (peak_ <= absl::ZeroDuration()) return absl::ZeroDuration();
  // Another thread may have seen a later peak than `now` first.
  const absl::Duration since = std::max(now - peak_at_, absl::ZeroDuration());
  return peak_ * std::exp2(-absl::FDivDuration(since, kHalfLife));
}

}  // namespace dlock::internal
