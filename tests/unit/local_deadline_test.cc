// Copyright dlock authors. The core's local time on an injected clock
// (ManualClock) over memory://, whose "server" counts on the same clock:
// renewal times, the local deadline of a hold (C19), when its loss is told
// (C20) and when a failed release is tried again (C21) follow the clock the
// client was given, never the wall clock or the scheduler. Real time is only
// waited for where another thread has to act on a clock move.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "fault_backend.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::FaultPlan;

// Long enough for another thread to act on a clock move; a wait that ends
// on the event returns at once.
constexpr absl::Duration kReact = absl::Seconds(5);
// How long a test looks for something that must not happen.
constexpr absl::Duration kQuiet = absl::Milliseconds(150);

// Counts a hold's lost notices.
struct Notices {
  absl::Notification told;
  std::atomic<int> count{0};
  LockLostCallback Callback() {
    return [this](const LockLostEvent&) {
      ++count;
      if (!told.HasBeenNotified()) told.Notify();
    };
  }
};

// Whether the backend shows `lock` free within `kReact` (real time: the
// client's threads act on a clock move in their own time).
bool FreeSoon(LockClient& client, absl::string_view name) {
  const absl::Time give_up = absl::Now() + kReact;
  while (absl::Now() < give_up) {
    absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
    if (info.ok() && !info->locked) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

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
    EXPECT_OK(client);
    return *std::move(client);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
};

TEST_F(LocalDeadlineTest, WatchdogRenewsAtAThirdOfTheLeaseOfTheClock) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(3));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("renewed");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0) << "renewed on real time";
  clock_->Advance(absl::Milliseconds(999));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0) << "renewed early";
  clock_->Advance(absl::Milliseconds(1));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRenew, 1, kReact));
  clock_->Advance(absl::Seconds(1));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRenew, 2, kReact));
  EXPECT_EQ(hold->state(), LockState::kHeld);
  EXPECT_OK(hold->Release());
}

TEST_F(LocalDeadlineTest, UnconfirmedHoldEndsAtItsLocalDeadline) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(1));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("stalled");
  // Renewals hang, as behind a silent partition.
  absl::Cleanup heal = [&] { faults_->Unblock(FaultPlan::kRenew); };
  faults_->Set(FaultPlan::kRenew, {.block = true});
  Notices notices;
  AcquireOptions options;
  options.on_lost = notices.Callback();
  absl::StatusOr<Hold> hold = lock->Acquire(options);
  ASSERT_OK(hold);
  // The grant was sent at the clock's current time; the lease is 1 s and
  // the drift margin 1% + 2 ms: the hold is believed until +988 ms.
  clock_->Advance(absl::Milliseconds(950));
  ASSERT_TRUE(faults_->WaitForBlocked(FaultPlan::kRenew, 1, kReact));
  EXPECT_EQ(hold->state(), LockState::kHeld);
  EXPECT_FALSE(hold->lost_token().IsCancelled());
  EXPECT_FALSE(notices.told.HasBeenNotified());
  // The notice comes a little before the deadline (20 ms for this lease).
  clock_->Advance(absl::Milliseconds(20));
  ASSERT_TRUE(notices.told.WaitForNotificationWithTimeout(kReact));
  EXPECT_TRUE(hold->lost_token().IsCancelled());
  clock_->Advance(absl::Milliseconds(18));
  EXPECT_EQ(hold->state(), LockState::kLost);
  EXPECT_TRUE(IsLost(hold->lost_reason())) << hold->lost_reason();
  clock_->Advance(absl::Seconds(10));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(notices.count.load(), 1);
}

TEST_F(LocalDeadlineTest, ExplicitLeaseIsToldWhenItEnds) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("leased");
  Notices notices;
  AcquireOptions options;
  options.lease = absl::Seconds(10);
  options.on_lost = notices.Callback();
  absl::StatusOr<Hold> hold = lock->Acquire(options);
  ASSERT_OK(hold);
  absl::SleepFor(kQuiet);
  EXPECT_FALSE(notices.told.HasBeenNotified()) << "told on real time";
  clock_->Advance(absl::Seconds(10));
  ASSERT_TRUE(notices.told.WaitForNotificationWithTimeout(kReact));
  EXPECT_EQ(hold->state(), LockState::kLost);
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0);
}

TEST_F(LocalDeadlineTest, FailedReleaseIsRetriedEveryTenthOfTheLease) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(5));
  std::unique_ptr<LockClient> other = Connect(absl::Seconds(5), false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("retried");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  faults_->Set(FaultPlan::kRelease, {.fail_before = true});
  EXPECT_EQ(hold->Release().code(), absl::StatusCode::kUnavailable);
  // One background attempt right away, then one every 500 ms.
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 2, kReact));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kRelease), 2);
  faults_->Clear(FaultPlan::kRelease);
  clock_->Advance(absl::Milliseconds(500));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 3, kReact));
  EXPECT_TRUE(FreeSoon(*other, "retried"))
      << "the retried release did not free the lock";
  // Nothing renewed it meanwhile.
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), 0);
}

// A lost hold may still be on the backend for a moment (its lease has a
// margin left there): releasing it locally must not let the owner's next
// acquisition re-enter it (C21).
TEST_F(LocalDeadlineTest, ReleaseOfALostHoldLetsItGoBeforeTheNextAcquire) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("lost, then again");
  AcquireOptions leased;
  leased.lease = absl::Seconds(10);
  absl::StatusOr<Hold> first = lock->Acquire(leased);
  ASSERT_OK(first);
  // Past the local deadline (9.898 s), before the backend's expiry (10 s).
  clock_->Advance(absl::Milliseconds(9950));
  EXPECT_EQ(first->state(), LockState::kLost);
  const uint64_t first_token = first->fencing_token();
  EXPECT_EQ(first->Release().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<Hold> again = lock->Acquire(leased);
  ASSERT_OK(again);
  EXPECT_EQ(again->hold_count(), 1) << "re-entered the hold it had lost";
  EXPECT_GT(again->fencing_token(), first_token);
  EXPECT_OK(again->Release());
}

TEST_F(LocalDeadlineTest, RenewingALostHoldSendsNothing) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("not revived");
  AcquireOptions leased;
  leased.lease = absl::Seconds(10);
  absl::StatusOr<Hold> hold = lock->Acquire(leased);
  ASSERT_OK(hold);
  clock_->Advance(absl::Milliseconds(9950));
  const int renewals = faults_->calls(FaultPlan::kRenew);
  absl::Status renewed = hold->Renew();
  EXPECT_EQ(renewed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsLost(renewed)) << renewed;
  EXPECT_EQ(faults_->calls(FaultPlan::kRenew), renewals)
      << "a lost hold was renewed on the backend, for nobody";
}

// A release that failed is retried for as long as the backend may keep the
// hold: the longest lease ever asked for it, not the watchdog's (C21).
TEST_F(LocalDeadlineTest, FailedReleaseIsRetriedForTheLongestLeaseAsked) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(3));
  std::unique_ptr<LockClient> other = Connect(absl::Seconds(3), false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("kept long");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  ASSERT_OK(hold->Renew(absl::Hours(1)));  // the backend keeps 1 h
  faults_->Set(FaultPlan::kRelease, {.fail_before = true});
  EXPECT_EQ(hold->Release().code(), absl::StatusCode::kUnavailable);
  // One retry at once, then one a second, for ten seconds.
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 2, kReact));
  for (int i = 0; i < 10; ++i) {
    clock_->Advance(absl::Seconds(1));
    ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, i + 3, kReact));
  }
  faults_->Clear(FaultPlan::kRelease);
  clock_->Advance(absl::Seconds(1));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 13, kReact))
      << "the release was given up while the backend kept the lock";
  EXPECT_TRUE(FreeSoon(*other, "kept long"));
}

// Once a hold was seen past its deadline, nothing brings it back: not a
// backend session that answers again (C19, C20).
TEST_F(LocalDeadlineTest, PassedDeadlineIsFinal) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("latched");
  Notices notices;
  AcquireOptions options;
  options.on_lost = notices.Callback();
  absl::StatusOr<Hold> hold = lock->Acquire(options);
  ASSERT_OK(hold);
  faults_->SetHeldUntil(clock_->Now());  // its session stopped answering
  EXPECT_EQ(hold->state(), LockState::kLost);
  faults_->SetHeldUntil(MonoTime::InfiniteFuture());  // and answers again
  EXPECT_EQ(hold->state(), LockState::kLost) << "a lost hold came back";
  EXPECT_TRUE(hold->lost());
  ASSERT_TRUE(notices.told.WaitForNotificationWithTimeout(kReact))
      << "never told";
  absl::SleepFor(kQuiet);
  EXPECT_EQ(notices.count.load(), 1);
}

TEST_F(LocalDeadlineTest, GrantPastTheBackendsSessionBoundIsNotReturned) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("bound passed");
  // The backend's session stops answering while the grant is on its way.
  faults_->Set(
      FaultPlan::kAcquire,
      {.after = [&] { faults_->SetHeldUntil(clock_->Now()); }, .times = 1});
  absl::StatusOr<Hold> acquired = lock->TryAcquire();
  EXPECT_FALSE(acquired.ok())
      << "returned fencing token " << acquired->fencing_token()
      << " for a hold it does not believe";
}

// A grant that arrives while a background release of the same owner's lost
// hold was under way may be taken off by that release: it is not to be
// believed (C1, C19).
TEST_F(LocalDeadlineTest, GrantRacingABackgroundReleaseIsNotBelieved) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(1));
  std::unique_ptr<LockClient> other = Connect(absl::Seconds(1), false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("raced");
  AcquireOptions as_job;
  as_job.owner_token = "job";
  absl::StatusOr<Hold> first = lock->Acquire(as_job);
  ASSERT_OK(first);
  absl::Cleanup unblock = [&] { faults_->Unblock(FaultPlan::kAcquire); };
  faults_->Set(FaultPlan::kRenew, {.fail_before = true});
  faults_->Set(FaultPlan::kAcquire, {.block = true});
  absl::StatusOr<Hold> again = absl::UnknownError("not yet");
  absl::Notification done;
  std::thread acquirer([&] {
    again = lock->Acquire(as_job);
    done.Notify();
  });
  ASSERT_TRUE(faults_->WaitForBlocked(FaultPlan::kAcquire, 1, kReact));
  // The hold's deadline passes; its release runs on the backend, but the
  // reply is lost, so the release stays pending.
  faults_->Set(FaultPlan::kRelease, {.fail_after = true});
  clock_->Advance(absl::Seconds(1));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 1, kReact));
  faults_->Unblock(FaultPlan::kAcquire);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kReact));
  acquirer.join();
  if (again.ok()) {
    // Believed: then the pending release, tried again, must not take it.
    clock_->Advance(absl::Seconds(1));
    ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 2, kReact));
    absl::SleepFor(kQuiet);
    absl::StatusOr<LockInfo> info = other->Admin().Inspect("raced");
    ASSERT_OK(info);
    EXPECT_TRUE(info->locked && info->fencing_token == again->fencing_token())
        << "the client believes token " << again->fencing_token()
        << ", which its own pending release took off the backend";
  } else {
    EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  }
}

// Close() is bounded even with acquisitions waiting for a release that
// hangs in the network (C13).
TEST_F(LocalDeadlineTest, CloseDoesNotWaitForAcquisitionsSettlingARelease) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(30));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("settling");
  AcquireOptions as_job;
  as_job.owner_token = "job";
  as_job.lease = absl::Seconds(60);
  absl::StatusOr<Hold> hold = lock->Acquire(as_job);
  ASSERT_OK(hold);
  faults_->Set(FaultPlan::kRelease, {.fail_before = true});
  EXPECT_EQ(hold->Release().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 2, kReact));
  faults_->Set(FaultPlan::kRelease, {.block = true});
  absl::Cleanup unblock = [&] { faults_->Unblock(FaultPlan::kRelease); };
  absl::Notification first_done, second_done, closed;
  // Kept past Close(): a Hold released on the spot would send a release
  // of its own.
  absl::StatusOr<Hold> first_hold, second_hold;
  // The first settles the pending release, which hangs; the second waits
  // for it.
  std::thread first([&] {
    first_hold = lock->Acquire(as_job);
    first_done.Notify();
  });
  ASSERT_TRUE(faults_->WaitForBlocked(FaultPlan::kRelease, 1, kReact));
  std::thread second([&] {
    second_hold = lock->Acquire(as_job);
    second_done.Notify();
  });
  absl::SleepFor(kQuiet);
  std::thread closer([&] {
    client->Close().IgnoreError();
    closed.Notify();
  });
  absl::SleepFor(kQuiet);
  faults_->Unblock(FaultPlan::kRelease);
  EXPECT_TRUE(second_done.WaitForNotificationWithTimeout(kReact))
      << "an acquisition waiting for a release outlived Close()";
  EXPECT_TRUE(closed.WaitForNotificationWithTimeout(kReact)) << "Close() hung";
  EXPECT_TRUE(first_done.WaitForNotificationWithTimeout(kReact));
  first.join();
  second.join();
  closer.join();
}

TEST_F(LocalDeadlineTest, ClientsSharingAMemoryInstanceShareAClock) {
  std::unique_ptr<LockClient> client = Connect(absl::Seconds(5));
  ClientOptions options;  // the real clock
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      dlock::Connect("memory://local-deadline-shared", options);
  ASSERT_OK(other);
  options.clock = clock_;
  absl::StatusOr<std::unique_ptr<LockClient>> mixed =
      dlock::Connect("memory://local-deadline-shared", options);
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dlock
