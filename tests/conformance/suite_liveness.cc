// Copyright dlock authors. Holder liveness (docs/reliability.md): a client
// whose liveness record lapses loses every hold, whatever its lease, before
// a waiter takes it over (C19), and the waiter does so within the TTL plus a
// round trip, woken by the backend's hint rather than polling (C9).
#include <memory>
#include <string>

#include "conformance_fixture.h"
#include "fault_backend.h"

namespace dlock::test {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(1);

TEST_P(Conformance, Liveness_LapsedHolderLosesALongLeaseToAWaiter) {
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions holder_options = SlowPollOptions();
  holder_options.liveness_ttl = kTtl;
  holder_options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> holder,
                       NewClient(holder_options));
  ClientOptions waiter_options = SlowPollOptions();
  waiter_options.liveness_ttl = kTtl;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> waiter,
                       NewClient(waiter_options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> held,
                       holder->GetLock("liveness"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> wanted,
                       waiter->GetLock("liveness"));
  LostRecorder lost;
  AcquireOptions ten_minutes{.lease = absl::Minutes(10),
                             .on_lost = lost.Callback()};
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(ten_minutes));
  ASSERT_OK_AND_ASSIGN(LockInfo info, waiter->Admin().Inspect("liveness"));
  ASSERT_TRUE(info.locked);

  const BackendTraits& traits = holder->traits();
  if (!traits.liveness_record) {
    // The session is the liveness (ZooKeeper, PostgreSQL session mode), or
    // there is none to tell (memory://): nothing to take over.
    if (traits.holds_tied_to_session) {
      EXPECT_EQ(info.holder_live, std::optional<bool>(true));
    } else {
      EXPECT_EQ(info.holder_live, std::nullopt);
    }
    EXPECT_EQ(wanted->TryAcquire({.lease = kLongLease}).status().code(),
              absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(faults->calls(FaultPlan::kLiveness), 0);
    EXPECT_OK(hold.Release());
    return;
  }
  EXPECT_EQ(info.holder_live, std::optional<bool>(true));
  EXPECT_EQ(wanted->TryAcquire({.lease = kLongLease}).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // The holder vanishes: its heartbeats stop reaching the backend.
  faults->Set(FaultPlan::kLiveness, {.fail_before = true});
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold taken,
                       wanted->Acquire({.wait = kNoHang, .lease = kLongLease}));
  const absl::Duration took = absl::Now() - start;
  // Within the TTL and a round trip; far sooner than the fallback poll,
  // so woken by the backend's hint.
  EXPECT_LT(took, kTtl + kPromptly);
  // The holder knew first (C19).
  EXPECT_EQ(hold.state(), LockState::kLost);
  EXPECT_TRUE(lost.WaitForEvents(1, kPromptly));
  EXPECT_GT(taken.fencing_token(), hold.fencing_token());
  ASSERT_OK_AND_ASSIGN(LockInfo after, waiter->Admin().Inspect("liveness"));
  EXPECT_EQ(after.owner, waiter->CurrentOwner());
  EXPECT_EQ(after.holder_live, std::optional<bool>(true));
  EXPECT_OK(taken.Release());
}

TEST_P(Conformance, Liveness_LiveHoldersOfASharedTokenKeepTheHold) {
  // Two clients hold one owner token (C6); one of them vanishes. The other
  // still believes the hold, so no waiter may take it (C19).
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions vanishing = SlowPollOptions();
  vanishing.liveness_ttl = kTtl;
  vanishing.backend_decorator = faults->Decorator();
  ClientOptions live = SlowPollOptions();
  live.liveness_ttl = kTtl;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> first, NewClient(vanishing));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> second, NewClient(live));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other, NewClient(live));
  AcquireOptions shared{.lease = absl::Minutes(10), .owner_token = "job-7"};
  ASSERT_OK_AND_ASSIGN(Hold a, (*first->GetLock("shared"))->Acquire(shared));
  ASSERT_OK_AND_ASSIGN(Hold b, (*second->GetLock("shared"))->Acquire(shared));
  faults->Set(FaultPlan::kLiveness, {.fail_before = true});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       other->GetLock("shared"));
  absl::StatusOr<Hold> taken =
      lock->Acquire({.wait = 2 * kTtl, .lease = kLongLease});
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kDeadlineExceeded)
      << taken.status();
  EXPECT_EQ(b.state(), LockState::kHeld);
  if (first->traits().liveness_record) {
    EXPECT_EQ(a.state(), LockState::kLost);
  }
  EXPECT_OK(b.Release());
}

TEST_P(Conformance, Liveness_AHoldKeptUntilItsLeaseEndsOutlivesTheTtl) {
  // Hold::KeepUntilLeaseEnd: nobody releases it, and it keeps others out
  // until its lease ends while its client lives; the client keeps its
  // liveness record up for it, though no acquisition of it is left.
  ClientOptions options = SlowPollOptions();
  options.liveness_ttl = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> keeper, NewClient(options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other, NewClient(options));
  ASSERT_OK_AND_ASSIGN(
      Hold marker,
      (*keeper->GetLock("marker"))->Acquire({.lease = absl::Minutes(1)}));
  EXPECT_OK(marker.KeepUntilLeaseEnd());
  absl::SleepFor(absl::Seconds(1.5));  // five TTLs
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       other->GetLock("marker"));
  EXPECT_EQ(lock->TryAcquire({.lease = kLongLease}).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace dlock::test
