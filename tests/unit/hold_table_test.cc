// Copyright dlock authors. Unit tests of the client core's hold table
// (core/src/hold_table.h) on a ManualClock, with no backend and no thread:
// grants and re-entries (C5), local deadlines (C19), losses told once (C20),
// what releases and renewals change, and holder liveness.
#include "hold_table.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lease_policy.h"
#include "status_testing.h"

namespace dlock::internal {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kLease = absl::Seconds(3);

class HoldTableTest : public ::testing::Test {
 protected:
  // A grant sent now, with `token`.
  Grant GrantNow(uint64_t token, int64_t count = 1) {
    return Grant{.fencing_token = token,
                 .hold_count = count,
                 .sent = clock_.Now(),
                 .record = std::make_shared<HoldRecord>()};
  }
  // Records a grant of `key_in` and returns the Hold's reference to it.
  HoldRef Acquire(const HoldKey& key_in, uint64_t token,
                  std::optional<absl::Duration> lease = kLease) {
    const HoldKey& key = keys_.emplace_back(key_in);  // outlives the ref
    std::shared_ptr<AcquisitionShare> acquisition;
    bool fresh = false;
    const AcquireCall call{.name = key.first,
                           .owner = key.second,
                           .owner_kind = OwnerKind::kToken,
                           .lease = lease.value_or(kLease)};
    HoldEntry& hold =
        table_.RecordGrant(key, call, GrantNow(token),
                           AcquireOptions{.lease = lease}, acquisition, fresh);
    shares_.push_back(acquisition);  // as its Hold would keep it
    return HoldRef{.name = key.first,
                   .owner = key.second,
                   .generation = hold.generation,
                   .acquisition = acquisition.get()};
  }
  std::vector<LossNotice> Queued() {
    std::vector<LossNotice> out;
    while (std::optional<LossNotice> n = table_.TakeQueuedNotice()) {
      out.push_back(*std::move(n));
    }
    return out;
  }

  std::deque<HoldKey> keys_;
  std::vector<std::shared_ptr<AcquisitionShare>> shares_;
  ManualClock clock_;
  Alarms alarms_{clock_};
  PendingReleases pending_{clock_, alarms_};
  MonoTime bound_ = MonoTime::InfiniteFuture();  // the backend's HeldUntil
  HoldTable table_{
      clock_, [this](const HoldKeyView&, const HoldRecord*) { return bound_; },
      pending_, alarms_};
  const HoldKey key_{"lock", "t:job"};
};

TEST_F(HoldTableTest, AHoldIsBelievedUntilItsLocalDeadline) {
  const HoldRef ref = Acquire(key_, 7);
  EXPECT_EQ(*table_.Believed(ref), 7u);
  // The deadline is the send plus the lease less the drift margin; the
  // loss is noticed a little before it.
  const absl::Duration believed =
      kLease - DriftMargin(kLease) -
      NoticeLead(kLease, absl::ZeroDuration(), kLease);
  clock_.Advance(believed - absl::Milliseconds(1));
  EXPECT_OK(table_.Believed(ref));
  clock_.Advance(absl::Milliseconds(1));
  absl::StatusOr<uint64_t> after = table_.Believed(ref);
  EXPECT_TRUE(IsLost(after.status())) << after.status();
  // Told once, as a lease that ran out; what the backend may still count is
  // let go in the background (C21).
  std::vector<LossNotice> told = Queued();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].cause, LossCause::kLeaseEnded);
  EXPECT_TRUE(IsLost(told[0].event.reason));
  EXPECT_TRUE(pending_.Contains(key_));
  EXPECT_TRUE(IsLost(table_.Believed(ref).status()));
  EXPECT_TRUE(Queued().empty()) << "a loss is told once";
}

TEST_F(HoldTableTest, TheBackendsBoundEndsBeliefSooner) {
  const HoldRef ref = Acquire(key_, 7);
  bound_ = clock_.Now() + absl::Seconds(1);
  clock_.Advance(absl::Seconds(1));
  absl::StatusOr<uint64_t> after = table_.Believed(ref);
  EXPECT_TRUE(IsLost(after.status()));
  EXPECT_THAT(std::string(after.status().message()),
              HasSubstr("backend session"));
  std::vector<LossNotice> told = Queued();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].cause, LossCause::kUnconfirmed);
}

// A notifier woken late lately (C20): belief ends, and the loss is told,
// that much sooner; by at most a quarter of the lease however late.
TEST_F(HoldTableTest, ALateNotifierEndsBeliefSoonerByAtMostAQuarterLease) {
  const absl::Duration deadline = kLease - DriftMargin(kLease);
  const absl::Duration fixed = NoticeLead(kLease, absl::ZeroDuration(), kLease);
  table_.SetWakeLateness(absl::Milliseconds(300));
  const HoldRef late = Acquire(key_, 7);
  clock_.Advance(deadline - fixed - absl::Milliseconds(301));
  EXPECT_OK(table_.Believed(late));
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(IsLost(table_.Believed(late).status()));
  EXPECT_EQ(Queued().size(), 1u);

  table_.SetWakeLateness(absl::Seconds(30));  // far past any lead
  const HoldKey other{"other", "t:job"};
  const HoldRef paused = Acquire(other, 8);
  clock_.Advance(deadline - kLease / 4 - absl::Milliseconds(1));
  EXPECT_OK(table_.Believed(paused));
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(IsLost(table_.Believed(paused).status()));
}

TEST_F(HoldTableTest, AReentryKeepsTheHoldAndTheLongerLease) {
  const HoldRef first = Acquire(key_, 7, absl::Seconds(10));
  clock_.Advance(absl::Seconds(5));
  const HoldRef again = Acquire(key_, 7, absl::Seconds(1));
  EXPECT_EQ(again.generation, first.generation);
  EXPECT_NE(again.acquisition, first.acquisition);
  // The first lease still binds: 5s in, 1s asked, 10s granted at first.
  clock_.Advance(absl::Seconds(3));
  EXPECT_OK(table_.Believed(first));
  EXPECT_OK(table_.Believed(again));
}

TEST_F(HoldTableTest, ANewTokenEndsTheOldHoldAsGone) {
  const HoldRef old_ref = Acquire(key_, 7);
  const HoldRef new_ref = Acquire(key_, 8);
  EXPECT_NE(new_ref.generation, old_ref.generation);
  EXPECT_TRUE(IsLost(table_.Believed(old_ref).status()));
  EXPECT_EQ(*table_.Believed(new_ref), 8u);
  std::vector<LossNotice> told = Queued();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].cause, LossCause::kGone);
  EXPECT_EQ(told[0].event.fencing_token, 7u);
  EXPECT_FALSE(pending_.Contains(key_)) << "the new grant replaces it";
}

TEST_F(HoldTableTest, AnInnerReleaseTakesItsAcquisitionOff) {
  const HoldRef outer = Acquire(key_, 7);
  const HoldRef inner = Acquire(key_, 7);
  ReleaseReport report;
  absl::StatusOr<ReleasePlan> plan =
      table_.PlanRelease(inner, absl::ZeroDuration(), report);
  ASSERT_OK(plan);
  EXPECT_FALSE(plan->final_release);
  EXPECT_EQ(plan->holds.count, 1);
  EXPECT_FALSE(plan->holds.all);
  EXPECT_TRUE(report.tell);
  EXPECT_FALSE(report.last);
  std::vector<LossNotice> notices;
  // The backend could not be reached: the final release takes it off too.
  EXPECT_OK(table_.FinishInnerRelease(
      key_, *plan, absl::UnavailableError("no answer"), notices));
  EXPECT_TRUE(IsNotOwner(table_.Believed(inner).status()));
  EXPECT_OK(table_.Believed(outer));
  ReleasePlan last = *table_.PlanRelease(outer, absl::ZeroDuration(), report);
  EXPECT_TRUE(last.final_release);
  EXPECT_EQ(last.holds.count, 2) << "the unsynced inner release goes with it";
  EXPECT_FALSE(last.holds.all) << "an owner token's holds elsewhere stay";
}

// By owner token (C6): the innermost acquisition goes, and its Hold learns
// that it was released, not lost, even once the hold is gone.
TEST_F(HoldTableTest, AReleaseByOwnerTokenTakesTheInnermostAcquisition) {
  const HoldRef outer = Acquire(key_, 7);
  const HoldRef inner = Acquire(key_, 7);
  ReleaseReport report;
  absl::StatusOr<ReleasePlan> plan = table_.PlanReleaseByOwner(key_, report);
  ASSERT_OK(plan);
  EXPECT_FALSE(plan->final_release);
  EXPECT_TRUE(report.tell);
  EXPECT_TRUE(IsNotOwner(table_.Believed(inner).status()));
  EXPECT_OK(table_.Believed(outer));
  plan = table_.PlanReleaseByOwner(key_, report);
  ASSERT_OK(plan);
  EXPECT_TRUE(plan->final_release);
  EXPECT_TRUE(IsNotOwner(table_.Believed(outer).status()))
      << table_.Believed(outer).status();
  EXPECT_TRUE(IsNotOwner(
      table_.PlanRelease(outer, absl::ZeroDuration(), report).status()));
  // No hold here: a hold taken elsewhere, released without a record.
  plan = table_.PlanReleaseByOwner(HoldKeyView("other", "t:job"), report);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->generation, 0u);
  EXPECT_EQ(plan->record, nullptr);
}

TEST_F(HoldTableTest, AFinalReleaseGivesTheHoldUpWhateverTheAnswer) {
  const HoldRef ref = Acquire(key_, 7);
  ReleaseReport report;
  absl::StatusOr<ReleasePlan> plan =
      table_.PlanRelease(ref, absl::Seconds(2), report);
  ASSERT_OK(plan);
  EXPECT_TRUE(plan->final_release);
  EXPECT_EQ(table_.BelievedRecord(key_), nullptr) << "given up at once";
  // An acquisition of the key waits for the answer.
  uint64_t sent = 0;
  std::optional<PendingReleases::Claim> claim;
  EXPECT_EQ(pending_.BeforeAcquire(key_, sent, claim),
            PendingReleases::Turn::kWait);
  std::vector<LossNotice> notices;
  const MonoTime at = clock_.Now();
  absl::Status released = table_.FinishFinalRelease(
      key_, *plan, absl::UnavailableError("no answer"), absl::Seconds(2), at,
      notices, report);
  EXPECT_EQ(released.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(report.given_up);
  EXPECT_TRUE(notices.empty());
  // Retried in the background, keeping the lock until 2s from the send.
  std::vector<PendingReleases::Claim> due = pending_.ClaimDue(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].release.keep_until, at + absl::Seconds(2));
}

TEST_F(HoldTableTest, AReleaseThatFindsTheHoldGoneTellsTheLoss) {
  const HoldRef ref = Acquire(key_, 7);
  ReleaseReport report;
  ReleasePlan plan = *table_.PlanRelease(ref, absl::ZeroDuration(), report);
  std::vector<LossNotice> notices;
  absl::Status released = table_.FinishFinalRelease(
      key_, plan, NotOwnerError("lock"), absl::ZeroDuration(), clock_.Now(),
      notices, report);
  EXPECT_TRUE(IsLost(released)) << released;
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].cause, LossCause::kGone);
  EXPECT_FALSE(pending_.Contains(key_));
}

TEST_F(HoldTableTest, KeepingNeedsAnExplicitLeaseAndEndsQuietly) {
  const HoldRef renewed = Acquire({"renewed", "t:job"}, 1, std::nullopt);
  ReleaseReport report;
  EXPECT_EQ(table_.Keep(renewed, report).code(),
            absl::StatusCode::kFailedPrecondition);
  const HoldRef ref = Acquire(key_, 7);
  ASSERT_OK(table_.Keep(ref, report));
  EXPECT_TRUE(report.last);
  clock_.Advance(kLease);
  table_.ExpireOverdue(clock_.Now());
  // The watchdog-renewed hold ran out (told); the kept one is no loss.
  std::vector<LossNotice> told = Queued();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].event.name, "renewed");
  clock_.Advance(2 * DriftMargin(kLease));
  EXPECT_EQ(table_.ExpireOverdue(clock_.Now()), MonoTime::InfiniteFuture())
      << "the kept hold's record is gone once the backend expired it";
}

TEST_F(HoldTableTest, TheWatchdogRenewsAtAThirdAndRetriesFailures) {
  const HoldRef ref = Acquire(key_, 7, std::nullopt);
  EXPECT_TRUE(table_.DueRenewals(clock_.Now()).empty());
  EXPECT_EQ(table_.NextRenewal(), clock_.Now() + kLease / 3);
  clock_.Advance(kLease / 3);
  std::vector<DueRenewal> due = table_.DueRenewals(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  const MonoTime sent = clock_.Now();
  table_.FinishRenewals(due, {absl::UnavailableError("slow")}, sent);
  EXPECT_EQ(table_.NextRenewal(), clock_.Now() + RetryEvery(kLease));
  // No renewal gets through: the hold ends at its first deadline, saying
  // why.
  clock_.Advance(kLease);
  absl::StatusOr<uint64_t> after = table_.Believed(ref);
  EXPECT_THAT(std::string(after.status().message()),
              HasSubstr("renewal kept failing"));
}

TEST_F(HoldTableTest, AConfirmedRenewalMovesTheDeadline) {
  const HoldRef ref = Acquire(key_, 7, std::nullopt);
  clock_.Advance(kLease / 3);
  std::vector<DueRenewal> due = table_.DueRenewals(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  table_.FinishRenewals(due, {absl::OkStatus()}, clock_.Now());
  clock_.Advance(kLease - kLease / 3);
  EXPECT_OK(table_.Believed(ref));
  // A renewal that finds the hold gone ends it at once.
  clock_.Advance(kLease / 3 - absl::Milliseconds(100));
  due = table_.DueRenewals(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  table_.FinishRenewals(due, {NotOwnerError("lock")}, clock_.Now());
  EXPECT_TRUE(IsLost(table_.Believed(ref).status()));
  ASSERT_EQ(Queued().size(), 1u);
}

TEST_F(HoldTableTest, HoldsAreBelievedNoLongerThanTheLivenessRecord) {
  const absl::Duration ttl = absl::Seconds(1);
  table_.KeepLiveness(ttl);
  table_.LivenessConfirmed(clock_.Now());
  const HoldRef ref = Acquire(key_, 7);
  EXPECT_TRUE(table_.LivenessWanted());
  EXPECT_FALSE(table_.HeartbeatDue(clock_.Now()));
  clock_.Advance(ttl / 3);
  EXPECT_TRUE(table_.HeartbeatDue(clock_.Now()));
  table_.HeartbeatFailed(absl::UnavailableError("down"));
  clock_.Advance(ttl);
  absl::StatusOr<uint64_t> after = table_.Believed(ref);
  EXPECT_TRUE(IsLost(after.status()));
  EXPECT_THAT(std::string(after.status().message()),
              HasSubstr("liveness record"));
  EXPECT_THAT(std::string(after.status().message()), HasSubstr("down"));
}

TEST_F(HoldTableTest, CloseEndsEveryBelievedHold) {
  Acquire(key_, 7);
  const HoldRef lost = Acquire({"lost", "t:job"}, 8);
  bound_ = clock_.Now();
  EXPECT_TRUE(IsLost(table_.Believed(lost).status()));
  bound_ = MonoTime::InfiniteFuture();
  // A final release not confirmed yet ends with the client too (C20).
  const HoldRef releasing = Acquire({"releasing", "t:job"}, 9);
  ReleaseReport report;
  ASSERT_OK(table_.PlanRelease(releasing, absl::ZeroDuration(), report));
  std::vector<LossNotice> notices;
  std::vector<PendingReleases::Claim> to_release = table_.CloseAll(
      ClientClosedError("memory://"),
      absl::FailedPreconditionError("closed before the release was confirmed"),
      notices);
  ASSERT_EQ(to_release.size(), 1u) << "a lost hold is released already";
  EXPECT_EQ(to_release[0].key, key_);
  EXPECT_GT(to_release[0].release.give_up, clock_.Now() + kLease)
      << "Close() may ride out a failover until the lease ends";
  // The earlier loss, queued, the closed hold's, and the unconfirmed one's.
  ASSERT_EQ(notices.size(), 3u);
  EXPECT_EQ(notices[1].cause, LossCause::kClientClosed);
  EXPECT_EQ(notices[2].cause, LossCause::kClientClosed);
  EXPECT_EQ(notices[2].event.name, "releasing");
}

// Issue 23: a final release the backend has not confirmed when the hold's
// notice time comes tells the hold lost then, once; the answer that comes
// later changes nothing but what the caller is told.
TEST_F(HoldTableTest, AnUnconfirmedFinalReleaseIsToldLostAtTheNoticeTime) {
  const HoldRef ref = Acquire(key_, 7);
  ReleaseReport report;
  ReleasePlan plan = *table_.PlanRelease(ref, absl::ZeroDuration(), report);
  ASSERT_TRUE(plan.final_release);
  EXPECT_GT(plan.notice_at, clock_.Now());
  EXPECT_LT(plan.notice_at, clock_.Now() + kLease) << "before the lease ends";
  EXPECT_TRUE(table_.AwaitsConfirmation(plan));
  table_.ExpireOverdue(clock_.Now());
  EXPECT_TRUE(Queued().empty()) << "not before its notice time";
  clock_.Advance(plan.notice_at - clock_.Now());
  table_.ExpireOverdue(clock_.Now());
  std::vector<LossNotice> told = Queued();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].cause, LossCause::kUnconfirmed);
  EXPECT_TRUE(told[0].observe);
  EXPECT_FALSE(table_.AwaitsConfirmation(plan));
  std::vector<LossNotice> notices;
  absl::Status released = table_.FinishFinalRelease(
      key_, plan, absl::OkStatus(), absl::ZeroDuration(), clock_.Now(), notices,
      report);
  EXPECT_TRUE(IsLost(released)) << released;
  EXPECT_FALSE(report.tell) << "told as lost, not as released";
  EXPECT_TRUE(notices.empty()) << "told once";
}

TEST_F(HoldTableTest, AConfirmationInTimeSparesTheNotice) {
  const HoldRef ref = Acquire(key_, 7);
  ReleaseReport report;
  ReleasePlan plan = *table_.PlanRelease(ref, absl::ZeroDuration(), report);
  std::vector<LossNotice> notices;
  ASSERT_EQ(table_
                .FinishFinalRelease(key_, plan, absl::UnavailableError("down"),
                                    absl::ZeroDuration(), clock_.Now(), notices,
                                    report)
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(table_.AwaitsConfirmation(plan));
  // A background retry gets through before the notice time.
  std::vector<PendingReleases::Claim> due = pending_.ClaimDue(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].release.generations, std::vector<uint64_t>{plan.generation});
  table_.ReleaseConfirmed(due[0].release.generations);
  clock_.Advance(plan.notice_at + kLease - clock_.Now());
  table_.ExpireOverdue(clock_.Now());
  EXPECT_TRUE(Queued().empty());
}

TEST_F(HoldTableTest, AnUnconfirmedReleaseTheObserverHeardOfEndsOnce) {
  const HoldRef ref = Acquire(key_, 7);
  ReleaseReport report;
  ReleasePlan plan = *table_.PlanRelease(ref, absl::ZeroDuration(), report);
  ASSERT_TRUE(report.tell) << "the observer hears of this release";
  std::vector<LossNotice> notices;
  table_
      .FinishFinalRelease(key_, plan, absl::UnavailableError("down"),
                          absl::ZeroDuration(), clock_.Now(), notices, report)
      .IgnoreError();
  clock_.Advance(plan.notice_at - clock_.Now());
  table_.ExpireOverdue(clock_.Now());
  std::vector<LossNotice> told = Queued();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_FALSE(told[0].observe) << "its OnRelease was its end";
  EXPECT_FALSE(told[0].tokens.empty()) << "its Hold still learns the loss";
}

}  // namespace
}  // namespace dlock::internal
