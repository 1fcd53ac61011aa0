// The scheduled-job guard: at most once per slot across nodes, with
// lock_at_most_for and lock_at_least_for, with in-process nodes on
// memory://. Separate processes: job_guard_backends_test.cc.
#include "dlock/adapters/job_guard.h"

#include <atomic>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "fault_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

std::string UniqueUri() {
  static std::atomic<int> n{0};
  return absl::StrCat("memory://job-", getpid(), "-", n++);
}

std::unique_ptr<LockClient> MustConnect(const std::string& uri) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  EXPECT_OK(client);
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
  EXPECT_OK(result);
  if (result.ok() && result->outcome == JobOutcome::kRan) {
    EXPECT_OK(result->lock_status);
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

// The cron case: the guard is made for one run and the node's process
// closes its client right after it (and would exit); the slot stays
// closed, with no waiting.
TEST(JobGuardTest, ClosingTheClientRightAfterTheRunKeepsTheSlotClosed) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> a = MustConnect(uri), b = MustConnect(uri);
  const JobOptions options{.lock_at_most_for = absl::Seconds(30),
                           .lock_at_least_for = absl::Milliseconds(1500)};
  std::atomic<int> runs{0};
  const absl::Time start = absl::Now();
  {
    ScheduledJobGuard once(*a);
    absl::StatusOr<JobResult> result =
        once.Run("nightly-report", options, [&](const JobContext&) {
          ++runs;
          return absl::OkStatus();
        });
    ASSERT_OK(result);
    EXPECT_EQ(result->outcome, JobOutcome::kRan);
    EXPECT_OK(result->lock_status);
    EXPECT_GE(result->kept_until, start + options.lock_at_least_for);
  }
  ASSERT_OK(a->Close());
  EXPECT_LT(absl::Now() - start, options.lock_at_least_for)
      << "the run waited for its keep";
  ScheduledJobGuard node_b(*b);
  EXPECT_EQ(RunOn(node_b, options, runs, absl::ZeroDuration()),
            JobOutcome::kSkippedRecentlyRan);
  EXPECT_EQ(runs.load(), 1);
  absl::SleepFor(start + absl::Milliseconds(1600) - absl::Now());
  EXPECT_EQ(RunOn(node_b, options, runs, absl::ZeroDuration()),
            JobOutcome::kRan);
  EXPECT_EQ(runs.load(), 2);
}

// Skipped because another node runs the job now, or because it ran
// recently: two outcomes, told apart.
TEST(JobGuardTest, RunningElsewhereAndRecentlyRanAreToldApart) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> a = MustConnect(uri), b = MustConnect(uri);
  ScheduledJobGuard node_a(*a), node_b(*b);
  const JobOptions options{.lock_at_most_for = absl::Seconds(30),
                           .lock_at_least_for = absl::Seconds(30)};
  std::atomic<int> runs{0};
  absl::Notification started, finish;
  std::thread running([&] {
    absl::StatusOr<JobResult> result =
        node_a.Run("nightly-report", options, [&](const JobContext&) {
          ++runs;
          started.Notify();
          finish.WaitForNotification();
          return absl::OkStatus();
        });
    EXPECT_TRUE(result.ok() && result->outcome == JobOutcome::kRan);
  });
  started.WaitForNotification();
  EXPECT_EQ(RunOn(node_b, options, runs, absl::ZeroDuration()),
            JobOutcome::kSkippedRunning);
  finish.Notify();
  running.join();
  EXPECT_EQ(RunOn(node_b, options, runs, absl::ZeroDuration()),
            JobOutcome::kSkippedRecentlyRan);
  EXPECT_EQ(runs.load(), 1);
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
  // The crashed node took the run lock as the guard would and never came back
  // (its Hold is never released).
  absl::StatusOr<std::unique_ptr<DistributedLock>> run =
      crashed->GetLock(JobRunLockName("nightly-report", "s1"));
  ASSERT_OK(run);
  absl::StatusOr<Hold> never_released =
      (*run)->Acquire({.wait = absl::ZeroDuration(),
                       .lease = absl::Milliseconds(300),
                       .owner_token = "crashed-node"});
  ASSERT_OK(never_released);
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
  ASSERT_OK(result);
  EXPECT_EQ(result->outcome, JobOutcome::kRan);
  // The run lock expired under the job: reported, not hidden.
  EXPECT_EQ(result->lock_status.code(), absl::StatusCode::kFailedPrecondition);
}

// A run lock lost before lock_at_most_for (here: the client's liveness
// record is not confirmed, so a waiter elsewhere may take the lock over)
// cancels the job's context then, not an hour later.
TEST(JobGuardTest, AJobWhoseRunLockIsLostSoonerIsCancelledThen) {
  auto faults = std::make_shared<test::FaultPlan>();
  faults->EmulateLivenessRecord();
  ClientOptions options;
  options.liveness_ttl = absl::Milliseconds(300);
  options.backend_decorator = faults->Decorator();
  absl::StatusOr<std::unique_ptr<LockClient>> a = Connect(UniqueUri(), options);
  ASSERT_OK(a);
  ScheduledJobGuard guard(**a);
  absl::Time lapsed;
  absl::StatusOr<JobResult> result = guard.Run(
      "lapsed", {.lock_at_most_for = absl::Hours(1)},
      [&](const JobContext& context) {
        absl::Notification cancelled;
        ScopedCancelCallback on_cancel(context.cancel,
                                       [&] { cancelled.Notify(); });
        lapsed = absl::Now();
        faults->Set(test::FaultPlan::kLiveness, {.fail_before = true});
        EXPECT_TRUE(
            cancelled.WaitForNotificationWithTimeout(absl::Seconds(30)));
        return absl::OkStatus();
      });
  ASSERT_OK(result);
  EXPECT_EQ(result->outcome, JobOutcome::kRan);
  EXPECT_LT(absl::Now() - lapsed, absl::Seconds(30));
  EXPECT_TRUE(IsLost(result->lock_status)) << result->lock_status;
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
  // Not even with a slot, which would otherwise make a lock name.
  EXPECT_EQ(
      guard.Run("", {.lock_at_most_for = absl::Seconds(1), .slot = "s"}, job)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ran);
}

// The lock names encode (job, slot, role) with '@' and '#' as separators,
// so a job named like another job's slot or marker must not share its locks.
absl::StatusOr<JobResult> RunJob(ScheduledJobGuard& guard,
                                 absl::string_view job, absl::string_view slot,
                                 std::vector<std::string>& ran) {
  return guard.Run(
      job,
      {.lock_at_most_for = absl::Seconds(30),
       .lock_at_least_for = absl::Seconds(30),
       .slot = std::string(slot)},
      [&](const JobContext& context) {
        ran.push_back(absl::StrCat(context.job_name, "|", context.slot));
        return absl::OkStatus();
      });
}

TEST(JobGuardTest, JobsNamedLikeASlotOrAMarkerAreDistinctJobs) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> cases = {
      // Job "x" ran recently (its run key is kept); job "x#ran" is another.
      {{"x", ""}, {"x#ran", ""}},
      {{"x#ran", ""}, {"x", ""}},
      // Job "a" in slot "b", and job "a@b" without a slot.
      {{"a", "b"}, {"a@b", ""}},
      {{"a@b", ""}, {"a", "b"}},
      // ...and the same with the names of the former markers.
      {{"a", "b"}, {"a", "b#ran"}},
      {{"a", "b"}, {"a@b#ran", ""}},
      {{"a%40b", ""}, {"a@b", ""}},
  };
  for (const auto& jobs : cases) {
    // Two nodes, so that neither reuses the other's holds.
    const std::string uri = UniqueUri();
    std::unique_ptr<LockClient> a = MustConnect(uri), b = MustConnect(uri);
    ScheduledJobGuard node_a(*a), node_b(*b);
    std::vector<std::string> ran;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto& [job, slot] = jobs[i];
      absl::StatusOr<JobResult> result =
          RunJob(i % 2 == 0 ? node_a : node_b, job, slot, ran);
      ASSERT_OK(result) << job << "|" << slot;
      EXPECT_EQ(result->outcome, JobOutcome::kRan)
          << "job '" << job << "' slot '" << slot << "' after " << jobs[0].first
          << "|" << jobs[0].second << ": skipped as "
          << (result->outcome == JobOutcome::kSkippedRunning ? "running"
                                                             : "recently ran");
    }
    EXPECT_EQ(ran.size(), jobs.size());
  }
}

TEST(JobLockNames, AreDistinctForEveryJobAndSlot) {
  const std::vector<std::string> parts = {
      "",      "a",       "b",   "x",         "ran", "#ran", "a@b",
      "b#ran", "a@b#ran", "@",   "#",         "%",   "%25",  "%40",
      "%23",   "a%40b",   "a%b", "x#ran#ran", "@@",  "a@",   "@b",
      "%4",    "a@b@c",   "锁",  "锁@锁",     "a/b", " ",    "x#",
  };
  // name -> "job|slot" of the first (job, slot) that produced it.
  std::map<std::string, std::string> seen;
  int names = 0;
  for (const std::string& job : parts) {
    if (job.empty()) continue;  // a job needs a name
    for (const std::string& slot : parts) {
      const std::string who = absl::StrCat(job, "|", slot);
      const std::string name = JobRunLockName(job, slot);
      ++names;
      auto [it, inserted] = seen.emplace(name, who);
      EXPECT_TRUE(inserted) << "'" << name << "' is the run lock of " << who
                            << " and of " << it->second;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(names));
}

TEST(JobLockNames, PlainNamesAreUnchanged) {
  EXPECT_EQ(JobRunLockName("nightly", ""), "nightly");
  EXPECT_EQ(JobRunLockName("invoice-run", "2026-11-22"),
            "invoice-run@2026-11-22");
  EXPECT_EQ(JobRunLockName("reports/daily 锁", "slot/1"),
            "reports/daily 锁@slot/1");
  // Only the separators (and the escape character) are escaped.
  EXPECT_EQ(JobRunLockName("a@b", "c#d"), "a%40b@c%23d");
  EXPECT_EQ(JobRunLockName("100%", "x#ran"), "100%25@x%23ran");
}

TEST(JobGuardTest, ANameTooLongOnceEscapedIsRejectedNamingTheJob) {
  std::unique_ptr<LockClient> client = MustConnect(UniqueUri());
  ScheduledJobGuard guard(*client);
  bool ran = false;
  auto job = [&](const JobContext&) {
    ran = true;
    return absl::OkStatus();
  };
  const JobOptions options{.lock_at_most_for = absl::Seconds(1)};
  // 200 bytes, but 600 once every '@' is escaped.
  const std::string ats = "mail@" + std::string(195, '@');
  // 513 plain bytes.
  const std::string plain = "report-" + std::string(506, 'x');
  for (const auto& [name, slot] :
       std::vector<std::pair<std::string, std::string>>{
           {ats, ""}, {plain, ""}, {"report-x", std::string(600, 's')}}) {
    JobOptions with_slot = options;
    with_slot.slot = slot;
    absl::StatusOr<JobResult> result = guard.Run(name, with_slot, job);
    ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << name.size() << " bytes: " << result.status();
    const std::string message(result.status().message());
    EXPECT_THAT(message,
                ::testing::HasSubstr(absl::StrCat("job '", name.substr(0, 7))));
    EXPECT_THAT(message, ::testing::HasSubstr("512"));
    EXPECT_THAT(message,
                ::testing::HasSubstr(slot.empty() ? "job name" : "slot"));
  }
  EXPECT_FALSE(ran);
  // The longest name that fits still runs: its run lock is exactly 512
  // bytes.
  const std::string longest(512, 'y');
  absl::StatusOr<JobResult> fits = guard.Run(longest, options, job);
  ASSERT_OK(fits);
  EXPECT_EQ(fits->outcome, JobOutcome::kRan);
  EXPECT_EQ(JobRunLockName(longest, "").size(), 512u);
}

// Issue 19 (section 6): a scheduled run that meets a failover rides it out
// for JobOptions::ride_out, so the slot still runs somewhere; a backend down
// for longer, or past the slot's end, gives Unavailable with nothing run.
class JobRideOutTest : public ::testing::Test {
 protected:
  JobRideOutTest() {
    ClientOptions options;
    options.backend_decorator = faults_->Decorator();
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(UniqueUri(), options);
    EXPECT_OK(client);
    client_ = *std::move(client);
  }
  absl::StatusOr<JobResult> Run(const JobOptions& options) {
    ScheduledJobGuard guard(*client_);
    return guard.Run("failing-over", options, [this](const JobContext&) {
      ++runs_;
      return absl::OkStatus();
    });
  }

  std::shared_ptr<test::FaultPlan> faults_ =
      std::make_shared<test::FaultPlan>();
  std::unique_ptr<LockClient> client_;
  int runs_ = 0;
};

TEST_F(JobRideOutTest, AFailoverIsRiddenOutAndTheJobRuns) {
  faults_->Set(test::FaultPlan::kAcquire, {.fail_before = true, .times = 3});
  absl::StatusOr<JobResult> result =
      Run({.lock_at_most_for = absl::Seconds(10)});
  ASSERT_OK(result);
  EXPECT_EQ(result->outcome, JobOutcome::kRan);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(faults_->calls(test::FaultPlan::kAcquire), 4);
}

TEST_F(JobRideOutTest, DownForLongerThanRideOutIsUnavailableAndRunsNothing) {
  faults_->Set(test::FaultPlan::kAcquire, {.fail_before = true});
  const absl::Time start = absl::Now();
  absl::StatusOr<JobResult> result = Run({.lock_at_most_for = absl::Seconds(10),
                                          .ride_out = absl::Milliseconds(400)});
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(result.status())) << result.status();
  EXPECT_NE(result.status().message().find("stayed unavailable"),
            absl::string_view::npos)
      << result.status();
  EXPECT_GE(faults_->calls(test::FaultPlan::kAcquire), 3) << "not retried";
  EXPECT_LT(took, absl::Seconds(20));
  EXPECT_EQ(runs_, 0);
}

TEST_F(JobRideOutTest, NeverRidesOutPastTheSlotsEnd) {
  faults_->Set(test::FaultPlan::kAcquire, {.fail_before = true});
  const absl::Time start = absl::Now();
  absl::StatusOr<JobResult> result =
      Run({.lock_at_most_for = absl::Seconds(10),
           .slot = "ending",
           .slot_ends = start + absl::Milliseconds(300),
           .ride_out = absl::Minutes(10)});
  EXPECT_TRUE(absl::IsUnavailable(result.status())) << result.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "rode out the slot";
  EXPECT_EQ(runs_, 0);
}

TEST_F(JobRideOutTest, ZeroRideOutIsOneTryAndNegativeIsRefused) {
  faults_->Set(test::FaultPlan::kAcquire, {.fail_before = true});
  absl::StatusOr<JobResult> once = Run({.lock_at_most_for = absl::Seconds(10),
                                        .ride_out = absl::ZeroDuration()});
  EXPECT_TRUE(absl::IsUnavailable(once.status())) << once.status();
  EXPECT_EQ(faults_->calls(test::FaultPlan::kAcquire), 1);
  absl::StatusOr<JobResult> refused = Run(
      {.lock_at_most_for = absl::Seconds(10), .ride_out = absl::Seconds(-1)});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
      << refused.status();
  EXPECT_EQ(runs_, 0);
}

}  // namespace
}  // namespace dlock
