// Copyright dlock authors. Conformance: introspection (C11), force unlock
// (C12), shutdown (C13) and error codes (C14).
#include <optional>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "conformance_fixture.h"

namespace dlock::test {
namespace {

TEST_P(Conformance, C11_InspectDescribesTheHolder) {
  constexpr absl::Duration kLease = absl::Seconds(20);
  // Times are on the backend's clock: on one machine, close to ours.
  constexpr absl::Duration kClockSlack = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("inspected"));

  ASSERT_OK_AND_ASSIGN(LockInfo info, observer->Admin().Inspect("inspected"));
  EXPECT_EQ(info.name, "inspected");
  EXPECT_FALSE(info.locked);
  EXPECT_EQ(info.owner, "");
  EXPECT_EQ(info.hold_count, 0);
  ASSERT_OK_AND_ASSIGN(LockInfo probed, observer->Admin().Inspect("inspected"));
  EXPECT_FALSE(probed.locked);

  const absl::Time before = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold acquired, held->Acquire(WithLease(kLease)));
  const absl::Time after = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold reentered, held->Acquire(WithLease(kLease)));

  ASSERT_OK_AND_ASSIGN(info, observer->Admin().Inspect("inspected"));
  EXPECT_EQ(info.name, "inspected");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, holder->CurrentOwner());
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(info.fencing_token, acquired.fencing_token());
  EXPECT_GT(info.remaining_lease, kLease - absl::Seconds(5));
  EXPECT_LE(info.remaining_lease, kLease);
  EXPECT_GE(info.since, before - kClockSlack);
  EXPECT_LE(info.since, after + kClockSlack);
  ASSERT_OK_AND_ASSIGN(probed, observer->Admin().Inspect("inspected"));
  EXPECT_TRUE(probed.locked);
  ASSERT_OK_AND_ASSIGN(bool mine, acquired.IsHeldOnBackend());
  EXPECT_TRUE(mine);
  // Not held by the observer's owner.
  EXPECT_NE(probed.owner, observer->CurrentOwner());

  // A re-entry keeps when the hold began.
  ASSERT_OK_AND_ASSIGN(LockInfo same, holder->Admin().Inspect("inspected"));
  EXPECT_EQ(same.since, info.since);
  ASSERT_OK(reentered.Release());
  ASSERT_OK(acquired.Release());
  ASSERT_OK_AND_ASSIGN(info, observer->Admin().Inspect("inspected"));
  EXPECT_FALSE(info.locked);
  EXPECT_EQ(info.hold_count, 0);
}

// List is optional (Unimplemented where the backend cannot list); where it
// exists it shows exactly the held locks of the namespace under the prefix.
TEST_P(Conformance, C11_ListShowsHeldLocksByPrefix) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  std::vector<Hold> holds;
  for (const char* name : {"job/1", "job/2", "jobs", "other"}) {
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock(name));
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire(WithLease(kLongLease)));
    holds.push_back(std::move(hold));
  }
  ASSERT_OK(holds[3].Release());  // "other" is no longer held

  ASSERT_OK_AND_ASSIGN(std::optional<std::set<std::string>> all,
                       ListedNames(*client));
  if (!all.has_value()) return;
  EXPECT_EQ(*all, (std::set<std::string>{"job/1", "job/2", "jobs"}));
  ASSERT_OK_AND_ASSIGN(std::optional<std::set<std::string>> jobs,
                       ListedNames(*client, "job/"));
  EXPECT_EQ(*jobs, (std::set<std::string>{"job/1", "job/2"}));

  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> listed,
                       client->Admin().List("job/1"));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].locked);
  EXPECT_EQ(listed[0].owner, client->CurrentOwner());
  EXPECT_EQ(listed[0].hold_count, 1);
  ASSERT_EQ(holds[0].state(), LockState::kHeld);
  EXPECT_EQ(listed[0].fencing_token, holds[0].fencing_token());
}

TEST_P(Conformance, C12_ForceUnlockWakesWaiters) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto waiter_client, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("stuck"));
  ASSERT_OK_AND_ASSIGN(auto waited, waiter_client->GetLock("stuck"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));

  BackgroundAcquire waiter(*waited, WithLease(kLongLease, kNoHang * 2));
  absl::SleepFor(kLetWaiterBlock);
  EXPECT_FALSE(waiter.done());
  const absl::Time forced_at = absl::Now();
  ASSERT_OK(admin->Admin().ForceUnlock("stuck"));
  ASSERT_TRUE(waiter.WaitDone(kNoHang));
  EXPECT_OK(waiter.result());
  EXPECT_LT(waiter.done_at() - forced_at, kPromptly)
      << "the force unlock did not wake the waiter";
  // The former holder's next renew or release reports the loss.
  EXPECT_CODE(hold.Renew(), kFailedPrecondition);
  EXPECT_EQ(hold.state(), LockState::kLost);
  EXPECT_CODE(hold.Release(), kFailedPrecondition);
  // Forcing a free lock is harmless.
  EXPECT_OK(admin->Admin().ForceUnlock("stuck"));
}

TEST_P(Conformance, C12_ForceUnlockIsReportedLostToHolder) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  LostRecorder client_lost;
  options.on_lost = client_lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("forced away"));

  LostRecorder hold_lost;
  AcquireOptions watched;
  watched.on_lost = hold_lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold acquired, held->Acquire(watched));
  ASSERT_OK(admin->Admin().ForceUnlock("forced away"));

  ASSERT_TRUE(hold_lost.WaitForEvents(1, kNoHang)) << "no lost callback";
  ASSERT_TRUE(client_lost.WaitForEvents(1, kNoHang)) << "no client callback";
  EXPECT_EQ(hold_lost.Events()[0].name, "forced away");
  EXPECT_EQ(hold_lost.Events()[0].fencing_token, acquired.fencing_token());
  EXPECT_TRUE(IsLost(hold_lost.Events()[0].reason))
      << hold_lost.Events()[0].reason;
  EXPECT_EQ(acquired.state(), LockState::kLost);
  EXPECT_CODE(acquired.Renew(), kFailedPrecondition);
  EXPECT_CODE(acquired.Release(), kFailedPrecondition);
  // The former holder's watchdog did not bring the lock back.
  ASSERT_OK_AND_ASSIGN(LockInfo info, admin->Admin().Inspect("forced away"));
  EXPECT_FALSE(info.locked);
}

// The conditional force unlock a monitor uses (LockAdmin::ForceUnlock(name,
// token)): on a wrong token it leaves the hold alone; on the right one it
// removes it as ForceUnlock(name) does, holder told, waiters woken.
TEST_P(Conformance, C12_ForceUnlockOnTokenRemovesOnlyThatHold) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  LostRecorder lost;
  options.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto waiter_client, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("conditional"));
  ASSERT_OK_AND_ASSIGN(auto waited, waiter_client->GetLock("conditional"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  const uint64_t token = hold.fencing_token();

  absl::Status wrong = admin->Admin().ForceUnlock("conditional", token + 1);
  if (!admin->traits().can_list) {
    // Only backends that can list have monitors that need it.
    EXPECT_CODE(wrong, kUnimplemented);
    return;
  }
  EXPECT_CODE(wrong, kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(wrong.message(), absl::StrCat(token + 1)))
      << wrong;
  EXPECT_CODE(admin->Admin().ForceUnlock("conditional", 0), kInvalidArgument);
  EXPECT_CODE(admin->Admin().ForceUnlock("", token), kInvalidArgument);
  // Left as it was.
  ASSERT_OK_AND_ASSIGN(LockInfo info, admin->Admin().Inspect("conditional"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fencing_token, token);
  EXPECT_EQ(hold.state(), LockState::kHeld);
  ASSERT_OK(hold.Renew());

  BackgroundAcquire waiter(*waited, WithLease(kLongLease, kNoHang * 2));
  absl::SleepFor(kLetWaiterBlock);
  EXPECT_FALSE(waiter.done());
  const absl::Time forced_at = absl::Now();
  ASSERT_OK(admin->Admin().ForceUnlock("conditional", token));
  ASSERT_TRUE(waiter.WaitDone(kNoHang));
  ASSERT_OK_AND_ASSIGN(Granted granted, waiter.result());
  EXPECT_GT(granted.fencing_token, token);
  EXPECT_LT(waiter.done_at() - forced_at, kPromptly)
      << "the conditional force unlock did not wake the waiter";
  ASSERT_TRUE(lost.WaitForEvents(1, kNoHang)) << "the holder was not told";
  EXPECT_EQ(lost.Events()[0].fencing_token, token);
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_EQ(hold.state(), LockState::kLost);
  // A later holder is safe from the old token.
  ASSERT_OK_AND_ASSIGN(Hold next, held->Acquire(WithLease(kLongLease)));
  EXPECT_CODE(admin->Admin().ForceUnlock("conditional", token),
              kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(info, admin->Admin().Inspect("conditional"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fencing_token, next.fencing_token());
  EXPECT_OK(next.Release());
}

TEST_P(Conformance, C13_CloseReleasesEveryHoldAndWaitersGetThem) {
  ClientOptions options;
  options.close_timeout = absl::Seconds(3);
  ASSERT_OK_AND_ASSIGN(auto closing, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto waiter_client, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto renewed, closing->GetLock("renewed"));
  ASSERT_OK_AND_ASSIGN(auto leased, closing->GetLock("leased"));
  ASSERT_OK_AND_ASSIGN(auto by_token, closing->GetLock("by token"));
  // Kept until Close() ends them: two holds, both released by Close.
  ASSERT_OK_AND_ASSIGN(Hold renewed_hold, renewed->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold renewed_again, renewed->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold leased_hold,
                       leased->Acquire(WithLease(kLongLease)));
  ASSERT_OK_AND_ASSIGN(Hold by_token_hold, by_token->Acquire(AsOwner("job-1")));

  ASSERT_OK_AND_ASSIGN(auto waited, waiter_client->GetLock("renewed"));
  BackgroundAcquire waiter(*waited, WithLease(kLongLease, kNoHang * 2));
  absl::SleepFor(kLetWaiterBlock);
  EXPECT_FALSE(waiter.done());

  const absl::Time start = absl::Now();
  EXPECT_OK(closing->Close());
  const absl::Time closed = absl::Now();
  EXPECT_LT(closed - start, options.close_timeout + kPromptly);
  ASSERT_TRUE(waiter.WaitDone(kNoHang));
  EXPECT_OK(waiter.result());
  EXPECT_LT(waiter.done_at() - closed, kPromptly)
      << "closing did not wake the waiter";
  for (const char* name : {"leased", "by token"}) {
    ASSERT_OK_AND_ASSIGN(LockInfo info, waiter_client->Admin().Inspect(name));
    EXPECT_FALSE(info.locked) << name;
  }

  // A closed client refuses everything, and closing again is harmless.
  absl::StatusOr<Hold> refused = renewed->Acquire();
  EXPECT_CODE(refused, kFailedPrecondition);
  EXPECT_TRUE(IsClientClosed(refused.status())) << refused.status();
  // Its holds are over (checked before the release below empties one).
  EXPECT_EQ(leased_hold.state(), LockState::kNotHeld);
  EXPECT_CODE(leased_hold.Renew(), kFailedPrecondition);
  const absl::Status released = leased_hold.Release();
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsClientClosed(released)) << released;
  EXPECT_CODE(closing->Admin().Inspect("leased"), kFailedPrecondition);
  EXPECT_CODE(closing->Admin().ForceUnlock("leased"), kFailedPrecondition);
  EXPECT_CODE(closing->Admin().List(), kFailedPrecondition);
  EXPECT_OK(closing->Close());
}

TEST_P(Conformance, C13_CloseInterruptsBlockedAcquire) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto closing, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("never free"));
  ASSERT_OK_AND_ASSIGN(auto waited, closing->GetLock("never free"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));

  BackgroundAcquire waiter(*waited, WithLease(kLongLease, kNoHang * 3));
  absl::SleepFor(kLetWaiterBlock);
  const absl::Time start = absl::Now();
  EXPECT_OK(closing->Close());
  EXPECT_LT(absl::Now() - start, kNoHang / 2);
  ASSERT_TRUE(waiter.WaitDone(kPromptly));
  EXPECT_CODE(waiter.result(), kFailedPrecondition);
  EXPECT_TRUE(IsClientClosed(waiter.result().status()))
      << waiter.result().status();
  ASSERT_OK_AND_ASSIGN(LockInfo info, holder->Admin().Inspect("never free"));
  EXPECT_EQ(info.owner, holder->CurrentOwner());
}

TEST_P(Conformance, C14_InvalidArgumentForBadInput) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("argued"));
  for (absl::Duration lease :
       {absl::ZeroDuration(), absl::Seconds(-1), absl::InfiniteDuration()}) {
    EXPECT_CODE(lock->Acquire(WithLease(lease)), kInvalidArgument) << lease;
  }
  AcquireOptions negative_wait;
  negative_wait.wait = absl::Seconds(-1);
  EXPECT_CODE(lock->Acquire(negative_wait), kInvalidArgument);
  for (const char* owner : {"\xff", "job\n1", "job\x7f"}) {
    EXPECT_CODE(lock->Acquire(AsOwner(owner)), kInvalidArgument);
    EXPECT_CODE(client->OwnerTokens().Release("argued", owner),
                kInvalidArgument);
  }
  // By token, a token is required: the thread's own holds go by their Hold.
  EXPECT_CODE(client->OwnerTokens().Release("argued", ""), kInvalidArgument);
  EXPECT_CODE(client->OwnerTokens().Renew("argued", ""), kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  EXPECT_CODE(hold.Renew(absl::ZeroDuration()), kInvalidArgument);
  EXPECT_CODE(hold.Renew(absl::Seconds(-5)), kInvalidArgument);
  // Nothing above changed the hold.
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("argued"));
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_OK(hold.Release());

  const std::string uri = UriIn(ns());
  const char* join = absl::StrContains(uri, "?") ? "&" : "?";
  EXPECT_CODE(Connect(uri + join + "no_such_option=1"), kInvalidArgument);
  EXPECT_CODE(Connect(uri + join + "namespace=other"), kInvalidArgument);
  ClientOptions conflicting;
  conflicting.lock_namespace = OtherNamespace("conflict");
  EXPECT_CODE(NewClient(conflicting), kInvalidArgument);
  ClientOptions bad;
  bad.watchdog_lease = absl::ZeroDuration();
  EXPECT_CODE(NewClient(bad), kInvalidArgument);
}

TEST_P(Conformance, C14_FailedPreconditionWhenNotHeld) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("never taken"));
  // A Hold that holds nothing (what an owner that never acquired has).
  Hold none;
  absl::Status released = none.Release();
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;
  EXPECT_CODE(none.Renew(), kFailedPrecondition);
  EXPECT_NE(none.state(), LockState::kHeld);
  // By an owner token that never acquired it (these reach the backend).
  released = client->OwnerTokens().Release("never taken", "job");
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;
  EXPECT_CODE(client->OwnerTokens().Renew("never taken", "job"),
              kFailedPrecondition);
  EXPECT_CODE(
      client->OwnerTokens().Renew("never taken", "job", absl::Seconds(5)),
      kFailedPrecondition);
  EXPECT_EQ(client->OwnerTokens().State("never taken", "job"),
            LockState::kNotHeld);
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("never taken"));
  EXPECT_FALSE(info.locked) << "a failed release or renew created the lock";
}

TEST_P(Conformance, C14_DeadlineExceededAndCancelledForWaits) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("contested"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("contested"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));

  absl::StatusOr<Hold> waited =
      contender->Acquire(WithLease(kLongLease, absl::Milliseconds(100)));
  EXPECT_CODE(waited, kDeadlineExceeded);
  EXPECT_TRUE(IsWaitExpired(waited.status())) << waited.status();
  AcquireOptions cancelled = WithLease(kLongLease, kNoHang);
  cancelled.cancel.Cancel();
  const absl::Time start = absl::Now();
  EXPECT_CODE(contender->Acquire(cancelled), kCancelled);
  EXPECT_LT(absl::Now() - start, kPromptly);
  EXPECT_OK(hold.Release());
}

}  // namespace
}  // namespace dlock::test
