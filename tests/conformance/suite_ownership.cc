// Copyright dlock authors. Conformance: the owner check (C4), re-entry (C5)
// and owner identity (C6).
#include <thread>

#include "conformance_fixture.h"

namespace dlock::testing {
namespace {

// The parts of a hold that nobody but its owner may change.
void ExpectSameHold(const LockInfo& before, const LockInfo& after) {
  EXPECT_TRUE(after.locked);
  EXPECT_EQ(after.owner, before.owner);
  EXPECT_EQ(after.hold_count, before.hold_count);
  EXPECT_EQ(after.fencing_token, before.fencing_token);
  EXPECT_EQ(after.since, before.since);
  // Only renewal lengthens a lease; nobody here may renew it.
  EXPECT_LE(after.remaining_lease, before.remaining_lease);
}

TEST_P(Conformance, C4_NonOwnerCannotReleaseOrRenew) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("owned"));
  ASSERT_OK_AND_ASSIGN(auto foreign, other->GetLock("owned"));
  ASSERT_OK(held->Acquire(WithLease(absl::Seconds(20))));
  ASSERT_OK_AND_ASSIGN(LockInfo before, held->Inspect());

  // Another client (on this very thread).
  EXPECT_CODE(foreign->Release(), kFailedPrecondition);
  EXPECT_CODE(foreign->Renew(), kFailedPrecondition);
  EXPECT_CODE(foreign->Renew(kLongLease), kFailedPrecondition);
  // An owner token nobody holds it with.
  EXPECT_CODE(held->Release("someone else"), kFailedPrecondition);
  EXPECT_CODE(held->Renew(kLongLease, "someone else"), kFailedPrecondition);
  // Another thread of the holder's client.
  std::thread([&] {
    EXPECT_CODE(held->Release(), kFailedPrecondition);
    EXPECT_CODE(held->Renew(kLongLease), kFailedPrecondition);
  }).join();

  ASSERT_OK_AND_ASSIGN(LockInfo after, foreign->Inspect());
  ExpectSameHold(before, after);
  EXPECT_EQ(held->State(), LockState::kHeld);
  ASSERT_OK(held->Release());
  ASSERT_OK_AND_ASSIGN(after, foreign->Inspect());
  EXPECT_FALSE(after.locked);
}

TEST_P(Conformance, C4_ExpiredOwnerCannotTouchNextHolder) {
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto next_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto expired, first_client->GetLock("handed on"));
  ASSERT_OK_AND_ASSIGN(auto next, next_client->GetLock("handed on"));

  ASSERT_OK(expired->Acquire(WithLease(absl::Milliseconds(300))));
  AcquireOptions wait = WithLease(kLongLease, kNoHang);
  ASSERT_OK_AND_ASSIGN(Acquired taken, next->Acquire(wait));
  ASSERT_OK_AND_ASSIGN(LockInfo before, next->Inspect());
  EXPECT_EQ(before.owner, next_client->CurrentOwner());

  EXPECT_CODE(expired->Renew(), kFailedPrecondition);
  EXPECT_CODE(expired->Renew(kLongLease), kFailedPrecondition);
  EXPECT_CODE(expired->Release(), kFailedPrecondition);
  EXPECT_CODE(expired->TryAcquire(), kDeadlineExceeded);

  ASSERT_OK_AND_ASSIGN(LockInfo after, next->Inspect());
  ExpectSameHold(before, after);
  EXPECT_EQ(after.fencing_token, taken.fencing_token);
  EXPECT_OK(next->Release());
}

TEST_P(Conformance, C5_HoldCountTracksReentries) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("reentrant"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("reentrant"));

  for (int64_t count = 1; count <= 3; ++count) {
    ASSERT_OK_AND_ASSIGN(Acquired acquired, held->TryAcquire());
    EXPECT_EQ(acquired.hold_count, count);
  }
  for (int64_t left = 2; left >= 0; --left) {
    ASSERT_OK_AND_ASSIGN(LockInfo info, contender->Inspect());
    EXPECT_TRUE(info.locked);
    EXPECT_EQ(info.hold_count, left + 1);
    EXPECT_CODE(contender->TryAcquire(), kDeadlineExceeded);
    ASSERT_OK(held->Release());
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, contender->Inspect());
  EXPECT_FALSE(info.locked);
  EXPECT_EQ(info.hold_count, 0);
  EXPECT_CODE(held->Release(), kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(Acquired acquired, contender->TryAcquire());
  EXPECT_EQ(acquired.hold_count, 1);
  EXPECT_OK(contender->Release());
}

TEST_P(Conformance, C5_ReentryNeverShortensLease) {
  constexpr absl::Duration kLease = absl::Seconds(20);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("long then short"));

  ASSERT_OK(held->Acquire(WithLease(kLease)));
  ASSERT_OK_AND_ASSIGN(Acquired again,
                       held->Acquire(WithLease(absl::Milliseconds(200))));
  EXPECT_EQ(again.hold_count, 2);
  ASSERT_OK_AND_ASSIGN(LockInfo info, held->Inspect());
  EXPECT_GT(info.remaining_lease, kLease - absl::Seconds(5));
  // A renewal asking for less keeps the maximum too.
  ASSERT_OK(held->Renew(absl::Milliseconds(200)));
  ASSERT_OK_AND_ASSIGN(info, held->Inspect());
  EXPECT_GT(info.remaining_lease, kLease - absl::Seconds(5));

  absl::SleepFor(absl::Milliseconds(500));  // past the short lease
  ASSERT_OK_AND_ASSIGN(info, held->Inspect());
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(held->State(), LockState::kHeld);
  ASSERT_OK(held->Release());
  ASSERT_OK(held->Release());
}

// The lease becomes the larger of what remains and what was asked.
TEST_P(Conformance, C5_ReentryWithLongerLeaseExtendsIt) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("short then long"));
  ASSERT_OK(held->Acquire(WithLease(absl::Seconds(1))));
  ASSERT_OK(held->Acquire(WithLease(absl::Seconds(20))));
  ASSERT_OK_AND_ASSIGN(LockInfo info, held->Inspect());
  EXPECT_GT(info.remaining_lease, absl::Seconds(15));
  absl::SleepFor(absl::Milliseconds(1200));  // past the first lease
  ASSERT_OK_AND_ASSIGN(info, held->Inspect());
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(held->State(), LockState::kHeld);
  ASSERT_OK(held->Release());
  ASSERT_OK(held->Release());
}

// The kept maximum lives on the backend: an owner re-entering through
// another client (as another process would, with the same owner token)
// cannot shorten it, and its renewals restore it.
TEST_P(Conformance, C5_KeptMaximumLeaseBindsOwnerInAnotherClient) {
  constexpr absl::Duration kLease = absl::Seconds(6);
  constexpr absl::Duration kShort = absl::Milliseconds(500);
  constexpr char kOwner[] = "job-7";
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("kept maximum"));
  ASSERT_OK_AND_ASSIGN(auto second, second_client->GetLock("kept maximum"));

  ASSERT_OK(first->Acquire(AsOwner(kOwner, kLease)));
  absl::SleepFor(absl::Milliseconds(1500));
  ASSERT_OK_AND_ASSIGN(Acquired again,
                       second->TryAcquire(AsOwner(kOwner, kShort)));
  EXPECT_EQ(again.hold_count, 2);
  ASSERT_OK_AND_ASSIGN(LockInfo info, second->Inspect());
  EXPECT_GT(info.remaining_lease, kLease - absl::Milliseconds(2500))
      << "the re-entry shortened the lease";
  EXPECT_LT(info.remaining_lease, kLease - absl::Seconds(1));

  ASSERT_OK(second->Renew(kShort, kOwner));
  ASSERT_OK_AND_ASSIGN(info, second->Inspect());
  EXPECT_GT(info.remaining_lease, kLease - absl::Milliseconds(800))
      << "a renewal did not restore the kept maximum lease";

  ASSERT_OK(second->Release(kOwner));
  ASSERT_OK(second->Release(kOwner));
  ASSERT_OK_AND_ASSIGN(info, second->Inspect());
  EXPECT_FALSE(info.locked);
}

// The default owner is client id plus thread: the same thread acting through
// another client is someone else.
TEST_P(Conformance, C6_SameThreadInAnotherClientIsNotOwner) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  EXPECT_NE(holder->CurrentOwner(), other->CurrentOwner());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("mine"));
  ASSERT_OK_AND_ASSIGN(auto foreign, other->GetLock("mine"));

  ASSERT_OK(held->Acquire());
  EXPECT_CODE(foreign->TryAcquire(), kDeadlineExceeded);
  ASSERT_OK_AND_ASSIGN(bool mine, held->IsHeldByMe());
  EXPECT_TRUE(mine);
  ASSERT_OK_AND_ASSIGN(mine, foreign->IsHeldByMe());
  EXPECT_FALSE(mine);
  EXPECT_EQ(foreign->State(), LockState::kNotHeld);
  EXPECT_CODE(foreign->FencingToken(), kFailedPrecondition);
  EXPECT_CODE(foreign->Release(), kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(LockInfo info, foreign->Inspect());
  EXPECT_EQ(info.owner, holder->CurrentOwner());
  EXPECT_OK(held->Release());
}

TEST_P(Conformance, C6_AnotherThreadIsNotOwner) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("this thread's"));
  ASSERT_OK(lock->Acquire());
  const std::string main_owner = client->CurrentOwner();
  std::thread([&] {
    EXPECT_NE(client->CurrentOwner(), main_owner);
    EXPECT_CODE(lock->TryAcquire(), kDeadlineExceeded);
    absl::StatusOr<bool> mine = lock->IsHeldByMe();
    ASSERT_OK(mine);
    EXPECT_FALSE(*mine);
    EXPECT_EQ(lock->State(), LockState::kNotHeld);
    EXPECT_CODE(lock->Release(), kFailedPrecondition);
  }).join();
  EXPECT_EQ(lock->State(), LockState::kHeld);
  EXPECT_OK(lock->Release());
}

// An explicit owner token lets another client (or thread) re-enter and
// release, as an RPC carrying a job id would.
TEST_P(Conformance, C6_ExplicitOwnerTokenWorksAcrossClients) {
  constexpr char kJob[] = "job-42";
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("job lock"));
  ASSERT_OK_AND_ASSIGN(auto second, second_client->GetLock("job lock"));

  ASSERT_OK_AND_ASSIGN(Acquired acquired, first->Acquire(AsOwner(kJob)));
  ASSERT_OK_AND_ASSIGN(bool mine, second->IsHeldByMe(kJob));
  EXPECT_TRUE(mine);
  ASSERT_OK_AND_ASSIGN(mine, second->IsHeldByMe());
  EXPECT_FALSE(mine);
  EXPECT_CODE(second->TryAcquire(), kDeadlineExceeded);
  EXPECT_CODE(second->TryAcquire(AsOwner("job-43")), kDeadlineExceeded);
  EXPECT_CODE(first->Release(), kFailedPrecondition);

  ASSERT_OK_AND_ASSIGN(Acquired again, second->TryAcquire(AsOwner(kJob)));
  EXPECT_EQ(again.hold_count, 2);
  EXPECT_EQ(again.fencing_token, acquired.fencing_token);
  // Another thread of the first client releases one hold by the token...
  std::thread([&] { EXPECT_OK(first->Release(kJob)); }).join();
  ASSERT_OK_AND_ASSIGN(LockInfo info, second->Inspect());
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 1);
  // ...and the second client the last one.
  ASSERT_OK(second->Release(kJob));
  ASSERT_OK_AND_ASSIGN(info, second->Inspect());
  EXPECT_FALSE(info.locked);
}

}  // namespace
}  // namespace dlock::testing
