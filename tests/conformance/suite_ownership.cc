// Copyright dlock authors. Conformance: the owner check (C4), re-entry (C5)
// and owner identity (C6).
#include <thread>

#include "conformance_fixture.h"

namespace dlock::test {
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

// FailedPrecondition, marked as the owner check's refusal (C4).
::testing::AssertionResult RefusedAsNotOwner(const absl::Status& status) {
  if (absl::IsFailedPrecondition(status) && IsNotOwner(status)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "should be FailedPrecondition (IsNotOwner) but is "
         << (status.ok() ? "OK" : status.ToString());
}

TEST_P(Conformance, C4_NonOwnerCannotReleaseOrRenew) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("owned"));
  ASSERT_OK_AND_ASSIGN(auto foreign, other->GetLock("owned"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(absl::Seconds(20))));
  ASSERT_OK_AND_ASSIGN(LockInfo before, holder->Admin().Inspect("owned"));

  // Nobody without the Hold can take it off or renew it. A non-owner's only
  // way to name the hold is by owner token: the holder's owner id is not one.
  // Another client (on this very thread).
  EXPECT_TRUE(
      RefusedAsNotOwner(other->OwnerTokens().Release("owned", before.owner)));
  EXPECT_TRUE(
      RefusedAsNotOwner(other->OwnerTokens().Renew("owned", before.owner)));
  EXPECT_TRUE(RefusedAsNotOwner(
      other->OwnerTokens().Renew("owned", before.owner, kLongLease)));
  // An owner token nobody holds it with.
  EXPECT_TRUE(RefusedAsNotOwner(
      holder->OwnerTokens().Release("owned", "someone else")));
  EXPECT_TRUE(RefusedAsNotOwner(
      holder->OwnerTokens().Renew("owned", "someone else", kLongLease)));
  // Another thread of the holder's client.
  std::thread([&] {
    EXPECT_TRUE(RefusedAsNotOwner(
        holder->OwnerTokens().Release("owned", before.owner)));
    EXPECT_TRUE(RefusedAsNotOwner(
        holder->OwnerTokens().Renew("owned", before.owner, kLongLease)));
  }).join();

  ASSERT_OK_AND_ASSIGN(LockInfo after, other->Admin().Inspect("owned"));
  ExpectSameHold(before, after);
  EXPECT_EQ(hold.state(), LockState::kHeld);
  ASSERT_OK(hold.Release());
  ASSERT_OK_AND_ASSIGN(after, other->Admin().Inspect("owned"));
  EXPECT_FALSE(after.locked);
}

TEST_P(Conformance, C4_ExpiredOwnerCannotTouchNextHolder) {
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto next_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto expired, first_client->GetLock("handed on"));
  ASSERT_OK_AND_ASSIGN(auto next, next_client->GetLock("handed on"));

  // Kept: only its lease ends it.
  ASSERT_OK_AND_ASSIGN(Hold expired_hold,
                       expired->Acquire(WithLease(absl::Milliseconds(300))));
  AcquireOptions wait = WithLease(kLongLease, kNoHang);
  ASSERT_OK_AND_ASSIGN(Hold taken, next->Acquire(wait));
  ASSERT_OK_AND_ASSIGN(LockInfo before,
                       next_client->Admin().Inspect("handed on"));
  EXPECT_EQ(before.owner, next_client->CurrentOwner());

  EXPECT_CODE(expired_hold.Renew(), kFailedPrecondition);
  EXPECT_CODE(expired_hold.Renew(kLongLease), kFailedPrecondition);
  EXPECT_CODE(expired_hold.Release(), kFailedPrecondition);
  absl::StatusOr<Hold> tried = expired->TryAcquire();
  EXPECT_CODE(tried, kDeadlineExceeded);
  EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();

  ASSERT_OK_AND_ASSIGN(LockInfo after,
                       next_client->Admin().Inspect("handed on"));
  ExpectSameHold(before, after);
  EXPECT_EQ(after.fencing_token, taken.fencing_token());
  EXPECT_OK(taken.Release());
}

TEST_P(Conformance, C5_HoldCountTracksReentries) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("reentrant"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("reentrant"));

  std::vector<Hold> holds;
  for (int64_t count = 1; count <= 3; ++count) {
    ASSERT_OK_AND_ASSIGN(Hold acquired, held->TryAcquire());
    EXPECT_EQ(acquired.hold_count(), count);
    holds.push_back(std::move(acquired));
  }
  for (int64_t left = 2; left >= 0; --left) {
    ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("reentrant"));
    EXPECT_TRUE(info.locked);
    EXPECT_EQ(info.hold_count, left + 1);
    EXPECT_CODE(contender->TryAcquire(), kDeadlineExceeded);
    ASSERT_OK(holds[left].Release());
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("reentrant"));
  EXPECT_FALSE(info.locked);
  EXPECT_EQ(info.hold_count, 0);
  // Nothing is left to release.
  const absl::Status released = holds[0].Release();
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;
  ASSERT_OK_AND_ASSIGN(Hold acquired, contender->TryAcquire());
  EXPECT_EQ(acquired.hold_count(), 1);
  EXPECT_OK(acquired.Release());
}

TEST_P(Conformance, C5_ReentryNeverShortensLease) {
  constexpr absl::Duration kLease = absl::Seconds(20);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("long then short"));

  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(WithLease(kLease)));
  ASSERT_OK_AND_ASSIGN(Hold again,
                       held->Acquire(WithLease(absl::Milliseconds(200))));
  EXPECT_EQ(again.hold_count(), 2);
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       holder->Admin().Inspect("long then short"));
  EXPECT_GT(info.remaining_lease, kLease - absl::Seconds(5));
  // A renewal asking for less keeps the maximum too.
  ASSERT_OK(again.Renew(absl::Milliseconds(200)));
  ASSERT_OK_AND_ASSIGN(info, holder->Admin().Inspect("long then short"));
  EXPECT_GT(info.remaining_lease, kLease - absl::Seconds(5));

  absl::SleepFor(absl::Milliseconds(500));  // past the short lease
  ASSERT_OK_AND_ASSIGN(info, holder->Admin().Inspect("long then short"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(again.state(), LockState::kHeld);
  EXPECT_EQ(first.state(), LockState::kHeld);
  ASSERT_OK(again.Release());
  ASSERT_OK(first.Release());
}

// The lease becomes the larger of what remains and what was asked.
TEST_P(Conformance, C5_ReentryWithLongerLeaseExtendsIt) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("short then long"));
  // The short lease need only outlast one round trip, to the re-entry.
  constexpr absl::Duration kShort = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(WithLease(kShort)));
  ASSERT_OK_AND_ASSIGN(Hold again, held->Acquire(WithLease(absl::Seconds(20))));
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       holder->Admin().Inspect("short then long"));
  EXPECT_GT(info.remaining_lease, absl::Seconds(15));
  absl::SleepFor(kShort + absl::Milliseconds(200));  // past the first lease
  ASSERT_OK_AND_ASSIGN(info, holder->Admin().Inspect("short then long"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(first.state(), LockState::kHeld);
  EXPECT_EQ(again.state(), LockState::kHeld);
  ASSERT_OK(again.Release());
  ASSERT_OK(first.Release());
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

  // The first client's hold is released below by the second client, by
  // token: this Hold is not released through.
  ASSERT_OK_AND_ASSIGN(Hold first_hold,
                       first->Acquire(AsOwner(kOwner, kLease)));
  absl::SleepFor(absl::Milliseconds(1500));
  ASSERT_OK_AND_ASSIGN(Hold again, second->TryAcquire(AsOwner(kOwner, kShort)));
  EXPECT_EQ(again.hold_count(), 2);
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       second_client->Admin().Inspect("kept maximum"));
  EXPECT_GT(info.remaining_lease, kLease - absl::Milliseconds(2500))
      << "the re-entry shortened the lease";
  EXPECT_LT(info.remaining_lease, kLease - absl::Seconds(1));

  ASSERT_OK(again.Renew(kShort));
  ASSERT_OK_AND_ASSIGN(info, second_client->Admin().Inspect("kept maximum"));
  EXPECT_GT(info.remaining_lease, kLease - absl::Milliseconds(800))
      << "a renewal did not restore the kept maximum lease";

  ASSERT_OK(again.Release());
  ASSERT_OK(second_client->OwnerTokens().Release(
      "kept maximum", kOwner));  // the first client's hold
  ASSERT_OK_AND_ASSIGN(info, second_client->Admin().Inspect("kept maximum"));
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

  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  // The other client hands out no hold: nothing it could believe.
  absl::StatusOr<Hold> tried = foreign->TryAcquire();
  EXPECT_CODE(tried, kDeadlineExceeded);
  EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
  EXPECT_FALSE(tried.ok() && tried->state() == LockState::kHeld);
  ASSERT_OK_AND_ASSIGN(bool mine, hold.IsHeldOnBackend());
  EXPECT_TRUE(mine);
  ASSERT_OK_AND_ASSIGN(LockInfo seen, other->Admin().Inspect("mine"));
  EXPECT_NE(seen.owner, other->CurrentOwner());
  // Nor can it release the hold by naming the holder's owner id.
  const absl::Status released =
      other->OwnerTokens().Release("mine", hold.owner());
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("mine"));
  EXPECT_EQ(info.owner, holder->CurrentOwner());
  EXPECT_OK(hold.Release());
}

TEST_P(Conformance, C6_AnotherThreadIsNotOwner) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("this thread's"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  const std::string main_owner = client->CurrentOwner();
  std::thread([&] {
    EXPECT_NE(client->CurrentOwner(), main_owner);
    // Another owner: handed no hold it could believe.
    absl::StatusOr<Hold> tried = lock->TryAcquire();
    EXPECT_CODE(tried, kDeadlineExceeded);
    EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
    EXPECT_FALSE(tried.ok() && tried->state() == LockState::kHeld);
    absl::StatusOr<LockInfo> info = client->Admin().Inspect("this thread's");
    ASSERT_OK(info);
    EXPECT_NE(info->owner, client->CurrentOwner());
    // Nor can it release the hold by naming the main thread's owner id.
    const absl::Status released =
        client->OwnerTokens().Release("this thread's", main_owner);
    EXPECT_CODE(released, kFailedPrecondition);
    EXPECT_TRUE(IsNotOwner(released)) << released;
  }).join();
  EXPECT_EQ(hold.state(), LockState::kHeld);
  EXPECT_OK(hold.Release());
}

// An explicit owner token lets another client (or thread) re-enter and
// release, as an RPC carrying a job id would.
TEST_P(Conformance, C6_ExplicitOwnerTokenWorksAcrossClients) {
  constexpr char kJob[] = "job-42";
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("job lock"));
  ASSERT_OK_AND_ASSIGN(auto second, second_client->GetLock("job lock"));

  ASSERT_OK_AND_ASSIGN(Hold acquired, first->Acquire(AsOwner(kJob)));
  // The token's owner holds it, as the second client sees it...
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       second_client->Admin().Inspect("job lock"));
  EXPECT_EQ(info.owner, acquired.owner());
  // ...and neither thread owner does.
  EXPECT_NE(info.owner, second_client->CurrentOwner());
  EXPECT_NE(info.owner, first_client->CurrentOwner());
  EXPECT_CODE(second->TryAcquire(), kDeadlineExceeded);
  EXPECT_CODE(second->TryAcquire(AsOwner("job-43")), kDeadlineExceeded);
  // The first client's thread, by its own owner id, is not the owner.
  const absl::Status released = first_client->OwnerTokens().Release(
      "job lock", first_client->CurrentOwner());
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;

  ASSERT_OK_AND_ASSIGN(Hold again, second->TryAcquire(AsOwner(kJob)));
  EXPECT_EQ(again.hold_count(), 2);
  EXPECT_EQ(again.fencing_token(), acquired.fencing_token());
  // Another thread of the first client, which has no Hold (as an RPC
  // carrying the job id), releases one hold by the token...
  std::thread([&] {
    EXPECT_OK(first_client->OwnerTokens().Release("job lock", kJob));
  }).join();
  ASSERT_OK_AND_ASSIGN(info, second_client->Admin().Inspect("job lock"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 1);
  // ...and the second client the last one.
  ASSERT_OK(again.Release());
  ASSERT_OK_AND_ASSIGN(info, second_client->Admin().Inspect("job lock"));
  EXPECT_FALSE(info.locked);
}

// Issue 9: a hold taken for an explicit owner token is released through its
// Hold, without naming the token again, by Release() or by the Hold's
// destructor. (In 0.1 the release had to repeat the token; one without it
// failed and left the lock held.)
TEST_P(Conformance, C6_OwnerTokenHoldReleasesThroughItsHold) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job lock"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("job lock"));

  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire({.owner_token = "job-1"}));
  EXPECT_EQ(hold.hold_count(), 1);
  EXPECT_EQ(hold.state(), LockState::kHeld);
  EXPECT_EQ(client->OwnerTokens().State("job lock", "job-1"), LockState::kHeld);
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("job lock"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, hold.owner());
  EXPECT_NE(info.owner, client->CurrentOwner());
  EXPECT_CODE(contender->TryAcquire(), kDeadlineExceeded);

  ASSERT_OK(hold.Release());
  EXPECT_EQ(hold.state(), LockState::kNotHeld);
  EXPECT_EQ(client->OwnerTokens().State("job lock", "job-1"),
            LockState::kNotHeld);
  ASSERT_OK_AND_ASSIGN(info, other->Admin().Inspect("job lock"));
  EXPECT_FALSE(info.locked) << "held by " << info.owner << " with "
                            << info.hold_count << " holds after the release";
  EXPECT_EQ(info.hold_count, 0);
  // Released once: nothing is left to release, by Hold or by token.
  const absl::Status again = hold.Release();
  EXPECT_CODE(again, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(again)) << again;
  EXPECT_CODE(client->OwnerTokens().Release("job lock", "job-1"),
              kFailedPrecondition);
  // Another client can take it.
  ASSERT_OK_AND_ASSIGN(Hold taken,
                       contender->TryAcquire(WithLease(kLongLease)));
  EXPECT_EQ(taken.hold_count(), 1);
  ASSERT_OK(taken.Release());

  // The same through the Hold's destructor.
  {
    ASSERT_OK_AND_ASSIGN(Hold scoped, lock->Acquire({.owner_token = "job-1"}));
    EXPECT_EQ(scoped.state(), LockState::kHeld);
  }
  EXPECT_EQ(client->OwnerTokens().State("job lock", "job-1"),
            LockState::kNotHeld);
  ASSERT_OK_AND_ASSIGN(info, other->Admin().Inspect("job lock"));
  EXPECT_FALSE(info.locked) << "the Hold's destructor left it held";
  ASSERT_OK_AND_ASSIGN(taken, contender->TryAcquire(WithLease(kLongLease)));
  EXPECT_OK(taken.Release());
}

}  // namespace
}  // namespace dlock::test
