// Copyright dlock authors. Unit tests of how late the notifier has woken
// lately (core/src/wake_lateness.h), on a ManualClock: the peak is kept,
// fades by half every half-life, and a pause counts as at most a second.
#include "wake_lateness.h"

#include "dlock/clock.h"
#include "gtest/gtest.h"

namespace dlock::internal {
namespace {

TEST(WakeLatenessTest, ThePeakIsKeptAndFadesByHalfEachHalfLife) {
  ManualClock clock;
  WakeLateness lateness;
  EXPECT_EQ(lateness.Recent(clock.Now()), absl::ZeroDuration());
  const MonoTime planned = clock.Now();
  lateness.Observe(planned, planned + absl::Milliseconds(80));
  // A smaller lateness since does not lower it.
  lateness.Observe(planned, planned + absl::Milliseconds(5));
  const MonoTime peak_at = planned + absl::Milliseconds(80);
  EXPECT_EQ(lateness.Recent(peak_at), absl::Milliseconds(80));
  EXPECT_NEAR(absl::ToDoubleMilliseconds(
                  lateness.Recent(peak_at + WakeLateness::kHalfLife)),
              40, 0.01);
  EXPECT_LT(lateness.Recent(peak_at + 10 * WakeLateness::kHalfLife),
            absl::Milliseconds(1));
  // A larger one replaces it.
  const MonoTime later = peak_at + WakeLateness::kHalfLife;
  lateness.Observe(later, later + absl::Milliseconds(50));
  EXPECT_EQ(lateness.Recent(later + absl::Milliseconds(50)),
            absl::Milliseconds(50));
}

TEST(WakeLatenessTest, APauseCountsAsTheLongestLateness) {
  ManualClock clock;
  WakeLateness lateness;
  const MonoTime planned = clock.Now();
  lateness.Observe(planned, planned + absl::Hours(1));  // a suspend
  EXPECT_EQ(lateness.Recent(planned + absl::Hours(1)),
            WakeLateness::kLongestCounted);
}

TEST(WakeLatenessTest, ClientsOnTheRealClockShareOneAndOthersHaveTheirOwn) {
  EXPECT_EQ(WakeLateness::For(Clock::Real()), WakeLateness::For(Clock::Real()));
  ManualClock clock;
  EXPECT_NE(WakeLateness::For(clock), WakeLateness::For(clock));
  EXPECT_NE(WakeLateness::For(clock), WakeLateness::For(Clock::Real()));
}

}  // namespace
}  // namespace dlock::internal
