// Copyright dlock authors. Conformance: every loss is told exactly once,
// whatever notices it first (C20), and owners stay apart when clients share
// a configured client id (C6). Public API only, so the cases also run
// against older builds of the library.
#include <string>

#include "absl/strings/match.h"
#include "conformance_fixture.h"

namespace dlock::test {
namespace {

TEST_P(Conformance, C20_ExplicitLeaseEndIsToldOnce) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("leased"));
  LostRecorder lost;
  AcquireOptions options = WithLease(absl::Milliseconds(400));
  options.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold acquired, lock->Acquire(options));

  // Told when the lease runs out, though nobody asked about the lock.
  ASSERT_TRUE(lost.WaitForEvents(1, absl::Milliseconds(400) + kNoHang))
      << "no notice when the explicit lease ran out";
  EXPECT_EQ(lost.Events()[0].fencing_token, acquired.fencing_token());
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_EQ(acquired.state(), LockState::kLost);
  EXPECT_CODE(acquired.lost_reason(), kFailedPrecondition);
  EXPECT_CODE(acquired.Release(), kFailedPrecondition);
  EXPECT_EQ(SettledEvents(lost), 1u);
}

TEST_P(Conformance, C20_LossFoundByReleaseIsToldOnce) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("taken away"));
  LostRecorder lost;
  AcquireOptions options;  // renewed, with the default 30 s lease: the
  options.on_lost = lost.Callback();  // watchdog will not look soon
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(options));
  ASSERT_OK(admin->Admin().ForceUnlock("taken away"));

  const absl::Status released = hold.Release();
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsLost(released)) << released;
  // The release found the loss, so the notice has run by now.
  ASSERT_EQ(lost.Events().size(), 1u) << "the release found a loss untold";
  EXPECT_FALSE(lost.Events()[0].reason.ok());
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_EQ(hold.state(), LockState::kNotHeld);
  EXPECT_EQ(SettledEvents(lost), 1u);
}

TEST_P(Conformance, C20_LossToldOnceWhateverNoticesIt) {
  ClientOptions client_options;
  client_options.watchdog_lease = kShortWatchdogLease;
  LostRecorder client_lost;
  client_options.on_lost = client_lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(client_options));
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("noticed"));
  LostRecorder outer, inner;
  AcquireOptions options;
  options.on_lost = outer.Callback();
  ASSERT_OK_AND_ASSIGN(Hold outer_hold, held->Acquire(options));
  options.on_lost = inner.Callback();
  // A re-entry asks to be told too.
  ASSERT_OK_AND_ASSIGN(Hold inner_hold, held->Acquire(options));
  ASSERT_OK(admin->Admin().ForceUnlock("noticed"));

  // The watchdog finds it; then a renewal and a release find it again.
  ASSERT_TRUE(outer.WaitForEvents(1, kShortWatchdogLease + kNoHang));
  EXPECT_CODE(outer_hold.Renew(), kFailedPrecondition);
  EXPECT_CODE(inner_hold.Release(), kFailedPrecondition);
  EXPECT_EQ(SettledEvents(outer), 1u);
  EXPECT_EQ(inner.Events().size(), 1u);
  EXPECT_EQ(client_lost.Events().size(), 1u);
}

TEST_P(Conformance, C20_CloseTellsEveryHoldItEnds) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto renewed, client->GetLock("renewed"));
  ASSERT_OK_AND_ASSIGN(auto leased, client->GetLock("leased"));
  LostRecorder lost;
  AcquireOptions options;
  options.on_lost = lost.Callback();
  // Both kept until Close() ends them.
  ASSERT_OK_AND_ASSIGN(Hold renewed_hold, renewed->Acquire(options));
  options.lease = kLongLease;
  ASSERT_OK_AND_ASSIGN(Hold leased_hold, leased->Acquire(options));
  ASSERT_OK(client->Close());
  // Both were still held, and Close() ended them: told once each.
  ASSERT_EQ(lost.Events().size(), 2u);
  EXPECT_NE(lost.Events()[0].name, lost.Events()[1].name);
  EXPECT_EQ(SettledEvents(lost), 2u);
}

TEST_P(Conformance, C20_HoldReplacedByAFreshGrantIsTold) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("forced, then again"));
  LostRecorder lost;
  AcquireOptions options = WithLease(kLongLease);
  options.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(options));
  ASSERT_OK(admin->Admin().ForceUnlock("forced, then again"));
  // Before anything noticed the loss, the owner acquires again: the
  // backend grants a new hold, and the one the outer code still relies on
  // is over. Its acquisition is told.
  ASSERT_OK_AND_ASSIGN(Hold second, held->Acquire(WithLease(kLongLease)));
  EXPECT_GT(second.fencing_token(), first.fencing_token());
  ASSERT_TRUE(lost.WaitForEvents(1, kNoHang))
      << "the hold the new grant replaced was never told lost";
  EXPECT_EQ(lost.Events()[0].fencing_token, first.fencing_token());
  EXPECT_TRUE(IsLost(lost.Events()[0].reason)) << lost.Events()[0].reason;
  EXPECT_EQ(SettledEvents(lost), 1u);
  EXPECT_OK(second.Release());
}

TEST_P(Conformance, C20_ReleasedInnerAcquisitionIsNotTold) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("nested"));
  LostRecorder outer, inner;
  AcquireOptions options = WithLease(kLongLease);
  options.on_lost = outer.Callback();
  ASSERT_OK_AND_ASSIGN(Hold outer_hold, held->Acquire(options));
  options.on_lost = inner.Callback();
  ASSERT_OK_AND_ASSIGN(Hold inner_hold, held->Acquire(options));
  ASSERT_OK(inner_hold.Release());  // its callback goes with it
  ASSERT_OK(admin->Admin().ForceUnlock("nested"));
  EXPECT_CODE(outer_hold.Release(), kFailedPrecondition);
  EXPECT_EQ(outer.Events().size(), 1u);
  EXPECT_EQ(SettledEvents(inner), 0u)
      << "an acquisition already released was told of a later loss";
}

TEST_P(Conformance, C6_ClientsSharingAClientIdAreDistinctOwners) {
  // A "stable id" from configuration, given to two clients (two services,
  // or two processes started from one config).
  ClientOptions shared_id;
  shared_id.client_id = "0123456789abcdef0123456789abcdef";
  ASSERT_OK_AND_ASSIGN(auto first, NewClient(shared_id));
  ASSERT_OK_AND_ASSIGN(auto second, NewClient(shared_id));
  EXPECT_NE(first->CurrentOwner(), second->CurrentOwner());
  ASSERT_OK_AND_ASSIGN(auto by_first, first->GetLock("one owner"));
  ASSERT_OK_AND_ASSIGN(auto by_second, second->GetLock("one owner"));
  ASSERT_OK_AND_ASSIGN(Hold hold, by_first->Acquire(WithLease(kLongLease)));
  // The same thread, through the other client: another owner, handed no
  // hold it could believe.
  absl::StatusOr<Hold> tried = by_second->TryAcquire(WithLease(kLongLease));
  EXPECT_CODE(tried, kDeadlineExceeded);
  EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
  EXPECT_FALSE(tried.ok() && tried->state() == LockState::kHeld);
  // Nor can it release the first client's hold by naming its owner.
  const absl::Status released =
      second->OwnerTokens().Release("one owner", hold.owner());
  EXPECT_CODE(released, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(released)) << released;
  ASSERT_OK_AND_ASSIGN(LockInfo info, second->Admin().Inspect("one owner"));
  EXPECT_EQ(info.owner, first->CurrentOwner());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_OK(hold.Release());
}

}  // namespace
}  // namespace dlock::test
