// Copyright dlock authors. Unit tests of dlock::Hold on memory:// (no
// server; failed releases come from a FaultPlan): the destructor releases,
// moves, the fencing token, the lost state and lost token, the
// release-error hook, a Hold released on another thread, and a Hold that
// outlives its client. (What adapters' LockGuard checked before Hold
// replaced it.)
#include "dlock/hold.h"

#include <unistd.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

std::string UniqueUri() {
  static std::atomic<int> n{0};
  return absl::StrCat("memory://hold-", getpid(), "-", n++);
}

std::unique_ptr<LockClient> MustConnect(const std::string& uri,
                                        ClientOptions options = {}) {
  // Renewal every 30ms: a loss is noticed within tens of milliseconds.
  options.watchdog_lease = absl::Milliseconds(90);
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  EXPECT_OK(client);
  return *std::move(client);
}

std::unique_ptr<DistributedLock> MustLock(LockClient& client,
                                          const std::string& name) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock = client.GetLock(name);
  EXPECT_OK(lock);
  return *std::move(lock);
}

bool IsLocked(LockClient& client, const std::string& name) {
  absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
  EXPECT_OK(info);
  return info.ok() && info->locked;
}

// Release errors as a hook saw them: "name: status".
class HookRecord {
 public:
  ReleaseErrorHook Hook() {
    return [this](absl::string_view name, const absl::Status& error) {
      absl::MutexLock lock(&mu_);
      errors_.push_back(error);
      lines_.push_back(absl::StrCat(name, ": ", error.ToString()));
    };
  }
  std::vector<std::string> lines() const {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  std::vector<absl::Status> errors() const {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
};

// Replaces the process-wide default hook for a scope.
class ScopedDefaultHook {
 public:
  explicit ScopedDefaultHook(ReleaseErrorHook hook) {
    SetDefaultReleaseErrorHook(std::move(hook));
  }
  ~ScopedDefaultHook() { SetDefaultReleaseErrorHook(nullptr); }
};

TEST(HoldTest, HoldsUntilDestroyedAndExposesTheFencingToken) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> l1 = MustLock(*c1, "report");
  std::unique_ptr<DistributedLock> l2 = MustLock(*c2, "report");
  uint64_t first_token = 0;
  {
    ASSERT_OK_AND_ASSIGN(Hold hold, l1->Acquire());
    EXPECT_TRUE(hold.active());
    EXPECT_EQ(hold.lock_name(), "report");
    EXPECT_EQ(hold.state(), LockState::kHeld);
    first_token = hold.fencing_token();
    EXPECT_GT(first_token, 0u);
    EXPECT_FALSE(hold.lost());
    EXPECT_OK(hold.lost_reason());
    EXPECT_FALSE(hold.lost_token().IsCancelled());
    absl::StatusOr<Hold> other = l2->TryAcquire();
    EXPECT_CODE(other, kDeadlineExceeded);
    EXPECT_TRUE(IsHeldByAnother(other.status())) << other.status();
  }
  // The destructor released it.
  EXPECT_FALSE(IsLocked(*c2, "report"));
  ASSERT_OK_AND_ASSIGN(Hold next, l2->TryAcquire());
  EXPECT_GT(next.fencing_token(), first_token);
}

TEST(HoldTest, LossFiresTheLostTokenAndIsToldOnce) {
  const std::string uri = UniqueUri();
  HookRecord release_errors;
  std::unique_ptr<LockClient> c1 = MustConnect(
      uri, ClientOptions{.on_release_error = release_errors.Hook()});
  std::unique_ptr<LockClient> c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*c1, "ledger");
  std::atomic<int> user_callbacks{0};
  absl::Notification told;
  {
    ASSERT_OK_AND_ASSIGN(Hold hold,
                         lock->Acquire({.on_lost = [&](const LockLostEvent& e) {
                           EXPECT_EQ(e.name, "ledger");
                           EXPECT_TRUE(IsLost(e.reason)) << e.reason;
                           if (++user_callbacks == 1) told.Notify();
                         }}));
    absl::Notification stopped;
    ScopedCancelCallback stop(hold.lost_token(), [&] { stopped.Notify(); });

    ASSERT_OK(c2->Admin().ForceUnlock("ledger"));  // C12

    // The work watching the token is told at the next renewal.
    ASSERT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
    EXPECT_TRUE(hold.lost());
    EXPECT_EQ(hold.state(), LockState::kLost);
    EXPECT_FALSE(hold.lost_reason().ok());
    EXPECT_TRUE(IsLost(hold.lost_reason())) << hold.lost_reason();
    // The acquisition's own callback too (after the token, on the same
    // notifier thread), once.
    ASSERT_TRUE(told.WaitForNotificationWithTimeout(absl::Seconds(5)));
    EXPECT_EQ(user_callbacks.load(), 1);
  }
  // Not swallowed, and told once (C20): through the callback, the token and
  // lost_reason(); the destructor's release, which finds the loss, does not
  // tell the release-error hook again (dlock/hold.h).
  EXPECT_TRUE(release_errors.lines().empty()) << release_errors.lines().front();
  EXPECT_EQ(user_callbacks.load(), 1);
}

// A release the backend does not confirm (Unavailable) is what a
// destructor cannot return: it goes to the client's hook, and the release
// is retried in the background (C21).
TEST(HoldTest, FailedReleaseInTheDestructorGoesToTheClientsHook) {
  const std::string uri = UniqueUri();
  auto faults = std::make_shared<test::FaultPlan>();
  HookRecord release_errors;
  std::unique_ptr<LockClient> c1 =
      MustConnect(uri, ClientOptions{.on_release_error = release_errors.Hook(),
                                     .backend_decorator = faults->Decorator()});
  std::unique_ptr<LockClient> c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*c1, "unconfirmed");
  {
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
    faults->Set(test::FaultPlan::kRelease, {.fail_before = true, .times = 1});
  }
  ASSERT_EQ(release_errors.lines().size(), 1u);
  EXPECT_THAT(release_errors.lines()[0], HasSubstr("unconfirmed: UNAVAILABLE"));
  EXPECT_CODE(release_errors.errors()[0], kUnavailable);
  // Retried in the background until the backend confirms it.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (IsLocked(*c2, "unconfirmed") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(IsLocked(*c2, "unconfirmed"));
}

TEST(HoldTest, WithoutAClientHookTheDefaultHookIsTold) {
  const std::string uri = UniqueUri();
  HookRecord defaults;
  ScopedDefaultHook scoped(defaults.Hook());
  auto faults = std::make_shared<test::FaultPlan>();
  std::unique_ptr<LockClient> c1 =
      MustConnect(uri, ClientOptions{.backend_decorator = faults->Decorator()});
  std::unique_ptr<DistributedLock> lock = MustLock(*c1, "default-hook");
  {
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
    faults->Set(test::FaultPlan::kRelease, {.fail_before = true, .times = 1});
  }
  ASSERT_EQ(defaults.lines().size(), 1u);
  EXPECT_THAT(defaults.lines()[0], HasSubstr("default-hook: UNAVAILABLE"));
}

TEST(HoldTest, ExplicitLeaseRunningOutIsSeenByLost) {
  HookRecord release_errors;
  std::unique_ptr<LockClient> c = MustConnect(
      UniqueUri(), ClientOptions{.on_release_error = release_errors.Hook()});
  std::unique_ptr<DistributedLock> lock = MustLock(*c, "short");
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->Acquire({.lease = absl::Milliseconds(50)}));
  EXPECT_FALSE(hold.lost());
  absl::SleepFor(absl::Milliseconds(120));
  EXPECT_TRUE(hold.lost());
  EXPECT_TRUE(IsLost(hold.lost_reason())) << hold.lost_reason();
  EXPECT_TRUE(hold.lost_token().IsCancelled());
  // Release says so instead of the hook.
  absl::Status released = hold.Release();
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsLost(released)) << released;
  EXPECT_TRUE(release_errors.lines().empty());
}

TEST(HoldTest, ExplicitReleaseAndMoves) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*c1, "moved");
  std::vector<Hold> holds;
  {
    absl::StatusOr<Hold> hold = lock->Acquire();
    ASSERT_OK(hold);
    holds.push_back(*std::move(hold));  // the moved-from one releases nothing
    EXPECT_FALSE(hold->active());
    EXPECT_EQ(hold->state(), LockState::kNotHeld);
  }
  ASSERT_TRUE(holds[0].active());
  EXPECT_EQ(holds[0].lock_name(), "moved");
  EXPECT_TRUE(IsLocked(*c2, "moved"));
  // Move assignment: the target had nothing to release.
  Hold assigned;
  EXPECT_FALSE(assigned.active());
  assigned = std::move(holds[0]);
  EXPECT_FALSE(holds[0].active());
  EXPECT_TRUE(IsLocked(*c2, "moved"));

  EXPECT_OK(assigned.Release());
  EXPECT_FALSE(assigned.active());
  EXPECT_EQ(assigned.state(), LockState::kNotHeld);
  EXPECT_FALSE(IsLocked(*c2, "moved"));
  // Once: the second release is the caller's mistake, told as such.
  absl::Status again = assigned.Release();
  EXPECT_CODE(again, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(again)) << again;
  absl::Status moved_from = holds[0].Release();
  EXPECT_CODE(moved_from, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(moved_from)) << moved_from;
}

TEST(HoldTest, MoveAssignmentReleasesWhatTheTargetHeld) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> a = MustLock(*c1, "first");
  std::unique_ptr<DistributedLock> b = MustLock(*c1, "second");
  ASSERT_OK_AND_ASSIGN(Hold hold, a->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold other, b->Acquire());
  hold = std::move(other);
  EXPECT_FALSE(IsLocked(*c2, "first"));
  EXPECT_TRUE(IsLocked(*c2, "second"));
  EXPECT_EQ(hold.lock_name(), "second");
}

TEST(HoldTest, FailuresAreStatuses) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  EXPECT_CODE(c1->GetLock(""), kInvalidArgument);
  std::unique_ptr<DistributedLock> l1 = MustLock(*c1, "c");
  std::unique_ptr<DistributedLock> l2 = MustLock(*c2, "c");
  ASSERT_OK_AND_ASSIGN(Hold first, l1->Acquire());
  CancelToken cancel;
  cancel.Cancel();
  EXPECT_CODE(l2->Acquire({.cancel = cancel}), kCancelled);
  // An empty Hold has nothing to release.
  Hold empty;
  absl::Status released = empty.Release();
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;
}

TEST(HoldTest, DestructorNeverThrowsEvenWhenTheHookDoes) {
  static_assert(std::is_nothrow_destructible_v<Hold>);
  static_assert(std::is_nothrow_move_constructible_v<Hold>);
  static_assert(std::is_nothrow_move_assignable_v<Hold>);
  auto faults = std::make_shared<test::FaultPlan>();
  std::atomic<int> calls{0};
  std::unique_ptr<LockClient> c = MustConnect(
      UniqueUri(),
      ClientOptions{.on_release_error =
                        [&](absl::string_view, const absl::Status&) {
                          ++calls;
                          throw std::runtime_error("hook failed");
                        },
                    .backend_decorator = faults->Decorator()});
  std::unique_ptr<DistributedLock> lock = MustLock(*c, "throwing-hook");
  auto scope = [&] {
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
    faults->Set(test::FaultPlan::kRelease, {.fail_before = true, .times = 1});
  };
  EXPECT_NO_THROW(scope());
  EXPECT_EQ(calls.load(), 1);
}

TEST(HoldTest, ReleasedOnAnotherThreadReleasesTheLock) {
  const std::string uri = UniqueUri();
  HookRecord release_errors;
  std::unique_ptr<LockClient> c1 = MustConnect(
      uri, ClientOptions{.on_release_error = release_errors.Hook()});
  std::unique_ptr<LockClient> c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*c1, "handed-over");
  std::unique_ptr<DistributedLock> other = MustLock(*c2, "handed-over");

  // Acquired by this thread (its default owner), released by another.
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  absl::Status released = absl::UnknownError("not run");
  std::thread([&released, h = std::move(hold)]() mutable {
    released = h.Release();
  }).join();
  EXPECT_OK(released);
  EXPECT_FALSE(IsLocked(*c2, "handed-over"));
  { ASSERT_OK_AND_ASSIGN(Hold theirs, other->TryAcquire()); }

  // And by the destructor on another thread.
  ASSERT_OK_AND_ASSIGN(Hold again, lock->Acquire());
  EXPECT_TRUE(IsLocked(*c2, "handed-over"));
  std::thread([h = std::move(again)] {}).join();
  EXPECT_FALSE(IsLocked(*c2, "handed-over"));
  ASSERT_OK_AND_ASSIGN(Hold theirs, other->TryAcquire());
  EXPECT_TRUE(release_errors.lines().empty());
  // The acquiring thread holds nothing any more: it can take it again once
  // the other client lets go.
  EXPECT_OK(theirs.Release());
  ASSERT_OK_AND_ASSIGN(Hold mine, lock->TryAcquire());
  EXPECT_EQ(mine.hold_count(), 1);
}

TEST(HoldTest, HoldOutlivingItsClientsCloseIsSilent) {
  const std::string uri = UniqueUri();
  HookRecord release_errors, defaults;
  ScopedDefaultHook scoped(defaults.Hook());
  std::unique_ptr<LockClient> c1 = MustConnect(
      uri, ClientOptions{.on_release_error = release_errors.Hook()});
  std::unique_ptr<LockClient> c2 = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*c1, "outlives");
  std::unique_ptr<DistributedLock> other = MustLock(*c2, "outlives");
  {
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
    ASSERT_OK_AND_ASSIGN(Hold released_by_hand, lock->Acquire());  // re-entry
    ASSERT_OK(c1->Close());
    // Close() released the lock (C13) and told the hold it ended (C20):
    // work watching its lost token stops.
    EXPECT_FALSE(IsLocked(*c2, "outlives"));
    EXPECT_TRUE(hold.lost_token().IsCancelled());
    // Released by the close: not held, and nothing to call lost.
    EXPECT_EQ(hold.state(), LockState::kNotHeld);
    EXPECT_TRUE(hold.active());
    EXPECT_OK(hold.lost_reason());
    absl::Status released = released_by_hand.Release();
    EXPECT_CODE(released, kFailedPrecondition);
    EXPECT_TRUE(IsClientClosed(released)) << released;
    EXPECT_FALSE(released_by_hand.active());
    EXPECT_EQ(released_by_hand.state(), LockState::kNotHeld);
    // Another owner may have it now.
    ASSERT_OK_AND_ASSIGN(Hold theirs, other->TryAcquire());
    // `hold` ends here, after its client closed: nothing to report.
  }
  {
    // Even once the client object is gone.
    std::unique_ptr<LockClient> c3 = MustConnect(
        uri, ClientOptions{.on_release_error = release_errors.Hook()});
    ASSERT_OK_AND_ASSIGN(Hold hold,
                         MustLock(*c3, "outlives-object")->Acquire());
    c3.reset();
    EXPECT_EQ(hold.state(), LockState::kNotHeld);
    EXPECT_TRUE(hold.lost_token().IsCancelled());
    EXPECT_FALSE(IsLocked(*c2, "outlives-object"));
  }
  EXPECT_TRUE(release_errors.lines().empty());
  EXPECT_TRUE(defaults.lines().empty());
}

// A release by token (C6) that took a Hold's acquisition is no failure of
// that Hold: its destructor stays silent.
TEST(HoldTest, AcquisitionReleasedByTokenIsNotReportedByItsHold) {
  HookRecord release_errors;
  std::unique_ptr<LockClient> client = MustConnect(
      UniqueUri(), ClientOptions{.on_release_error = release_errors.Hook()});
  std::unique_ptr<DistributedLock> lock = MustLock(*client, "by token");
  {
    ASSERT_OK_AND_ASSIGN(Hold outer, lock->Acquire({.owner_token = "job"}));
    ASSERT_OK_AND_ASSIGN(Hold inner, lock->Acquire({.owner_token = "job"}));
    ASSERT_OK(client->OwnerTokens().Release("by token",
                                            "job"));  // takes the innermost
    EXPECT_EQ(inner.state(), LockState::kNotHeld);
    EXPECT_EQ(outer.state(), LockState::kHeld);
    ASSERT_OK(
        client->OwnerTokens().Release("by token", "job"));  // and the last
    EXPECT_EQ(outer.state(), LockState::kNotHeld);
  }
  EXPECT_FALSE(IsLocked(*client, "by token"));
  EXPECT_TRUE(release_errors.lines().empty()) << release_errors.lines().front();
}

// A hold left to run out keeps the lock taken until its lease ends there,
// with nobody told of a loss and no release sent; then the lock is free and
// the client has forgotten it.
TEST(HoldTest, KeptHoldRunsOutWithItsLease) {
  const std::string uri = UniqueUri();
  std::atomic<int> told{0};
  ClientOptions options;
  options.on_lost = [&](const LockLostEvent&) { ++told; };
  std::shared_ptr<test::FaultPlan> faults = std::make_shared<test::FaultPlan>();
  options.backend_decorator = faults->Decorator();
  std::unique_ptr<LockClient> client = MustConnect(uri, options);
  std::unique_ptr<LockClient> other = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*client, "kept");
  std::unique_ptr<DistributedLock> theirs = MustLock(*other, "kept");
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->Acquire({.lease = absl::Milliseconds(300),
                                      .owner_token = "marker"}));
  ASSERT_OK(hold.KeepUntilLeaseEnd());
  EXPECT_FALSE(hold.active());
  EXPECT_CODE(theirs->TryAcquire(), kDeadlineExceeded);
  EXPECT_EQ(client->OwnerTokens().State("kept", "marker"), LockState::kHeld);
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  absl::StatusOr<Hold> after = theirs->TryAcquire();
  while (!after.ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
    after = theirs->TryAcquire();
  }
  ASSERT_OK(after);
  EXPECT_EQ(faults->calls(test::FaultPlan::kRelease), 0)
      << "a kept hold was released instead of running out";
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(told.load(), 0) << "an end foreseen was told as a loss";
  EXPECT_EQ(client->OwnerTokens().State("kept", "marker"), LockState::kNotHeld)
      << "the client kept a record of a hold that ran out";
}

TEST(HoldTest, OnlyAHoldWithAnExplicitLeaseCanBeKept) {
  std::unique_ptr<LockClient> client = MustConnect(UniqueUri());
  std::unique_ptr<DistributedLock> lock = MustLock(*client, "renewed");
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  absl::Status kept = hold.KeepUntilLeaseEnd();
  EXPECT_CODE(kept, kFailedPrecondition);
  EXPECT_THAT(kept.message(), HasSubstr("explicit lease"));
  EXPECT_TRUE(hold.active()) << "a refused keep must leave the Hold as it was";
  EXPECT_OK(hold.Release());
}

// Closing the client releases what it kept (C13).
TEST(HoldTest, CloseReleasesAKeptHold) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> client = MustConnect(uri);
  std::unique_ptr<LockClient> other = MustConnect(uri);
  std::unique_ptr<DistributedLock> lock = MustLock(*client, "kept");
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire({.lease = absl::Seconds(60)}));
  ASSERT_OK(hold.KeepUntilLeaseEnd());
  EXPECT_TRUE(IsLocked(*other, "kept"));
  EXPECT_OK(client->Close());
  EXPECT_FALSE(IsLocked(*other, "kept"));
}

}  // namespace
}  // namespace dlock
