// Copyright dlock authors. Unit tests of the backend-independent client core
// (core/src/client_core.h) through the public API on memory://: what a lost
// callback may do, and local state that needs no backend round trip.
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/errors.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

// Runs `scenario` in a child process (threadsafe death-test style), so that
// a hang or a crash fails this test instead of the whole binary. The child
// gets `limit` before an alarm ends it.
void ExpectCompletes(void (*scenario)(), absl::Duration limit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        alarm(static_cast<unsigned>(absl::ToInt64Seconds(limit)));
        scenario();
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

std::unique_ptr<LockClient> MustConnect(const ClientOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("memory://client-core-test", options);
  if (!client.ok()) std::abort();
  return *std::move(client);
}

// A lost callback on the watchdog's thread closes its own client (a service
// that shuts down when it loses its lock).
void CloseFromWatchdogCallback() {
  absl::Notification closed;
  LockClient* self = nullptr;
  ClientOptions options;
  options.watchdog_lease = absl::Milliseconds(300);
  options.on_lost = [&](const LockLostEvent&) {
    if (!self->Close().ok()) std::abort();
    closed.Notify();
  };
  std::unique_ptr<LockClient> client = MustConnect(options);
  self = client.get();
  std::unique_ptr<LockClient> admin = MustConnect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("closes itself");
  absl::StatusOr<Hold> hold = lock->Acquire();
  if (!hold.ok()) std::abort();
  if (!admin->Admin().ForceUnlock("closes itself").ok()) std::abort();
  if (!closed.WaitForNotificationWithTimeout(absl::Seconds(5))) std::abort();
}

TEST(ClientCore, LostCallbackOnWatchdogThreadMayCloseTheClient) {
  ExpectCompletes(&CloseFromWatchdogCallback, absl::Seconds(10));
}

// The same from the caller's thread: a Renew() that finds the lock gone
// runs the callback, which closes the client.
void CloseFromRenewCallback() {
  LockClient* self = nullptr;
  bool called = false;
  ClientOptions options;
  options.on_lost = [&](const LockLostEvent&) {
    called = true;
    if (!self->Close().ok()) std::abort();
  };
  std::unique_ptr<LockClient> client = MustConnect(options);
  self = client.get();
  std::unique_ptr<LockClient> admin = MustConnect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("renewed away");
  AcquireOptions leased;
  leased.lease = absl::Seconds(30);
  absl::StatusOr<Hold> hold = lock->Acquire(leased);
  if (!hold.ok()) std::abort();
  if (!admin->Admin().ForceUnlock("renewed away").ok()) std::abort();
  if (hold->Renew().code() != absl::StatusCode::kFailedPrecondition) {
    std::abort();
  }
  if (!called) std::abort();
}

TEST(ClientCore, LostCallbackFromRenewMayCloseTheClient) {
  ExpectCompletes(&CloseFromRenewCallback, absl::Seconds(10));
}

// A lost callback may use its lock: look at it, take it again.
TEST(ClientCore, LostCallbackMayUseTheLock) {
  absl::Notification done;
  LockClient* client_ptr = nullptr;
  absl::StatusOr<LockInfo> seen;
  ClientOptions options;
  options.watchdog_lease = absl::Milliseconds(300);
  options.on_lost = [&](const LockLostEvent&) {
    seen = client_ptr->Admin().Inspect("inspected");
    done.Notify();
  };
  std::unique_ptr<LockClient> client = MustConnect(options);
  std::unique_ptr<LockClient> admin = MustConnect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("inspected");
  client_ptr = client.get();
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  ASSERT_OK(admin->Admin().ForceUnlock("inspected"));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_OK(seen);
  EXPECT_FALSE(seen->locked);
}

TEST(ClientCore, StateNeedsNoRoundTrip) {
  std::unique_ptr<LockClient> client = MustConnect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("local state");
  EXPECT_EQ(Hold().state(), LockState::kNotHeld);
  AcquireOptions leased;
  leased.lease = absl::Milliseconds(100);
  absl::StatusOr<Hold> hold = lock->Acquire(leased);
  ASSERT_OK(hold);
  EXPECT_EQ(hold->state(), LockState::kHeld);
  // An explicit lease that ran out is lost as far as the client knows.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(hold->state(), LockState::kLost);
  EXPECT_TRUE(IsLost(hold->lost_reason())) << hold->lost_reason();
  absl::Status released = hold->Release();
  EXPECT_EQ(released.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsLost(released)) << released;
  EXPECT_EQ(hold->state(), LockState::kNotHeld);
}

TEST(ClientCore, LeasesBelowTheMinimumAreInvalid) {
  std::unique_ptr<LockClient> client = MustConnect();
  std::unique_ptr<DistributedLock> lock = *client->GetLock("leases");
  AcquireOptions options;
  options.lease = absl::Milliseconds(1);
  EXPECT_EQ(lock->Acquire(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.lease = absl::Milliseconds(10);
  absl::StatusOr<Hold> hold = lock->Acquire(options);
  ASSERT_OK(hold);
  EXPECT_OK(hold->Release());
}

}  // namespace
}  // namespace dlock
