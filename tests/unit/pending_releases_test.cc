// Copyright dlock authors. Unit tests of the client core's pending releases
// (core/src/pending_releases.h, C21) on a ManualClock: claiming, settling,
// retry timing, giving up once the lease is over on the backend, and how an
// acquisition of the same key waits for them.
#include "pending_releases.h"

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "gtest/gtest.h"
#include "lease_policy.h"

namespace dlock::internal {
namespace {

constexpr absl::Duration kLease = absl::Seconds(1);

class PendingReleasesTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  Alarms alarms_{clock_};
  PendingReleases pending_{clock_, alarms_};
  const HoldKey key_{"lock", "t:job"};
};

TEST_F(PendingReleasesTest, AReleaseIsClaimedOnceUntilSettled) {
  pending_.Add(key_, HoldsToRelease{.count = 2}, kLease, nullptr);
  EXPECT_TRUE(pending_.Contains(key_));
  std::vector<PendingReleases::Claim> due = pending_.ClaimDue(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].key, key_);
  EXPECT_EQ(due[0].release.holds.count, 2);
  // In flight: nobody else sends it meanwhile.
  EXPECT_TRUE(pending_.ClaimDue(clock_.Now()).empty());
  EXPECT_EQ(pending_.NextTry(), MonoTime::InfiniteFuture());
  EXPECT_EQ(pending_.Settle(key_, absl::OkStatus(), clock_.Now()),
            PendingReleases::Settled::kDone);
  EXPECT_FALSE(pending_.Contains(key_));
}

TEST_F(PendingReleasesTest, ATransientFailureIsRetriedAPeriodAfterItsSend) {
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr);
  const MonoTime sent = clock_.Now();
  ASSERT_EQ(pending_.ClaimDue(sent).size(), 1u);
  clock_.Advance(absl::Milliseconds(30));  // a slow answer
  EXPECT_EQ(pending_.Settle(key_, absl::UnavailableError("no answer"), sent),
            PendingReleases::Settled::kRetrying);
  EXPECT_EQ(pending_.NextTry(), sent + RetryEvery(kLease));
  clock_.Advance(RetryEvery(kLease) - absl::Milliseconds(31));
  EXPECT_TRUE(pending_.ClaimDue(clock_.Now()).empty());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(pending_.ClaimDue(clock_.Now()).size(), 1u);
}

TEST_F(PendingReleasesTest, AGoneHoldSettlesTheRelease) {
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr);
  ASSERT_EQ(pending_.ClaimDue(clock_.Now()).size(), 1u);
  EXPECT_EQ(pending_.Settle(key_, NotOwnerError("lock"), clock_.Now()),
            PendingReleases::Settled::kDone);
  EXPECT_FALSE(pending_.Contains(key_));
}

TEST_F(PendingReleasesTest, ItIsForgottenOnceTheLeaseIsOverOnTheBackend) {
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr);
  clock_.Advance(kLease + DriftMargin(kLease));
  EXPECT_TRUE(pending_.ClaimDue(clock_.Now()).empty());
  EXPECT_FALSE(pending_.Contains(key_));
}

TEST_F(PendingReleasesTest, ReleasesOfOneKeyAddUpAndKeepTheFirstRecord) {
  auto first = std::make_shared<HoldRecord>();
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, first);
  pending_.Add(key_, HoldsToRelease{.count = 2}, absl::Seconds(5),
               std::make_shared<HoldRecord>());
  std::vector<PendingReleases::Claim> due = pending_.ClaimDue(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].release.holds.count, 3);
  EXPECT_EQ(due[0].release.record, first);
  // The longest lease decides when it is over.
  EXPECT_EQ(due[0].release.give_up,
            clock_.Now() + absl::Seconds(5) + DriftMargin(absl::Seconds(5)));
  // A release of every hold joins in: the next try takes them all.
  pending_.Settle(key_, absl::UnavailableError("no answer"), clock_.Now());
  pending_.Add(key_, HoldsToRelease{.all = true}, kLease, nullptr);
  due = pending_.ClaimDue(clock_.Now());
  ASSERT_EQ(due.size(), 1u);
  EXPECT_TRUE(PendingReleases::CallFor(due[0], clock_.Now()).all_holds);
}

TEST_F(PendingReleasesTest, AnAcquisitionSendsThePendingReleaseFirst) {
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr);
  uint64_t sent_before = 0;
  std::optional<PendingReleases::Claim> claim;
  ASSERT_EQ(pending_.BeforeAcquire(key_, sent_before, claim),
            PendingReleases::Turn::kSend);
  ASSERT_TRUE(claim.has_value());
  // Another acquisition of the key waits for that send.
  std::optional<PendingReleases::Claim> other;
  EXPECT_EQ(pending_.BeforeAcquire(key_, sent_before, other),
            PendingReleases::Turn::kWait);
  EXPECT_FALSE(other.has_value());
  pending_.Settle(key_, absl::OkStatus(), clock_.Now());
  EXPECT_EQ(pending_.BeforeAcquire(key_, sent_before, claim),
            PendingReleases::Turn::kGo);
  EXPECT_FALSE(pending_.AfterAcquire(key_, sent_before));
}

TEST_F(PendingReleasesTest, AReleaseSentDuringAnAcquisitionIsARace) {
  uint64_t sent_before = 0;
  std::optional<PendingReleases::Claim> claim;
  ASSERT_EQ(pending_.BeforeAcquire(key_, sent_before, claim),
            PendingReleases::Turn::kGo);
  // The owner's lost hold is let go while the acquisition is on its way.
  pending_.Add(key_, HoldsToRelease{.all = true}, kLease, nullptr);
  ASSERT_EQ(pending_.ClaimDue(clock_.Now()).size(), 1u);
  pending_.Settle(key_, absl::OkStatus(), clock_.Now());
  EXPECT_TRUE(pending_.AfterAcquire(key_, sent_before))
      << "the release may have taken off what the acquisition was granted";
}

TEST_F(PendingReleasesTest, AFinalReleaseInFlightHoldsRetriesAndAcquirers) {
  pending_.BeginFinalRelease(key_);
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr);
  EXPECT_TRUE(pending_.ClaimDue(clock_.Now()).empty());
  uint64_t sent_before = 0;
  std::optional<PendingReleases::Claim> claim;
  EXPECT_EQ(pending_.BeforeAcquire(key_, sent_before, claim),
            PendingReleases::Turn::kWait);
  pending_.EndFinalRelease(key_);
  EXPECT_EQ(pending_.ClaimDue(clock_.Now()).size(), 1u);
}

TEST_F(PendingReleasesTest, ARetryAsksForWhatIsLeftOfTheKeepNeverLess) {
  const MonoTime start = clock_.Now();
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr,
               start + absl::Milliseconds(500));
  std::vector<PendingReleases::Claim> due = pending_.ClaimDue(start);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(PendingReleases::CallFor(due[0], start).keep_for,
            absl::Milliseconds(500));
  EXPECT_EQ(PendingReleases::CallFor(due[0], start + absl::Milliseconds(495))
                .keep_for,
            kMinLease)
      << "a little left is rounded up to the smallest lease, never freed";
  EXPECT_EQ(PendingReleases::CallFor(due[0], start + absl::Seconds(1)).keep_for,
            absl::ZeroDuration());
}

TEST_F(PendingReleasesTest, CloseTakesWhatIsNotInFlightOrOver) {
  const HoldKey other{"other", "t:job"};
  pending_.Add(key_, HoldsToRelease{.count = 1}, kLease, nullptr);
  pending_.Add(other, HoldsToRelease{.count = 1}, absl::Milliseconds(100),
               nullptr);
  clock_.Advance(absl::Milliseconds(200));  // `other` is over on the backend
  std::vector<PendingReleases::Claim> all = pending_.TakeAll(clock_.Now());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].key, key_);
  EXPECT_FALSE(pending_.Contains(key_));
  EXPECT_EQ(pending_.Settle(key_, absl::OkStatus(), clock_.Now()),
            PendingReleases::Settled::kTaken);
}

}  // namespace
}  // namespace dlock::internal
