// Copyright dlock authors. What every history scenario must show once its
// faults healed, for the test files that share it.
#ifndef DLOCK_TESTS_HISTORY_HISTORY_EXPECT_H_
#define DLOCK_TESTS_HISTORY_HISTORY_EXPECT_H_

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "history_checker.h"

namespace dlock::test {

// No two believers, the fence kept, tokens in order, every loss told once
// and in time, clean exits, and every worker back within `all_back_within`
// of the heal. `paused`: a worker was stopped in the middle of its
// read-modify-write of the unfenced counter, which it finishes after its
// lease (only the fence can stop that).
inline void ExpectContractKept(const HistoryReport& report, bool paused,
                               absl::Duration all_back_within) {
  EXPECT_EQ(report.overlaps, 0) << report.Summary();
  EXPECT_EQ(report.stale_writes_accepted, 0) << report.Summary();
  EXPECT_EQ(report.unfenced_writes_accepted, 0) << report.Summary();
  EXPECT_EQ(report.token_regressions, 0) << report.Summary();
  EXPECT_EQ(report.notices_late, 0) << report.Summary();
  EXPECT_EQ(report.notices_repeated, 0) << report.Summary();
  if (!paused) {
    EXPECT_EQ(report.lost_updates, 0) << report.Summary();
  }
  EXPECT_TRUE(report.exit_problems.empty()) << report.Summary();
  EXPECT_TRUE(report.AllBackAfterHeal())
      << "a worker never held again after the fault: " << report.Summary();
  EXPECT_LT(report.all_granted_after_heal_ns,
            absl::ToInt64Nanoseconds(all_back_within))
      << report.Summary();
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_HISTORY_EXPECT_H_
