// The RAII guard: fencing token, lost state, cancel token, release hook.
#include "dlock/adapters/lock_guard.h"

#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

std::string UniqueUri() {
  static std::atomic<int> n{0};
  return absl::StrCat("memory://guard-", getpid(), "-", n++);
}

std::unique_ptr<LockClient> MustConnect(const std::string& uri) {
  ClientOptions options;
  // Renewal every 30ms: a loss is noticed within tens of milliseconds.
  options.watchdog_lease = absl::Milliseconds(90);
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

TEST(LockGuardTest, HoldsUntilDestroyedAndExposesTheFencingToken) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  uint64_t first_token = 0;
  {
    absl::StatusOr<LockGuard> guard = LockGuard::Acquire(*c1, "report");
    ASSERT_TRUE(guard.ok()) << guard.status();
    first_token = guard->fencing_token();
    EXPECT_GT(first_token, 0u);
    EXPECT_FALSE(guard->lost());
    EXPECT_TRUE(guard->lost_reason().ok());
    absl::StatusOr<LockGuard> other = LockGuard::Acquire(
        *c2, "report", GuardOptions{.wait = absl::ZeroDuration()});
    EXPECT_EQ(other.status().code(), absl::StatusCode::kDeadlineExceeded);
  }
  absl::StatusOr<LockGuard> next = LockGuard::Acquire(
      *c2, "report", GuardOptions{.wait = absl::ZeroDuration()});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GT(next->fencing_token(), first_token);
}

TEST(LockGuardTest, LossFiresTheCancelTokenAndTheHook) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::vector<std::string> release_errors;
  std::atomic<int> user_callbacks{0};
  {
    absl::StatusOr<LockGuard> guard = LockGuard::Acquire(
        *c1, "ledger",
        GuardOptions{
            .on_release_error =
                [&](absl::string_view name, const absl::Status& error) {
                  release_errors.push_back(
                      absl::StrCat(name, " ", error.message()));
                },
            .on_lost = [&](const LockLostEvent&) { ++user_callbacks; }});
    ASSERT_TRUE(guard.ok()) << guard.status();
    absl::Notification stopped;
    ScopedCancelCallback stop(guard->cancel_token(), [&] { stopped.Notify(); });

    absl::StatusOr<std::unique_ptr<DistributedLock>> admin =
        c2->GetLock("ledger");
    ASSERT_TRUE(admin.ok());
    ASSERT_TRUE((*admin)->ForceUnlock().ok());  // C12

    // The work watching the token is told at the next renewal.
    ASSERT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
    EXPECT_TRUE(guard->lost());
    EXPECT_FALSE(guard->lost_reason().ok());
    EXPECT_EQ(user_callbacks.load(), 1);
  }
  ASSERT_EQ(release_errors.size(), 1u);  // not swallowed
  EXPECT_THAT(release_errors[0], HasSubstr("ledger"));
}

TEST(LockGuardTest, ExplicitLeaseRunningOutIsSeenByLost) {
  std::unique_ptr<LockClient> c = MustConnect(UniqueUri());
  absl::StatusOr<LockGuard> guard = LockGuard::Acquire(
      *c, "short",
      GuardOptions{
          .lease = absl::Milliseconds(50),
          .on_release_error = [](absl::string_view, const absl::Status&) {}});
  ASSERT_TRUE(guard.ok());
  EXPECT_FALSE(guard->lost());
  absl::SleepFor(absl::Milliseconds(120));
  EXPECT_TRUE(guard->lost());
  EXPECT_TRUE(guard->cancel_token().IsCancelled());
}

TEST(LockGuardTest, ExplicitReleaseAndMoves) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::vector<LockGuard> guards;
  {
    absl::StatusOr<LockGuard> guard = LockGuard::Acquire(*c1, "moved");
    ASSERT_TRUE(guard.ok());
    guards.push_back(*std::move(guard));  // the moved-from one releases nothing
  }
  ASSERT_TRUE(guards[0].active());
  EXPECT_EQ(guards[0].name(), "moved");
  absl::StatusOr<std::unique_ptr<DistributedLock>> probe = c2->GetLock("moved");
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(*(*probe)->IsLocked());
  EXPECT_TRUE(guards[0].Release().ok());
  EXPECT_FALSE(guards[0].active());
  EXPECT_FALSE(*(*probe)->IsLocked());
  EXPECT_EQ(guards[0].Release().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LockGuardTest, FailuresAreStatuses) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  EXPECT_EQ(LockGuard::Acquire(*c1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<LockGuard> first = LockGuard::Acquire(*c1, "c");
  ASSERT_TRUE(first.ok());
  CancelToken cancel;
  cancel.Cancel();
  EXPECT_EQ(LockGuard::Acquire(*c2, "c", GuardOptions{.cancel = cancel})
                .status()
                .code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace dlock
