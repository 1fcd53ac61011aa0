// Copyright dlock authors. The core's local time on an injected clock
// (ManualClock) over memory://, whose "server" counts on the same clock:
// renewal times, the local deadline of a hold (C19), when its loss is told
// (C20) and when a failed release is tried again (C21) follow the clock the
// client was given, never the wall clock or the scheduler. Real time is only
// waited for where another thread has to act on a clock move.
#include <atomic>
#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "fault_backend.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using testing::FaultPlan;

// Long enough for another thread to act on a clock move; a wait that ends
// on the event returns at once.
constexpr absl::Duration kReact = absl::Seconds(5);
// How long a test looks for something that must not happen.
constexpr absl::Duration kQuiet = absl::Milliseconds(150);

class LocalDeadlineTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockClient> Connect(absl::Duration watchdog_lease,
                                      bool faulty = true) {
    ClientOptions options;
    options.clock = clock_;
    options.watchdog_lease = watchdog_lease;
    if (faulty) options.backend_decorator = faults_->Decorator();
    static std::atomic<int> n{0};
    absl::StatusOr<std::unique_ptr<LockClient>> client = dlock::Connect(
        absl::StrCat("memory://local-deadline-", getpid(), "-", n++), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
};

TEST_F(LocalDeadlineTest, WatchdogRenewsAtAThirdOfTheLeaseOfTheClock) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(3));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("renewed");
  ASSERT_TRUE(lock->Acquire().ok());
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0) << "renewed on real time";
  clock_->Advance(absl::Milliseconds(999));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0) << "renewed early";
  clock_->Advance(absl::Milliseconds(1));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRenew, 1, kReact));
  clock_->Advance(absl::Seconds(1));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRenew, 2, kReact));
  EXPECT_EQ(lock->State(), LockState::kHeld);
  EXPECT_TRUE(lock->Release().ok());
}

TEST_F(LocalDeadlineTest, UnconfirmedHoldEndsAtItsLocalDeadline) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(1));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("stalled");
  // Renewals hang, as behind a silent partition.
  absl::Cleanup heal = [&] { faults_->Unblock(FaultPlan::kRenew); };
  faults_->Set(FaultPlan::kRenew, {.block = true});
  absl::Notification told;
  std::atomic<int> notices{0};
  AcquireOptions options;
  options.on_lost = [&](const LockLostEvent&) {
    ++notices;
    told.Notify();
  };
  ASSERT_TRUE(lock->Acquire(options).ok());
  // The grant was sent at the clock's current time; the lease is 1 s and
  // the drift margin 1% + 2 ms: the hold is believed until +988 ms.
  clock_->Advance(absl::Milliseconds(950));
  ASSERT_TRUE(faults_->WaitForBlocked(FaultPlan::kRenew, 1, kReact));
  EXPECT_EQ(lock->State(), LockState::kHeld);
  EXPECT_TRUE(lock->FencingToken().ok());
  EXPECT_FALSE(told.HasBeenNotified());
  // The notice comes a little before the deadline (20 ms for this lease).
  clock_->Advance(absl::Milliseconds(20));
  ASSERT_TRUE(told.WaitForNotificationWithTimeout(kReact));
  clock_->Advance(absl::Milliseconds(18));
  EXPECT_EQ(lock->State(), LockState::kLost);
  EXPECT_FALSE(lock->FencingToken().ok());
  clock_->Advance(absl::Seconds(10));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(notices.load(), 1);
}

TEST_F(LocalDeadlineTest, ExplicitLeaseIsToldWhenItEnds) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("leased");
  absl::Notification told;
  AcquireOptions options;
  options.lease = absl::Seconds(10);
  options.on_lost = [&](const LockLostEvent&) { told.Notify(); };
  ASSERT_TRUE(lock->Acquire(options).ok());
  absl::SleepFor(kQuiet);
  EXPECT_FALSE(told.HasBeenNotified()) << "told on real time";
  clock_->Advance(absl::Seconds(10));
  ASSERT_TRUE(told.WaitForNotificationWithTimeout(kReact));
  EXPECT_EQ(lock->State(), LockState::kLost);
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0);
}

TEST_F(LocalDeadlineTest, FailedReleaseIsRetriedEveryTenthOfTheLease) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(5));
  std::unique_ptr<LockClient> other = Connect(absl::Seconds(5), false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("retried");
  std::unique_ptr<DistributedLock> seen = *other->GetLock("retried");
  ASSERT_TRUE(lock->Acquire().ok());
  faults_->Set(FaultPlan::kRelease, {.fail_before = true});
  EXPECT_EQ(lock->Release().code(), absl::StatusCode::kUnavailable);
  // One background attempt right away, then one every 500 ms.
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 2, kReact));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kRelease), 2);
  faults_->Clear(FaultPlan::kRelease);
  clock_->Advance(absl::Milliseconds(500));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 3, kReact));
  absl::StatusOr<LockInfo> info;
  for (int i = 0; i < 100; ++i) {
    info = seen->Inspect();
    if (info.ok() && !info->locked) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->locked) << "the retried release did not free the lock";
  // Nothing renewed it meanwhile.
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0);
}

TEST_F(LocalDeadlineTest, ClientsSharingAMemoryInstanceShareAClock) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(5));
  ClientOptions options;  // the real clock
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      dlock::Connect("memory://local-deadline-shared", options);
  ASSERT_TRUE(other.ok());
  options.clock = clock_;
  absl::StatusOr<std::unique_ptr<LockClient>> mixed =
      dlock::Connect("memory://local-deadline-shared", options);
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dlock
