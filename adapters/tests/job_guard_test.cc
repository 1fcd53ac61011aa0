// The scheduled-job guard: at most once per slot across nodes, with
// lock_at_most_for and lock_at_least_for, with in-process nodes on
// memory://. Separate processes: job_guard_backends_test.cc.
#include "dlock/adapters/job_guard.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

std::string UniqueUri() {
  static std::atomic<int> n{0};
  return absl::StrCat("memory://job-", getpid(), "-", n++);
}

std::unique_ptr<LockClient> MustConnect(const std::string& uri) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

JobOutcome RunOn(ScheduledJobGuard& guard, const JobOptions& options,
                 std::atomic<int>& runs, absl::Duration job_time) {
  absl::StatusOr<JobResult> result =
      guard.Run("nightly-report", options, [&](const JobContext& context) {
        EXPECT_GT(context.fencing_token, 0u);
        ++runs;
        absl::SleepFor(job_time);
        return absl::OkStatus();
      });
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok() && result->outcome == JobOutcome::kRan) {
    EXPECT_TRUE(result->lock_status.ok()) << result->lock_status;
  }
  return result.ok() ? result->outcome : JobOutcome::kSkippedRunning;
}

TEST(JobGuardTest, FiveNodesInOneSlotRunTheJobOnce) {
  const std::string uri = UniqueUri();
  std::vector<std::unique_ptr<LockClient>> clients;
  std::vector<std::unique_ptr<ScheduledJobGuard>> guards;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(MustConnect(uri));
    guards.push_back(std::make_unique<ScheduledJobGuard>(*clients.back()));
  }
  const JobOptions options{.lock_at_most_for = absl::Seconds(10),
                           .lock_at_least_for = absl::Seconds(2),
                           .slot = "2026-11-22T01:00Z"};
  std::atomic<int> runs{0};
  std::vector<std::thread> nodes;
  for (int i = 0; i < 5; ++i) {
    nodes.emplace_back(
        [&, i] { RunOn(*guards[i], options, runs, absl::Milliseconds(100)); });
  }
  for (std::thread& t : nodes) t.join();
  EXPECT_EQ(runs.load(), 1);
}

TEST(JobGuardTest, AFastRunKeepsTheSlotClosedForLockAtLeastFor) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> a = MustConnect(uri), b = MustConnect(uri);
  ScheduledJobGuard node_a(*a), node_b(*b);
  const JobOptions options{.lock_at_most_for = absl::Seconds(30),
                           .lock_at_least_for = absl::Milliseconds(1500)};
  std::atomic<int> runs{0};
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunOn(node_a, options, runs, absl::Milliseconds(10)),
            JobOutcome::kRan);
  // Node B, whose clock says the slot is due again, comes right after.
  EXPECT_EQ(RunOn(node_b, options, runs, absl::ZeroDuration()),
            JobOutcome::kSkippedRecentlyRan);
  EXPECT_EQ(runs.load(), 1);
  // Not held until lock_at_most_for: free once lock_at_least_for is over.
  absl::SleepFor(start + absl::Milliseconds(1600) - absl::Now());
  EXPECT_EQ(RunOn(node_b, options, runs, absl::ZeroDuration()),
            JobOutcome::kRan);
  EXPECT_EQ(runs.load(), 2);
}

TEST(JobGuardTest, WithoutLockAtLeastForAFinishedJobCanRunAgain) {
  std::unique_ptr<LockClient> a = MustConnect(UniqueUri());
  ScheduledJobGuard guard(*a);
  const JobOptions options{.lock_at_most_for = absl::Seconds(30)};
  std::atomic<int> runs{0};
  EXPECT_EQ(RunOn(guard, options, runs, absl::ZeroDuration()),
            JobOutcome::kRan);
  EXPECT_EQ(RunOn(guard, options, runs, absl::ZeroDuration()),
            JobOutcome::kRan);
}

TEST(JobGuardTest, ACrashedNodeBlocksTheJobForLockAtMostForOnly) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> crashed = MustConnect(uri), b = MustConnect(uri);
  // The crashed node took the run lock as the guard would and never came back.
  absl::StatusOr<std::unique_ptr<DistributedLock>> run =
      crashed->GetLock(JobRunLockName("nightly-report", "s1"));
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE((*run)
                  ->Acquire({.wait = absl::ZeroDuration(),
                             .lease = absl::Milliseconds(300),
                             .owner_token = "crashed-node"})
                  .ok());
  ScheduledJobGuard guard(*b);
  const JobOptions options{.lock_at_most_for = absl::Milliseconds(300),
                           .slot = "s1"};
  std::atomic<int> runs{0};
  EXPECT_EQ(RunOn(guard, options, runs, absl::ZeroDuration()),
            JobOutcome::kSkippedRunning);
  absl::SleepFor(absl::Milliseconds(350));
  EXPECT_EQ(RunOn(guard, options, runs, absl::ZeroDuration()),
            JobOutcome::kRan);
}

TEST(JobGuardTest, AJobOutlivingLockAtMostForIsCancelled) {
  std::unique_ptr<LockClient> a = MustConnect(UniqueUri());
  ScheduledJobGuard guard(*a);
  absl::StatusOr<JobResult> result = guard.Run(
      "slow", {.lock_at_most_for = absl::Milliseconds(100)},
      [](const JobContext& context) {
        absl::Notification cancelled;
        ScopedCancelCallback on_cancel(context.cancel,
                                       [&] { cancelled.Notify(); });
        EXPECT_TRUE(cancelled.WaitForNotificationWithTimeout(absl::Seconds(5)));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->outcome, JobOutcome::kRan);
  // The run lock expired under the job: reported, not hidden.
  EXPECT_EQ(result->lock_status.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobGuardTest, BadOptionsRunNothing) {
  std::unique_ptr<LockClient> a = MustConnect(UniqueUri());
  ScheduledJobGuard guard(*a);
  bool ran = false;
  auto job = [&](const JobContext&) {
    ran = true;
    return absl::OkStatus();
  };
  EXPECT_EQ(guard.Run("j", {}, job).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(guard
                .Run("j",
                     {.lock_at_most_for = absl::Seconds(1),
                      .lock_at_least_for = absl::Seconds(2)},
                     job)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(guard.Run("", {.lock_at_most_for = absl::Seconds(1)}, job)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace dlock
