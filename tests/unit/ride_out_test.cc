// Copyright dlock authors. A waiting acquire rides out transient
// unavailability (a failover) until its wait ends; a try stays fail-fast
// (C18, docs/semantics.md "Riding out a failover"). Over memory://, with the
// fault-injecting backend answering Unavailable as a backend does while its
// master or leader is gone.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/errors.h"
#include "fault_backend.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::FaultPlan;

// A bound that only catches a hang.
constexpr absl::Duration kNoHang = absl::Seconds(20);

class RideOutTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockClient> Connect(bool faulty = true) {
    ClientOptions options;
    if (faulty) options.backend_decorator = faults_->Decorator();
    absl::StatusOr<std::unique_ptr<LockClient>> client = dlock::Connect(
        absl::StrCat("memory://ride-out-", getpid(), "-", uri_), options);
    EXPECT_OK(client);
    return *std::move(client);
  }
  static AcquireOptions Waiting(absl::Duration wait) {
    AcquireOptions options;
    options.wait = wait;
    return options;
  }

  std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
  std::string uri_ = absl::StrCat(
      ::testing::UnitTest::GetInstance()->current_test_info()->name());
};

TEST_F(RideOutTest, WaitingAcquireRetriesUnavailableUntilItSucceeds) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("failing over");
  faults_->Set(FaultPlan::kAcquire, {.fail_before = true, .times = 4});
  absl::StatusOr<Hold> hold = lock->Acquire(Waiting(kNoHang));
  ASSERT_OK(hold);
  EXPECT_EQ(faults_->calls(FaultPlan::kAcquire), 5);
  EXPECT_EQ(hold->state(), LockState::kHeld);
  EXPECT_OK(hold->Release());
}

TEST_F(RideOutTest, TryStaysFailFast) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("tried");
  faults_->Set(FaultPlan::kAcquire, {.fail_before = true, .times = 4});
  absl::StatusOr<Hold> tried = lock->TryAcquire();
  EXPECT_TRUE(absl::IsUnavailable(tried.status())) << tried.status();
  EXPECT_EQ(faults_->calls(FaultPlan::kAcquire), 1);
}

TEST_F(RideOutTest, WaitThatEndsReturnsUnavailableWithTheLastError) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("down for good");
  faults_->Set(FaultPlan::kAcquire, {.fail_before = true});
  const absl::Time start = absl::Now();
  absl::StatusOr<Hold> hold = lock->Acquire(Waiting(absl::Milliseconds(400)));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(absl::IsUnavailable(hold.status())) << hold.status();
  EXPECT_GE(took, absl::Milliseconds(400)) << "gave up before the wait ended";
  EXPECT_LT(took, kNoHang);
  EXPECT_GE(faults_->calls(FaultPlan::kAcquire), 3) << "not retried";
  const std::string message(hold.status().message());
  EXPECT_NE(message.find("stayed unavailable"), std::string::npos) << message;
  EXPECT_NE(message.find("the last error: injected fault: the call never "
                         "reached the backend"),
            std::string::npos)
      << message;
}

TEST_F(RideOutTest, CancelEndsTheRideOut) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("cancelled");
  faults_->Set(FaultPlan::kAcquire, {.fail_before = true});
  AcquireOptions options = Waiting(absl::Minutes(10));
  std::thread canceller([&] {
    faults_->WaitForCalls(FaultPlan::kAcquire, 2, kNoHang);
    options.cancel.Cancel();
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<Hold> hold = lock->Acquire(options);
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(hold.status())) << hold.status();
  EXPECT_LT(absl::Now() - start, kNoHang);
}

TEST_F(RideOutTest, RetriedAcquireWhoseReplyWasLostLeavesNoExtraHold) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<LockClient> other = Connect(/*faulty=*/false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("granted blind");
  // The first grant ran on the backend; its reply was lost.
  faults_->Set(FaultPlan::kAcquire, {.fail_after = true, .times = 1});
  absl::StatusOr<Hold> hold = lock->Acquire(Waiting(kNoHang));
  ASSERT_OK(hold);
  EXPECT_EQ(hold->hold_count(), 1);
  EXPECT_OK(hold->Release());
  absl::StatusOr<LockInfo> info = other->Admin().Inspect("granted blind");
  ASSERT_OK(info);
  EXPECT_FALSE(info->locked) << "still held with " << info->hold_count;
}

TEST_F(RideOutTest, WaitingAcquireRidesOutAPendingReleaseOfTheSameOwner) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("released blind");
  absl::StatusOr<Hold> first = lock->Acquire();
  ASSERT_OK(first);
  // The release, and the retries of it that the next acquire must wait for
  // (C21), meet the failover.
  faults_->Set(FaultPlan::kRelease, {.fail_before = true, .times = 3});
  EXPECT_TRUE(absl::IsUnavailable(first->Release()));
  absl::StatusOr<Hold> again = lock->Acquire(Waiting(kNoHang));
  ASSERT_OK(again);
  EXPECT_GT(again->fencing_token(), first->fencing_token());
  EXPECT_EQ(again->hold_count(), 1);
  EXPECT_OK(again->Release());
}

TEST_F(RideOutTest, CloseRetriesAReleaseThatMeetsAFailover) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<LockClient> other = Connect(/*faulty=*/false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("released late");
  AcquireOptions leased;
  leased.lease = absl::Minutes(10);
  absl::StatusOr<Hold> hold = lock->Acquire(leased);
  ASSERT_OK(hold);
  // The release and the next three tries meet the failover.
  faults_->Set(FaultPlan::kRelease, {.fail_before = true, .times = 4});
  EXPECT_TRUE(absl::IsUnavailable(hold->Release()));
  EXPECT_OK(client->Close());
  absl::StatusOr<LockInfo> info = other->Admin().Inspect("released late");
  ASSERT_OK(info);
  EXPECT_FALSE(info->locked) << "left to its ten-minute lease";
}

}  // namespace
}  // namespace dlock
