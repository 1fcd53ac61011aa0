// Copyright dlock authors. What the client core tells a LockObserver
// (dlock/observer.h), over memory:// on a ManualClock: each event once, with
// the right fields (grant tokens and wait times, hold times, renewals by
// the watchdog, a loss told exactly once as the lost callbacks are, release
// failures), backend round trips timed on the client's clock, and an
// observer that throws changing nothing.
#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "fault_backend.h"
#include "gtest/gtest.h"
#include "recording_observer.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::FaultPlan;
using test::ObservedEvent;
using test::RecordingObserver;

// Long enough for another thread to act on a clock move; a wait that ends
// on the event returns at once.
constexpr absl::Duration kReact = absl::Seconds(5);
// How long a test looks for something that must not happen.
constexpr absl::Duration kQuiet = absl::Milliseconds(150);

class ObserverTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockClient> Connect(
      std::shared_ptr<LockObserver> observer,
      absl::Duration watchdog_lease = absl::Seconds(30)) {
    ClientOptions options;
    options.clock = clock_;
    options.watchdog_lease = watchdog_lease;
    options.observer = std::move(observer);
    options.backend_decorator = faults_->Decorator();
    options.lock_namespace = "observed";
    options.on_lost = [this](const LockLostEvent&) { ++lost_callbacks_; };
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        dlock::Connect(uri_, options);
    EXPECT_OK(client);
    return *std::move(client);
  }
  std::unique_ptr<LockClient> ConnectPlain() {
    ClientOptions options;
    options.clock = clock_;
    options.lock_namespace = "observed";
    return *dlock::Connect(uri_, options);
  }

  const std::string uri_ =
      absl::StrCat("memory://observer-test-", getpid(), "-", NextId());
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
  std::shared_ptr<RecordingObserver> seen_ =
      std::make_shared<RecordingObserver>();
  std::atomic<int> lost_callbacks_{0};

 private:
  static int NextId() {
    static std::atomic<int> n{0};
    return n++;
  }
};

TEST_F(ObserverTest, GrantsCarryTokenAndWaitReleasesTheHoldTime) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("report");
  absl::StatusOr<Hold> first = lock->Acquire();
  ASSERT_OK(first);

  // A second owner waits 3 s (on the client's clock) for the lock.
  absl::StatusOr<Hold> second;
  std::thread waiter([&] {
    second = lock->Acquire({.wait = absl::Minutes(1), .owner_token = "w"});
  });
  ASSERT_TRUE(seen_->WaitFor(ObservedEvent::kAttempt, 2, kReact));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kAcquire, 2, kReact));
  clock_->Advance(absl::Seconds(3));
  ASSERT_OK(first->Release());
  waiter.join();
  ASSERT_OK(second);
  clock_->Advance(absl::Seconds(2));
  ASSERT_OK(second->Release());

  const std::vector<ObservedEvent> attempts =
      seen_->Of(ObservedEvent::kAttempt);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].lock_namespace, "observed");
  EXPECT_EQ(attempts[0].name, "report");
  EXPECT_EQ(attempts[0].duration, absl::InfiniteDuration());  // the wait
  EXPECT_EQ(attempts[1].duration, absl::Minutes(1));

  const std::vector<ObservedEvent> grants = seen_->Of(ObservedEvent::kGrant);
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_EQ(grants[0].fencing_token, first->fencing_token());
  EXPECT_EQ(grants[0].owner, first->owner());
  EXPECT_EQ(grants[0].hold_count, 1);
  EXPECT_TRUE(grants[0].flag);  // fresh
  EXPECT_EQ(grants[0].duration, absl::ZeroDuration());
  EXPECT_EQ(grants[1].fencing_token, second->fencing_token());
  EXPECT_EQ(grants[1].owner, second->owner());
  EXPECT_EQ(grants[1].duration, absl::Seconds(3));

  const std::vector<ObservedEvent> releases =
      seen_->Of(ObservedEvent::kRelease);
  ASSERT_EQ(releases.size(), 2u);
  EXPECT_EQ(releases[0].owner, first->owner());
  EXPECT_EQ(releases[0].fencing_token, grants[0].fencing_token);
  EXPECT_EQ(releases[0].duration, absl::Seconds(3));
  EXPECT_TRUE(releases[0].flag);  // last
  EXPECT_OK(releases[0].status);
  EXPECT_EQ(releases[1].duration, absl::Seconds(2));
  EXPECT_TRUE(seen_->Of(ObservedEvent::kAcquireFailed).empty());
  EXPECT_TRUE(seen_->Of(ObservedEvent::kLoss).empty());
}

TEST_F(ObserverTest, ReentryIsNotFreshAndOnlyTheLastReleaseEndsTheHold) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("nested");
  absl::StatusOr<Hold> outer = lock->Acquire();
  clock_->Advance(absl::Seconds(1));
  absl::StatusOr<Hold> inner = lock->Acquire();
  ASSERT_OK(outer);
  ASSERT_OK(inner);
  clock_->Advance(absl::Seconds(1));
  ASSERT_OK(inner->Release());
  ASSERT_OK(outer->Release());
  const std::vector<ObservedEvent> grants = seen_->Of(ObservedEvent::kGrant);
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_TRUE(grants[0].flag);
  EXPECT_FALSE(grants[1].flag);
  EXPECT_EQ(grants[1].hold_count, 2);
  const std::vector<ObservedEvent> releases =
      seen_->Of(ObservedEvent::kRelease);
  ASSERT_EQ(releases.size(), 2u);
  EXPECT_FALSE(releases[0].flag);
  EXPECT_EQ(releases[0].duration, absl::Seconds(1));  // the inner one's
  EXPECT_TRUE(releases[1].flag);
  EXPECT_EQ(releases[1].duration, absl::Seconds(2));
}

// Issue 24's holds are told with their kind and the object's own name,
// never the client's internal key.
TEST_F(ObserverTest, PrimitivesHoldsAreToldWithTheirKind) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<Semaphore> sem = *client->GetSemaphore("renders", 2);
  std::unique_ptr<ReadWriteLock> rw = *client->GetReadWriteLock("catalog");
  absl::StatusOr<Permit> permit = sem->Acquire(2, {});
  absl::StatusOr<Hold> read = rw->AcquireRead();
  ASSERT_OK(permit);
  ASSERT_OK(read);
  EXPECT_EQ(permit->hold().lock_name(), "renders");
  ASSERT_OK(permit->Release());
  ASSERT_OK(read->Release());
  const std::vector<ObservedEvent> grants = seen_->Of(ObservedEvent::kGrant);
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_EQ(grants[0].name, "renders");
  EXPECT_EQ(grants[0].object_kind, ObjectKind::kSemaphore);
  EXPECT_EQ(grants[1].name, "catalog");
  EXPECT_EQ(grants[1].object_kind, ObjectKind::kLock);
  EXPECT_TRUE(grants[1].shared);
  const std::vector<ObservedEvent> releases =
      seen_->Of(ObservedEvent::kRelease);
  ASSERT_EQ(releases.size(), 2u);
  EXPECT_EQ(releases[0].name, "renders");
  EXPECT_EQ(releases[0].object_kind, ObjectKind::kSemaphore);
  EXPECT_TRUE(releases[1].shared);
  EXPECT_FALSE(absl::StrContains(seen_->AllText(), "\x1f"));
}

TEST_F(ObserverTest, FailedAttemptsAreToldWithTheirError) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<LockClient> other = ConnectPlain();
  std::unique_ptr<DistributedLock> theirs = *other->GetLock("busy");
  absl::StatusOr<Hold> held = theirs->Acquire();
  ASSERT_OK(held);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("busy");
  absl::StatusOr<Hold> none = lock->TryAcquire();
  ASSERT_FALSE(none.ok());
  absl::StatusOr<Hold> bad = lock->Acquire({.lease = absl::Milliseconds(1)});
  ASSERT_FALSE(bad.ok());
  const std::vector<ObservedEvent> failed =
      seen_->Of(ObservedEvent::kAcquireFailed);
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_TRUE(IsHeldByAnother(failed[0].status)) << failed[0].status;
  EXPECT_EQ(failed[0].name, "busy");
  EXPECT_EQ(failed[1].status, bad.status());
  EXPECT_EQ(seen_->Of(ObservedEvent::kAttempt).size(), 2u);
  EXPECT_TRUE(seen_->Of(ObservedEvent::kGrant).empty());
}

TEST_F(ObserverTest, WatchdogRenewalsThenFailuresThenTheLossToldOnce) {
  std::unique_ptr<LockClient> client = Connect(seen_, absl::Seconds(3));
  std::unique_ptr<DistributedLock> lock = *client->GetLock("renewed");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  clock_->Advance(absl::Seconds(1));  // a third of the lease
  ASSERT_TRUE(seen_->WaitFor(ObservedEvent::kRenewal, 1, kReact));
  std::vector<ObservedEvent> renewals = seen_->Of(ObservedEvent::kRenewal);
  EXPECT_OK(renewals[0].status);
  EXPECT_TRUE(renewals[0].flag);  // by the watchdog
  EXPECT_EQ(renewals[0].fencing_token, hold->fencing_token());
  EXPECT_EQ(renewals[0].name, "renewed");

  // From now on no renewal reaches the backend.
  faults_->Set(FaultPlan::kRenew, {.fail_before = true});
  for (int i = 0; i < 20 && seen_->Of(ObservedEvent::kLoss).empty(); ++i) {
    clock_->Advance(absl::Milliseconds(500));
    seen_->WaitFor(ObservedEvent::kLoss, 1, absl::Milliseconds(100));
  }
  ASSERT_TRUE(seen_->WaitFor(ObservedEvent::kLoss, 1, kReact));
  renewals = seen_->Of(ObservedEvent::kRenewal);
  ASSERT_GE(renewals.size(), 2u);
  EXPECT_EQ(renewals[1].status.code(), absl::StatusCode::kUnavailable);

  // Later clock moves, the Hold's own calls and Close() tell it no more.
  clock_->Advance(absl::Seconds(10));
  absl::SleepFor(kQuiet);
  EXPECT_FALSE(hold->Release().ok());
  ASSERT_OK(client->Close());
  const std::vector<ObservedEvent> losses = seen_->Of(ObservedEvent::kLoss);
  ASSERT_EQ(losses.size(), 1u) << seen_->AllText();
  EXPECT_EQ(lost_callbacks_.load(), 1);
  EXPECT_EQ(losses[0].cause, LossCause::kUnconfirmed);
  EXPECT_TRUE(IsLost(losses[0].status)) << losses[0].status;
  EXPECT_EQ(losses[0].fencing_token, hold->fencing_token());
  EXPECT_EQ(losses[0].owner, hold->owner());
  EXPECT_GE(losses[0].duration, absl::Seconds(2));
  EXPECT_TRUE(seen_->Of(ObservedEvent::kRelease).empty());
}

TEST_F(ObserverTest, AForcedUnlockIsAGoneLossToldOnce) {
  std::unique_ptr<LockClient> client = Connect(seen_, absl::Seconds(3));
  std::unique_ptr<LockClient> admin = ConnectPlain();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("forced");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  ASSERT_OK(admin->Admin().ForceUnlock("forced"));
  clock_->Advance(absl::Seconds(1));  // the next renewal finds it gone
  ASSERT_TRUE(seen_->WaitFor(ObservedEvent::kLoss, 1, kReact));
  const std::vector<ObservedEvent> renewals =
      seen_->Of(ObservedEvent::kRenewal);
  ASSERT_EQ(renewals.size(), 1u);
  EXPECT_EQ(renewals[0].status.code(), absl::StatusCode::kFailedPrecondition);
  clock_->Advance(absl::Seconds(10));
  absl::SleepFor(kQuiet);
  ASSERT_OK(client->Close());
  const std::vector<ObservedEvent> losses = seen_->Of(ObservedEvent::kLoss);
  ASSERT_EQ(losses.size(), 1u) << seen_->AllText();
  EXPECT_EQ(losses[0].cause, LossCause::kGone);
  EXPECT_EQ(lost_callbacks_.load(), 1);
}

TEST_F(ObserverTest, AnUnconfirmedReleaseIsToldAndSoAreItsFailedRetries) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("flaky");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  // The caller's release and the first background retry lose their reply.
  faults_->Set(FaultPlan::kRelease, {.fail_before = true, .times = 2});
  EXPECT_EQ(hold->Release().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(seen_->WaitFor(ObservedEvent::kReleaseFailure, 2, kReact))
      << seen_->AllText();
  const std::vector<ObservedEvent> failures =
      seen_->Of(ObservedEvent::kReleaseFailure);
  // Told on two threads: the caller's and the renewer's, in either order.
  std::vector<ReleaseFailureEvent::Stage> stages = {failures[0].stage,
                                                    failures[1].stage};
  std::sort(stages.begin(), stages.end());
  EXPECT_EQ(stages, (std::vector<ReleaseFailureEvent::Stage>{
                        ReleaseFailureEvent::Stage::kCaller,
                        ReleaseFailureEvent::Stage::kBackground}));
  EXPECT_EQ(failures[0].name, "flaky");
  EXPECT_EQ(failures[1].name, "flaky");
  const std::vector<ObservedEvent> releases =
      seen_->Of(ObservedEvent::kRelease);
  ASSERT_EQ(releases.size(), 1u);
  EXPECT_TRUE(releases[0].flag);
  EXPECT_EQ(releases[0].status.code(), absl::StatusCode::kUnavailable);
  // The next retry gets through: nothing more is told.
  clock_->Advance(absl::Seconds(30));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kRelease, 3, kReact));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(seen_->Of(ObservedEvent::kReleaseFailure).size(), 2u);
  EXPECT_TRUE(seen_->Of(ObservedEvent::kLoss).empty());
}

// Issue 23: a release that no retry gets through before the hold's deadline
// is told lost then, once, to the lost callbacks; the observer, which had
// its OnRelease, hears no OnLoss (one end per hold).
TEST_F(ObserverTest, AReleaseUnconfirmedAtTheDeadlineIsToldLostButEndsOnce) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("cut off");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  faults_->Set(FaultPlan::kRelease, {.fail_before = true});
  EXPECT_EQ(hold->Release().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(lost_callbacks_.load(), 0);
  clock_->Advance(absl::Seconds(30));  // past the 30 s lease's deadline
  for (int i = 0; i < 500 && lost_callbacks_.load() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(lost_callbacks_.load(), 1) << seen_->AllText();
  faults_->Clear(FaultPlan::kRelease);
  clock_->Advance(absl::Seconds(1));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(lost_callbacks_.load(), 1);
  EXPECT_EQ(seen_->Of(ObservedEvent::kRelease).size(), 1u);
  EXPECT_TRUE(seen_->Of(ObservedEvent::kLoss).empty()) << seen_->AllText();
}

TEST_F(ObserverTest, BackendRoundTripsAreTimedOnTheClientsClock) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("timed");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  // The reply takes 250 ms of the client's clock.
  faults_->Set(FaultPlan::kRelease,
               {.after = [this] { clock_->Advance(absl::Milliseconds(250)); },
                .times = 1});
  ASSERT_OK(hold->Release());
  ASSERT_OK(client->Admin().Inspect("timed"));
  ASSERT_FALSE(client->Admin().ForceUnlock("bad name\n").ok());  // no call
  const std::vector<ObservedEvent> calls =
      seen_->Of(ObservedEvent::kBackendCall);
  ASSERT_EQ(calls.size(), 3u) << seen_->AllText();
  EXPECT_EQ(calls[0].operation, BackendOperation::kAcquire);
  EXPECT_EQ(calls[0].name, "timed");
  EXPECT_OK(calls[0].status);
  EXPECT_EQ(calls[1].operation, BackendOperation::kRelease);
  EXPECT_EQ(calls[1].duration, absl::Milliseconds(250));
  EXPECT_EQ(calls[1].lock_namespace, "observed");
  EXPECT_EQ(calls[2].operation, BackendOperation::kInspect);
  EXPECT_EQ(calls[2].calls, 1);
}

TEST_F(ObserverTest, KeepingUntilTheLeaseEndsIsALastRelease) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("marker");
  absl::StatusOr<Hold> hold = lock->Acquire({.lease = absl::Seconds(10)});
  ASSERT_OK(hold);
  ASSERT_OK(hold->KeepUntilLeaseEnd());
  clock_->Advance(absl::Seconds(30));  // it runs out: no loss
  absl::SleepFor(kQuiet);
  const std::vector<ObservedEvent> releases =
      seen_->Of(ObservedEvent::kRelease);
  ASSERT_EQ(releases.size(), 1u);
  EXPECT_TRUE(releases[0].kept_until_lease_end);
  EXPECT_TRUE(releases[0].flag);
  EXPECT_TRUE(seen_->Of(ObservedEvent::kLoss).empty());
}

TEST_F(ObserverTest, CloseTellsEachHeldLockLostOnceAndLaterAttemptsFailed) {
  std::unique_ptr<LockClient> client = Connect(seen_);
  std::unique_ptr<DistributedLock> a = *client->GetLock("a");
  std::unique_ptr<DistributedLock> b = *client->GetLock("b");
  absl::StatusOr<Hold> ha = a->Acquire();
  absl::StatusOr<Hold> hb = b->Acquire();
  ASSERT_OK(ha);
  ASSERT_OK(hb);
  ASSERT_OK(client->Close());
  const std::vector<ObservedEvent> losses = seen_->Of(ObservedEvent::kLoss);
  ASSERT_EQ(losses.size(), 2u);
  for (const ObservedEvent& loss : losses) {
    EXPECT_EQ(loss.cause, LossCause::kClientClosed);
  }
  EXPECT_FALSE(a->Acquire().ok());
  const std::vector<ObservedEvent> failed =
      seen_->Of(ObservedEvent::kAcquireFailed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(IsClientClosed(failed[0].status));
}

// Throws from every method.
class ThrowingObserver : public LockObserver {
 public:
  void OnAcquireAttempt(const AcquireAttemptEvent&) override { Throw(); }
  void OnGrant(const GrantEvent&) override { Throw(); }
  void OnAcquireFailed(const AcquireFailedEvent&) override { Throw(); }
  void OnRelease(const ReleaseEvent&) override { Throw(); }
  void OnRenewal(const RenewalEvent&) override { Throw(); }
  void OnLoss(const LossEvent&) override { Throw(); }
  void OnReleaseFailure(const ReleaseFailureEvent&) override { Throw(); }
  void OnBackendCall(const BackendCallEvent&) override { Throw(); }
  std::atomic<int> calls{0};

 private:
  void Throw() {
    ++calls;
    throw std::runtime_error("observer broke");
  }
};

TEST_F(ObserverTest, AnObserverThatThrowsChangesNothing) {
  auto thrower = std::make_shared<ThrowingObserver>();
  ::testing::internal::CaptureStderr();
  {
    std::unique_ptr<LockClient> client = Connect(thrower, absl::Seconds(3));
    std::unique_ptr<LockClient> admin = ConnectPlain();
    std::unique_ptr<DistributedLock> lock = *client->GetLock("thrown");
    absl::StatusOr<Hold> hold = lock->Acquire();
    ASSERT_OK(hold);
    EXPECT_GT(hold->fencing_token(), 0u);
    ASSERT_OK(hold->Renew());
    clock_->Advance(absl::Seconds(1));  // a watchdog renewal
    absl::SleepFor(kQuiet);
    EXPECT_EQ(hold->state(), LockState::kHeld);
    ASSERT_OK(hold->Release());
    // Released on the backend: another client takes it at once.
    std::unique_ptr<DistributedLock> theirs = *admin->GetLock("thrown");
    absl::StatusOr<Hold> taken = theirs->TryAcquire();
    ASSERT_OK(taken);
    ASSERT_OK(taken->Release());
    absl::StatusOr<Hold> again = lock->Acquire();
    ASSERT_OK(again);
    ASSERT_OK(admin->Admin().ForceUnlock("thrown"));
    clock_->Advance(absl::Seconds(1));  // the renewal finds it gone
    // The Hold sees it first (tokens before callbacks); then the callback.
    for (int i = 0; i < 250 && lost_callbacks_.load() == 0; ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(again->lost());
    EXPECT_EQ(lost_callbacks_.load(), 1);  // the client's own callback ran
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(thrower->calls.load(), 8);
  // One line for the client whose observer threw, however often it did.
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(absl::StrContains(err, "LockObserver")) << err;
  EXPECT_TRUE(absl::StrContains(err, "observer broke")) << err;
}

}  // namespace
}  // namespace dlock
