// Copyright dlock authors. Conformance under faults: a client believes a hold
// only while no other owner can be granted it (C19), and a release or an
// acquisition whose reply is lost never leaves the lock held (C21). Faults
// come from a FaultPlan decorator in front of the backend under test
// (integration/fault_backend.h): a lost reply, a slow reply, a call that
// hangs. Network-level faults on real servers are in tests/faults/.
#include <atomic>
#include <memory>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "conformance_fixture.h"
#include "fault_backend.h"

namespace dlock::test {
namespace {

using Op = FaultPlan;

ClientOptions Faulty(const std::shared_ptr<FaultPlan>& faults,
                     absl::Duration watchdog_lease = absl::Seconds(30)) {
  ClientOptions options;
  options.watchdog_lease = watchdog_lease;
  options.backend_decorator = faults->Decorator();
  return options;
}

// A holder behind a FaultPlan and a second client, both on one lock, and
// the holder's acquisitions with an explicit lease, whose losses `lost`
// records.
struct FaultyHolder {
  std::shared_ptr<FaultPlan> faults = std::make_shared<FaultPlan>();
  std::unique_ptr<LockClient> holder, other;
  std::unique_ptr<DistributedLock> held, next;
  LostRecorder lost;
  AcquireOptions watched;
};

using NewClientFn =
    absl::FunctionRef<absl::StatusOr<std::unique_ptr<LockClient>>(
        ClientOptions)>;

absl::Status StartFaultyHolder(NewClientFn new_client, absl::string_view name,
                               absl::Duration lease, FaultyHolder& h) {
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      new_client(Faulty(h.faults));
  if (!holder.ok()) return holder.status();
  absl::StatusOr<std::unique_ptr<LockClient>> other = new_client({});
  if (!other.ok()) return other.status();
  h.holder = *std::move(holder);
  h.other = *std::move(other);
  absl::StatusOr<std::unique_ptr<DistributedLock>> held =
      h.holder->GetLock(name);
  if (!held.ok()) return held.status();
  absl::StatusOr<std::unique_ptr<DistributedLock>> next =
      h.other->GetLock(name);
  if (!next.ok()) return next.status();
  h.held = *std::move(held);
  h.next = *std::move(next);
  h.watched = WithLease(lease);
  h.watched.on_lost = h.lost.Callback();
  return absl::OkStatus();
}

bool FreeOnBackend(LockClient& client, absl::string_view name) {
  absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
  return info.ok() && !info->locked;
}

TEST_P(Conformance, C21_ReleaseThatFailsEndsRenewalAndIsRetried) {
  auto faults = std::make_shared<FaultPlan>();
  // Renewed every ~1.7 s; the backend would free it by itself after 5 s.
  ASSERT_OK_AND_ASSIGN(auto holder,
                       NewClient(Faulty(faults, absl::Seconds(5))));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("released once"));
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire());

  faults->Set(Op::kRelease, {.fail_before = true});
  EXPECT_CODE(first.Release(), kUnavailable);
  EXPECT_EQ(first.state(), LockState::kNotHeld);
  const int renewals = faults->calls(Op::kRenew);
  absl::SleepFor(absl::Seconds(2));  // past the next renewal's time
  EXPECT_EQ(faults->calls(Op::kRenew), renewals)
      << "a hold whose release failed is still renewed";

  // The backend comes back: the client's retry frees the lock well before
  // its lease would have.
  faults->Clear(Op::kRelease);
  EXPECT_TRUE(Eventually([&] { return FreeOnBackend(*other, "released once"); },
                         kPromptly))
      << "the failed release was not retried";

  // The owner's next acquisition is a fresh hold, not a re-entry.
  ASSERT_OK_AND_ASSIGN(Hold again, held->Acquire());
  EXPECT_EQ(again.hold_count(), 1);
  EXPECT_GT(again.fencing_token(), first.fencing_token());
  EXPECT_OK(again.Release());
}

TEST_P(Conformance, C21_AcquireWaitsForAReleaseStillPending) {
  auto faults = std::make_shared<FaultPlan>();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults)));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("pending"));
  absl::Cleanup unblock = [&] { faults->Unblock(Op::kRelease); };
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(AsOwner("job-7")));

  faults->Set(Op::kRelease, {.fail_before = true});
  EXPECT_CODE(first.Release(), kUnavailable);
  // The background retry gets through to the backend but hangs there.
  faults->Set(Op::kRelease, {.block = true});
  ASSERT_TRUE(faults->WaitForBlocked(Op::kRelease, 1, kNoHang));

  // The same owner, from another thread, acquires again: it must not
  // re-enter the hold it asked to release.
  BackgroundAcquire again(*held, AsOwner("job-7"));
  absl::SleepFor(kLetWaiterBlock);
  EXPECT_FALSE(again.done()) << "acquired before the pending release ended";
  faults->Unblock(Op::kRelease);
  ASSERT_TRUE(again.WaitDone(kNoHang));
  ASSERT_OK(again.result());
  EXPECT_EQ(again.result()->hold_count, 1);
  EXPECT_GT(again.result()->fencing_token, first.fencing_token());
  EXPECT_OK(again.release_status());
}

TEST_P(Conformance, C21_ReleaseWhoseReplyWasLostLeavesTheLockFree) {
  auto faults = std::make_shared<FaultPlan>();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("reply lost"));
  ASSERT_OK_AND_ASSIGN(auto next, other->GetLock("reply lost"));
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(WithLease(kLongLease)));

  faults->Set(Op::kRelease, {.fail_after = true, .times = 1});
  EXPECT_CODE(first.Release(), kUnavailable);
  // It ran: the lock is free at once.
  ASSERT_OK_AND_ASSIGN(Hold taken, next->TryAcquire(WithLease(kLongLease)));
  // The client's retry finds the lock no longer its own, and leaves the
  // new holder alone (C4).
  ASSERT_TRUE(faults->WaitForCalls(Op::kRelease, 2, kNoHang));
  absl::SleepFor(kLetWaiterBlock);
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("reply lost"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, other->CurrentOwner());
  EXPECT_EQ(info.fencing_token, taken.fencing_token());
  EXPECT_OK(taken.Release());

  ASSERT_OK_AND_ASSIGN(Hold again, held->Acquire(WithLease(kLongLease)));
  EXPECT_EQ(again.hold_count(), 1);
  EXPECT_GT(again.fencing_token(), first.fencing_token());
  EXPECT_OK(again.Release());
}

TEST_P(Conformance, C21_RetriedAcquireAfterALostReplyLeavesNoExtraHold) {
  auto faults = std::make_shared<FaultPlan>();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("acquired twice"));
  ASSERT_OK_AND_ASSIGN(auto next, other->GetLock("acquired twice"));

  faults->Set(Op::kAcquire, {.fail_after = true, .times = 1});
  EXPECT_CODE(held->Acquire(WithLease(kLongLease)), kUnavailable);
  ASSERT_OK_AND_ASSIGN(Hold retried, held->Acquire(WithLease(kLongLease)));
  EXPECT_EQ(retried.hold_count(), 1);
  EXPECT_OK(retried.Release());

  // One release frees it: the lost acquisition left nothing counted.
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("acquired twice"));
  EXPECT_FALSE(info.locked)
      << "held by " << info.owner << " with " << info.hold_count << " holds";
  absl::StatusOr<Hold> taken = next->TryAcquire(WithLease(kLongLease));
  EXPECT_OK(taken);
  if (taken.ok()) {
    EXPECT_OK(taken->Release());
  }
}

TEST_P(Conformance, C21_ReentryWhoseReplyWasLostLeavesNoExtraHold) {
  auto faults = std::make_shared<FaultPlan>();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("re-entered blind"));
  // Renewed by the watchdog.
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  faults->Set(Op::kAcquire, {.fail_after = true, .times = 1});
  // The re-entry ran on the backend; only its reply was lost, and the
  // caller, told Unavailable (a try does not ride it out), has no Hold to
  // release it by.
  EXPECT_CODE(held->TryAcquire(), kUnavailable);
  // A waiting re-entry whose reply is lost tries again (C18): the backend
  // counts both attempts, the caller one Hold.
  faults->Set(Op::kAcquire, {.fail_after = true, .times = 1});
  ASSERT_OK_AND_ASSIGN(Hold inner, held->Acquire());
  EXPECT_OK(inner.Release());
  EXPECT_OK(hold.Release());  // the one acquisition left that the caller knows
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       other->Admin().Inspect("re-entered blind"));
  EXPECT_FALSE(info.locked) << "still held with " << info.hold_count
                            << " holds after the owner's last release";
}

TEST_P(Conformance, C1_RetriedAcquireOfASharedTokenLeavesTheOthersHold) {
  auto faults = std::make_shared<FaultPlan>();
  ASSERT_OK_AND_ASSIGN(auto first, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second, NewClient(Faulty(faults)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto by_first, first->GetLock("one token"));
  ASSERT_OK_AND_ASSIGN(auto by_second, second->GetLock("one token"));
  ASSERT_OK_AND_ASSIGN(auto by_other, other->GetLock("one token"));
  ASSERT_OK_AND_ASSIGN(Hold first_hold, by_first->Acquire(AsOwner("job-9")));
  // The second process's acquisition never reaches the backend; it tries
  // again and re-enters the first one's hold.
  faults->Set(Op::kAcquire, {.fail_before = true, .times = 1});
  EXPECT_CODE(by_second->Acquire(AsOwner("job-9")), kUnavailable);
  ASSERT_OK_AND_ASSIGN(Hold second_hold, by_second->Acquire(AsOwner("job-9")));
  EXPECT_OK(second_hold.Release());
  // The first process still holds it: nobody else may take it.
  EXPECT_EQ(first_hold.state(), LockState::kHeld);
  EXPECT_EQ(first->OwnerTokens().State("one token", "job-9"), LockState::kHeld);
  EXPECT_CODE(by_other->TryAcquire(WithLease(kLongLease)), kDeadlineExceeded);
  EXPECT_OK(first_hold.Release());
}

TEST_P(Conformance, C19_GrantSlowerThanItsLeaseIsNotBelieved) {
  auto faults = std::make_shared<FaultPlan>();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("slow grant"));
  ASSERT_OK_AND_ASSIGN(auto next, other->GetLock("slow grant"));
  constexpr absl::Duration kLease = absl::Milliseconds(500);

  // A try whose reply takes longer than the lease it started.
  faults->Set(Op::kAcquire,
              {.delay_after = kLease + absl::Milliseconds(200), .times = 1});
  absl::StatusOr<Hold> tried = held->TryAcquire(WithLease(kLease));
  EXPECT_FALSE(tried.ok() && tried->state() == LockState::kHeld)
      << "believes a hold whose lease ended before the reply came";
  if (tried.ok()) {
    EXPECT_CODE(tried->lost_reason(), kFailedPrecondition);
  }
  // Kept: only its lease ends it.
  ASSERT_OK_AND_ASSIGN(Hold next_hold, next->Acquire(WithLease(
                                           absl::Milliseconds(300), kNoHang)));

  // A wait whose winning attempt's reply is as slow: the lease counts from
  // that attempt, not from the reply.
  faults->Set(Op::kAcquire,
              {.delay_after = kLease + absl::Milliseconds(200), .times = 1});
  absl::StatusOr<Hold> waited = held->Acquire(WithLease(kLease, kNoHang));
  EXPECT_FALSE(waited.ok() && waited->state() == LockState::kHeld)
      << "believes a hold whose lease ended before the reply came";
  if (waited.ok()) {
    EXPECT_CODE(waited->lost_reason(), kFailedPrecondition);
  }
  // Nothing is left to wait out beyond that lease.
  absl::StatusOr<Hold> after =
      next->Acquire(WithLease(kLongLease, kLease + kNoHang));
  EXPECT_OK(after);
  if (after.ok()) {
    EXPECT_OK(after->Release());
  }
}

TEST_P(Conformance, C19_HolderThatCannotRenewStopsBelievingFirst) {
  auto faults = std::make_shared<FaultPlan>();
  constexpr absl::Duration kLease = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults, kLease)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("partitioned"));
  ASSERT_OK_AND_ASSIGN(auto next, other->GetLock("partitioned"));
  // Renewals hang, as behind a silent partition.
  absl::Cleanup heal = [&] { faults->Unblock(Op::kRenew); };
  faults->Set(Op::kRenew, {.block = true});
  std::atomic<int64_t> told_at_ns{0};
  AcquireOptions options;
  options.on_lost = [&](const LockLostEvent&) {
    told_at_ns = absl::ToInt64Nanoseconds(Clock::Real().Now().since_origin());
  };
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(options));

  ASSERT_OK_AND_ASSIGN(Hold next_hold,
                       next->Acquire(WithLease(kLongLease, kLease + kNoHang)));
  const int64_t granted_ns =
      absl::ToInt64Nanoseconds(Clock::Real().Now().since_origin());
  // At the other owner's grant the holder no longer believes, and was told.
  EXPECT_EQ(hold.state(), LockState::kLost);
  EXPECT_CODE(hold.lost_reason(), kFailedPrecondition);
  ASSERT_NE(told_at_ns.load(), 0) << "not told before another was granted";
  EXPECT_LT(told_at_ns.load(), granted_ns);
  EXPECT_OK(next_hold.Release());
}

TEST_P(Conformance, C21_HoldWhoseRenewalRepliesAreLostIsLetGo) {
  auto faults = std::make_shared<FaultPlan>();
  // Renewed every second; a renewal that got through keeps the lock on
  // the backend for 3 s more.
  constexpr absl::Duration kLease = absl::Seconds(3);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(Faulty(faults, kLease)));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("renewed blind"));
  ASSERT_OK_AND_ASSIGN(auto next, other->GetLock("renewed blind"));
  LostRecorder lost;
  AcquireOptions options;
  options.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(options));
  // Renewals reach the backend, which keeps the lock, but no reply does.
  faults->Set(Op::kRenew, {.fail_after = true});
  ASSERT_TRUE(lost.WaitForEvents(1, kLease + kNoHang));
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_EQ(hold.state(), LockState::kLost);
  // The client lets the lock go rather than leave it renewed for nobody:
  // free well before the lease of the last renewal would end.
  absl::StatusOr<Hold> taken = next->Acquire(WithLease(kLongLease, kPromptly));
  EXPECT_OK(taken);
  if (taken.ok()) {
    EXPECT_OK(taken->Release());
  }
  EXPECT_CODE(hold.Release(), kFailedPrecondition);
}

// C20, C21: a final release stuck behind a silent partition while the lease
// runs out. Its hold is told lost when the local deadline passes, while the
// release is still unanswered, and the caller gets its answer then too: the
// lock is free on the backend once the lease is over, whatever the release
// does.
TEST_P(Conformance, C20_ReleaseStuckPastTheLeaseIsToldAtTheDeadline) {
  constexpr absl::Duration kLease = absl::Seconds(1);
  FaultyHolder h;
  ASSERT_OK(StartFaultyHolder(
      [this](ClientOptions o) { return NewClient(std::move(o)); },
      "stuck release", kLease, h));
  const std::shared_ptr<FaultPlan>& faults = h.faults;
  const LostRecorder& lost = h.lost;
  ASSERT_OK_AND_ASSIGN(Hold hold, h.held->Acquire(h.watched));

  faults->Set(Op::kRelease, {.block = true});
  absl::Status released = absl::UnknownError("not returned");
  absl::Notification returned;
  std::thread releasing([&] {
    released = hold.Release();
    returned.Notify();
  });
  absl::Cleanup heal = [&] {
    faults->Unblock(Op::kRelease);
    releasing.join();
  };
  ASSERT_TRUE(faults->WaitForBlocked(Op::kRelease, 1, kNoHang));

  ASSERT_TRUE(lost.WaitForEvents(1, kLease + kNoHang))
      << "a release stuck past the lease left its hold untold";
  EXPECT_TRUE(returned.WaitForNotificationWithTimeout(kPromptly))
      << "Release() still waits on the backend after the hold was told lost";
  // Told, and answered, while the release was still stuck: at the deadline,
  // not when a reply or a timeout came.
  EXPECT_TRUE(faults->WaitForBlocked(Op::kRelease, 1, absl::ZeroDuration()));
  EXPECT_EQ(lost.Events()[0].fencing_token, hold.fencing_token());
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsLost(released)) << released;
  EXPECT_TRUE(absl::StrContains(released.message(),
                                "the lease ended before the release was "
                                "confirmed"))
      << released;

  // The lease is over on the backend: another owner gets the lock, and the
  // release that arrives late leaves it alone (C4). Nothing more is told.
  ASSERT_OK_AND_ASSIGN(Hold taken,
                       h.next->Acquire(WithLease(kLongLease, kNoHang)));
  std::move(heal).Invoke();
  EXPECT_EQ(SettledEvents(lost), 1u);
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       h.other->Admin().Inspect("stuck release"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fencing_token, taken.fencing_token());
  EXPECT_OK(taken.Release());
}

// C20, C21: a release that fails at once and whose background retries fail
// until the lease ends: the hold is told lost then, once; a release whose
// retry is confirmed in time stays silent.
TEST_P(Conformance, C20_ReleaseUnconfirmedUntilTheLeaseEndsIsToldOnce) {
  constexpr absl::Duration kLease = absl::Seconds(1);
  FaultyHolder h;
  ASSERT_OK(StartFaultyHolder(
      [this](ClientOptions o) { return NewClient(std::move(o)); },
      "never confirmed", kLease, h));
  const std::shared_ptr<FaultPlan>& faults = h.faults;
  const LostRecorder& lost = h.lost;

  ASSERT_OK_AND_ASSIGN(Hold confirmed, h.held->Acquire(h.watched));
  faults->Set(Op::kRelease, {.fail_before = true, .times = 1});
  EXPECT_CODE(confirmed.Release(), kUnavailable);
  absl::StatusOr<Hold> taken = absl::UnknownError("not tried");
  EXPECT_TRUE(Eventually(
      [&] {
        taken = h.next->TryAcquire(WithLease(kLongLease));
        return taken.ok();
      },
      kPromptly))
      << "the retried release did not free the lock: " << taken.status();
  if (taken.ok()) {
    EXPECT_OK(taken->Release());
  }

  ASSERT_OK_AND_ASSIGN(Hold unconfirmed, h.held->Acquire(h.watched));
  faults->Set(Op::kRelease, {.fail_before = true});
  EXPECT_CODE(unconfirmed.Release(), kUnavailable);
  ASSERT_TRUE(lost.WaitForEvents(1, kLease + kNoHang))
      << "a release never confirmed within the lease left its hold untold";
  faults->Clear(Op::kRelease);
  EXPECT_EQ(lost.Events()[0].fencing_token, unconfirmed.fencing_token());
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_EQ(SettledEvents(lost), 1u);
}

}  // namespace
}  // namespace dlock::test
