// The shared-mutex adapter on the in-process backend: std::shared_lock and
// std::unique_lock over a distributed read-write lock, the upgrade refused
// as std::shared_mutex refuses a self-deadlock, and the std error contract.
#include "dlock/adapters/std_shared_mutex.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

std::string UniqueUri() {
  static std::atomic<int> n{0};
  return absl::StrCat("memory://shared-", getpid(), "-", n++);
}

std::unique_ptr<LockClient> MustConnect(const std::string& uri) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  EXPECT_OK(client);
  return *std::move(client);
}

std::unique_ptr<DistributedSharedMutex> MustMutex(LockClient& client,
                                                  MutexOptions options = {}) {
  absl::StatusOr<std::unique_ptr<DistributedSharedMutex>> m =
      DistributedSharedMutex::Create(client, "catalog", std::move(options));
  EXPECT_OK(m);
  return *std::move(m);
}

TEST(DistributedSharedMutexTest, SharedLocksHoldTogetherAndKeepAWriterOut) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c[3] = {MustConnect(uri), MustConnect(uri),
                                      MustConnect(uri)};
  std::unique_ptr<DistributedSharedMutex> m[3] = {
      MustMutex(*c[0]), MustMutex(*c[1]), MustMutex(*c[2])};
  {
    std::shared_lock<DistributedSharedMutex> r0(*m[0]);
    std::shared_lock<DistributedSharedMutex> r1(*m[1], std::try_to_lock);
    EXPECT_TRUE(r0.owns_lock());
    EXPECT_TRUE(r1.owns_lock());
    EXPECT_OK(m[0]->shared_fencing_token());
    EXPECT_EQ(m[0]->shared_state(), LockState::kHeld);
    EXPECT_EQ(m[0]->state(), LockState::kNotHeld);
    std::unique_lock<DistributedSharedMutex> w(*m[2], std::defer_lock);
    EXPECT_FALSE(w.try_lock());
    EXPECT_FALSE(w.try_lock_for(std::chrono::milliseconds(20)));
  }
  // Both readers gone: the writer holds alone, and keeps readers out.
  std::unique_lock<DistributedSharedMutex> w(*m[2], std::try_to_lock);
  ASSERT_TRUE(w.owns_lock());
  absl::StatusOr<uint64_t> token = m[2]->fencing_token();
  ASSERT_OK(token);
  EXPECT_FALSE(m[0]->try_lock_shared());
  EXPECT_FALSE(m[1]->try_lock_shared_until(std::chrono::steady_clock::now() +
                                           std::chrono::milliseconds(20)));
  // A waiting reader is woken by the writer's release (C9).
  std::atomic<bool> got{false};
  std::thread reader([&] {
    got = m[0]->try_lock_shared_for(std::chrono::seconds(10));
    if (got) {
      // A reader's token is larger than every earlier writer's (C23).
      absl::StatusOr<uint64_t> read_token = m[0]->shared_fencing_token();
      EXPECT_OK(read_token);
      if (read_token.ok()) {
        EXPECT_GT(*read_token, *token);
      }
      m[0]->unlock_shared();
    }
  });
  absl::SleepFor(absl::Milliseconds(50));
  w.unlock();
  reader.join();
  EXPECT_TRUE(got);
}

TEST(DistributedSharedMutexTest, UpgradeThrowsResourceDeadlockDowngradeWorks) {
  std::unique_ptr<LockClient> c = MustConnect(UniqueUri());
  std::unique_ptr<DistributedSharedMutex> m = MustMutex(*c);
  m->lock_shared();
  try {
    m->lock();
    FAIL() << "lock() while holding the lock shared returned";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::resource_deadlock_would_occur);
  }
  EXPECT_THROW((void)m->try_lock(), std::system_error);
  // The read hold is untouched by the refusal.
  EXPECT_EQ(m->shared_state(), LockState::kHeld);
  m->unlock_shared();
  // A writer may take the read lock; unlocking the write keeps the read.
  std::unique_lock<DistributedSharedMutex> w(*m);
  m->lock_shared();
  w.unlock();
  EXPECT_EQ(m->shared_state(), LockState::kHeld);
  m->unlock_shared();
}

TEST(DistributedSharedMutexTest, UnlockWithoutLockGoesToTheHookNeverThrows) {
  std::unique_ptr<LockClient> c = MustConnect(UniqueUri());
  std::vector<absl::Status> reported;
  std::unique_ptr<DistributedSharedMutex> m = MustMutex(
      *c, MutexOptions{.on_release_error = [&](absl::string_view name,
                                               const absl::Status& error) {
        EXPECT_EQ(name, "catalog");
        reported.push_back(error);
      }});
  m->unlock_shared();
  m->unlock();
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_TRUE(IsNotOwner(reported[0])) << reported[0];
  EXPECT_TRUE(IsNotOwner(reported[1])) << reported[1];
  // A bad name throws invalid_argument, as DistributedMutex's does.
  try {
    DistributedSharedMutex bad(*c, "");
    FAIL() << "an empty name was accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::invalid_argument);
  }
}

}  // namespace
}  // namespace dlock
