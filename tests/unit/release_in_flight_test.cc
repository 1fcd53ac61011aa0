// Copyright dlock authors. A final release still in flight, on memory://
// with a FaultPlan holding the release: threads sharing an owner token (C6)
// each get their own hold's answer, an acquisition of the same owner waits
// for it no longer than its own wait (C18), and a release that fails while
// Close() runs is sent again by Close() (C13, C21).
#include <atomic>
#include <future>
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

constexpr absl::Duration kNoHang = absl::Seconds(20);

class ReleaseInFlightTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockClient> Connect(bool faulty = true) {
    ClientOptions options;
    if (faulty) options.backend_decorator = faults_->Decorator();
    options.on_lost = [this](const LockLostEvent&) { ++lost_; };
    absl::StatusOr<std::unique_ptr<LockClient>> client = dlock::Connect(
        absl::StrCat("memory://in-flight-", getpid(), "-", uri_), options);
    EXPECT_OK(client);
    return *std::move(client);
  }
  static AcquireOptions Shared(absl::Duration wait) {
    AcquireOptions options;
    options.owner_token = "shared";
    options.wait = wait;
    return options;
  }
  // Runs `release` on a thread; returns once its backend call is blocked.
  std::future<absl::Status> ReleaseBlocked(Hold& hold) {
    faults_->Set(FaultPlan::kRelease, {.block = true, .times = 1});
    std::future<absl::Status> released =
        std::async(std::launch::async, [&hold] { return hold.Release(); });
    EXPECT_TRUE(faults_->WaitForBlocked(FaultPlan::kRelease, 1, kNoHang));
    return released;
  }

  std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
  std::atomic<int> lost_{0};
  std::string uri_ = absl::StrCat(
      ::testing::UnitTest::GetInstance()->current_test_info()->name());
};

// CI caught this: a thread's acquisition, sent before another thread's
// final release of the shared token, was granted after it began; the later
// hold's release then told the earlier one lost ("the lease ended before
// the release was confirmed", 1 ms into a 2 s lease) and answered its
// Release() with that.
TEST_F(ReleaseInFlightTest, EachHoldOfASharedTokenGetsItsOwnReleasesAnswer) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("shared");
  absl::StatusOr<Hold> first = lock->Acquire(Shared(kNoHang));
  ASSERT_OK(first);

  faults_->Set(FaultPlan::kAcquire, {.block = true, .times = 1});
  std::future<absl::StatusOr<Hold>> second = std::async(
      std::launch::async, [&] { return lock->Acquire(Shared(kNoHang)); });
  ASSERT_TRUE(faults_->WaitForBlocked(FaultPlan::kAcquire, 1, kNoHang));
  std::future<absl::Status> first_released = ReleaseBlocked(*first);

  faults_->Unblock(FaultPlan::kAcquire);  // granted after the release began
  absl::StatusOr<Hold> later = second.get();
  ASSERT_OK(later);
  EXPECT_OK(later->Release());
  faults_->Unblock(FaultPlan::kRelease);

  absl::Status released = first_released.get();
  EXPECT_OK(released);
  EXPECT_EQ(lost_.load(), 0);
  absl::StatusOr<LockInfo> info = client->Admin().Inspect("shared");
  ASSERT_OK(info);
  EXPECT_FALSE(info->locked) << "still held with " << info->hold_count;
}

// An acquisition of the owner whose release is in flight waits for it no
// longer than it asked to wait, and stops on its cancel; a try waits for the
// release to end (C21), then takes a fresh hold.
TEST_F(ReleaseInFlightTest, OwnersAcquisitionWaitsForTheReleaseOnlyItsWait) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("releasing");
  absl::StatusOr<Hold> hold = lock->Acquire(Shared(kNoHang));
  ASSERT_OK(hold);
  const uint64_t released_token = hold->fencing_token();
  std::future<absl::Status> released = ReleaseBlocked(*hold);

  auto acquire = [&](AcquireOptions options) {
    return std::async(std::launch::async,
                      [&lock, options] { return lock->Acquire(options); });
  };
  std::future<absl::StatusOr<Hold>> tried =
      acquire(Shared(absl::ZeroDuration()));
  const absl::Time start = absl::Now();
  std::future<absl::StatusOr<Hold>> waited =
      acquire(Shared(absl::Milliseconds(300)));
  AcquireOptions cancelled = Shared(absl::Minutes(10));
  std::future<absl::StatusOr<Hold>> cancelled_wait = acquire(cancelled);
  absl::SleepFor(absl::Milliseconds(50));
  cancelled.cancel.Cancel();
  const bool answered =
      waited.wait_for(std::chrono::seconds(10)) == std::future_status::ready &&
      cancelled_wait.wait_for(std::chrono::seconds(10)) ==
          std::future_status::ready;
  const bool tried_early =
      tried.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  faults_->Unblock(FaultPlan::kRelease);  // lets a hung acquisition go too
  ASSERT_TRUE(answered) << "an acquisition waited for the release past its "
                           "own wait";
  EXPECT_FALSE(tried_early) << "a try did not wait for the release";
  absl::StatusOr<Hold> waited_hold = waited.get();
  EXPECT_TRUE(IsWaitExpired(waited_hold.status())) << waited_hold.status();
  EXPECT_NE(waited_hold.status().message().find("released by this owner"),
            absl::string_view::npos)
      << waited_hold.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  absl::StatusOr<Hold> cancelled_hold = cancelled_wait.get();
  EXPECT_TRUE(absl::IsCancelled(cancelled_hold.status()))
      << cancelled_hold.status();
  EXPECT_OK(released.get());
  absl::StatusOr<Hold> tried_hold = tried.get();
  ASSERT_OK(tried_hold);
  EXPECT_EQ(tried_hold->hold_count(), 1) << "inherited the released hold";
  EXPECT_GT(tried_hold->fencing_token(), released_token);
}

// A final release in flight when Close() begins, that fails, is not left to
// the lease: Close() sends it again before it returns.
TEST_F(ReleaseInFlightTest, CloseSendsAgainAReleaseThatFailedWhileItRan) {
  std::unique_ptr<LockClient> client = Connect();
  std::unique_ptr<LockClient> other = Connect(/*faulty=*/false);
  std::unique_ptr<DistributedLock> lock = *client->GetLock("closing");
  absl::StatusOr<Hold> hold = lock->Acquire(Shared(kNoHang));
  ASSERT_OK(hold);
  faults_->Set(FaultPlan::kRelease,
               {.block = true, .fail_before = true, .times = 1});
  std::future<absl::Status> released =
      std::async(std::launch::async, [&] { return hold->Release(); });
  ASSERT_TRUE(faults_->WaitForBlocked(FaultPlan::kRelease, 1, kNoHang));
  std::future<absl::Status> closed =
      std::async(std::launch::async, [&] { return client->Close(); });
  // Close() told the hold and found nothing pending; it now waits for the
  // call in flight, which fails.
  absl::SleepFor(absl::Milliseconds(100));
  faults_->Unblock(FaultPlan::kRelease);
  released.get().IgnoreError();  // the client closed under it
  absl::Status close = closed.get();
  EXPECT_OK(close);
  EXPECT_EQ(faults_->calls(FaultPlan::kRelease), 2);
  absl::StatusOr<LockInfo> info = other->Admin().Inspect("closing");
  ASSERT_OK(info);
  EXPECT_FALSE(info->locked) << "left to its lease by Close()";
}

}  // namespace
}  // namespace dlock
