// The std adapter on the in-process backend: std::scoped_lock over two
// distributed locks and a local mutex, the std error contract, hooks, and
// whose holds unlock() releases.
#include "dlock/adapters/std_mutex.h"

#include <atomic>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

std::string UniqueUri() {
  static std::atomic<int> n{0};
  return absl::StrCat("memory://std-", getpid(), "-", n++);
}

std::unique_ptr<LockClient> MustConnect(const std::string& uri,
                                        ClientOptions options = {}) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  EXPECT_OK(client);
  return *std::move(client);
}

std::unique_ptr<DistributedMutex> MustMutex(LockClient& client,
                                            const std::string& name,
                                            MutexOptions options = {}) {
  absl::StatusOr<std::unique_ptr<DistributedMutex>> m =
      DistributedMutex::Create(client, name, std::move(options));
  EXPECT_OK(m);
  return *std::move(m);
}

TEST(DistributedMutexTest, ScopedLockOverTwoDistributedLocksAndALocalMutex) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> clients[2] = {MustConnect(uri), MustConnect(uri)};
  // Each client has its own handles on both names; threads of one client
  // are distinct owners (C6), so all four threads contend.
  std::unique_ptr<DistributedMutex> a[2], b[2];
  for (int i = 0; i < 2; ++i) {
    a[i] = MustMutex(*clients[i], "accounts/a");
    b[i] = MustMutex(*clients[i], "accounts/b");
  }
  std::mutex local;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int counter = 0;  // guarded by all three locks
  constexpr int kThreads = 4, kRounds = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      DistributedMutex& first = *a[t % 2];
      DistributedMutex& second = *b[t % 2];
      for (int r = 0; r < kRounds; ++r) {
        // Alternate the order, as std::lock's deadlock avoidance must cope.
        if (r % 2 == 0) {
          std::scoped_lock lock(first, second, local);
          if (inside.fetch_add(1) != 0) ++overlaps;
          ++counter;
          inside.fetch_sub(1);
        } else {
          std::scoped_lock lock(local, second, first);
          if (inside.fetch_add(1) != 0) ++overlaps;
          ++counter;
          inside.fetch_sub(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, kThreads * kRounds);
  // Everything was released: another owner gets both at once.
  EXPECT_TRUE(a[0]->try_lock());
  EXPECT_TRUE(b[0]->try_lock());
  a[0]->unlock();
  b[0]->unlock();
}

TEST(DistributedMutexTest, UniqueLockAndTryLockFor) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::unique_ptr<DistributedMutex> m1 = MustMutex(*c1, "job");
  std::unique_ptr<DistributedMutex> m2 = MustMutex(*c2, "job");
  std::unique_lock<DistributedMutex> held(*m1);
  EXPECT_TRUE(held.owns_lock());
  EXPECT_OK(m1->fencing_token());

  const absl::Time start = absl::Now();
  std::unique_lock<DistributedMutex> other(*m2, std::defer_lock);
  EXPECT_FALSE(other.try_lock_for(std::chrono::milliseconds(150)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(140));
  EXPECT_FALSE(other.try_lock_until(std::chrono::steady_clock::now() +
                                    std::chrono::milliseconds(20)));
  EXPECT_FALSE(other.try_lock());

  // The owner is the locking thread, as with std::mutex, so the waiter runs
  // on another thread and this one unlocks.
  std::atomic<bool> got{false};
  absl::Duration waited;
  std::thread waiter([&] {
    const absl::Time begin = absl::Now();
    got = other.try_lock_for(std::chrono::seconds(10));
    waited = absl::Now() - begin;
    if (got) other.unlock();
  });
  absl::SleepFor(absl::Milliseconds(100));
  held.unlock();
  waiter.join();
  EXPECT_TRUE(got);
  // Woken by the release (C9), well inside the wait.
  EXPECT_LT(waited, absl::Seconds(2));
}

TEST(DistributedMutexTest, LockThrowsSystemErrorAsStdRequires) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::unique_ptr<DistributedMutex> holder = MustMutex(*c1, "x");
  std::unique_ptr<DistributedMutex> bounded =
      MustMutex(*c2, "x", MutexOptions{.lock_wait = absl::Milliseconds(50)});
  holder->lock();
  try {
    bounded->lock();
    FAIL() << "lock() returned while another owner held the lock";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::timed_out);
    EXPECT_EQ(&e.code().category(), &StatusCategory());
  }
  holder->unlock();

  ASSERT_OK(c2->Close());
  try {
    bounded->lock();
    FAIL() << "lock() on a closed client returned";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::operation_not_permitted);
    EXPECT_THAT(e.what(), HasSubstr("closed"));
  }
  // try_lock() must not pass a closed client off as contention.
  EXPECT_THROW(bounded->try_lock(), std::system_error);
}

TEST(DistributedMutexTest, UnlockNeverThrowsAndReportsToTheHook) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::vector<std::string> reported;
  std::unique_ptr<DistributedMutex> m = MustMutex(
      *c1, "lost-one",
      MutexOptions{.on_release_error = [&](absl::string_view name,
                                           const absl::Status& error) {
        reported.push_back(absl::StrCat(name, ": ", error.ToString()));
      }});
  m->lock();
  ASSERT_OK(c2->Admin().ForceUnlock("lost-one"));
  static_assert(noexcept(m->unlock()));
  m->unlock();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_THAT(reported[0], HasSubstr("lost-one: FAILED_PRECONDITION"));
}

TEST(DistributedMutexTest, DefaultHookCanBeReplaced) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c = MustConnect(uri);
  std::atomic<int> calls{0};
  SetDefaultReleaseErrorHook(
      [&](absl::string_view, const absl::Status&) { ++calls; });
  std::unique_ptr<DistributedMutex> m = MustMutex(*c, "never-locked");
  m->unlock();  // not held: FailedPrecondition to the default hook
  SetDefaultReleaseErrorHook(nullptr);
  EXPECT_EQ(calls.load(), 1);
}

TEST(DistributedMutexTest, ReentrantLikeRecursiveMutex) {
  std::unique_ptr<LockClient> c = MustConnect(UniqueUri());
  std::unique_ptr<DistributedMutex> m = MustMutex(*c, "re");
  m->lock();
  absl::StatusOr<uint64_t> token = m->fencing_token();
  ASSERT_TRUE(m->try_lock());
  EXPECT_EQ(*m->fencing_token(), *token);  // re-entry keeps the token (C8)
  m->unlock();
  EXPECT_EQ(m->state(), LockState::kHeld);
  m->unlock();
  EXPECT_EQ(m->state(), LockState::kNotHeld);
}

TEST(DistributedMutexTest, EachThreadUnlocksOnlyItsOwnHolds) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::vector<absl::Status> reported;
  std::unique_ptr<DistributedMutex> m = MustMutex(
      *c1, "per-thread",
      MutexOptions{.on_release_error = [&](absl::string_view,
                                           const absl::Status& error) {
        reported.push_back(error);
      }});
  std::unique_ptr<DistributedMutex> other = MustMutex(*c2, "per-thread");
  EXPECT_EQ(m->state(), LockState::kNotHeld);
  EXPECT_TRUE(IsNotOwner(m->fencing_token().status()));
  m->lock();
  absl::StatusOr<uint64_t> token = m->fencing_token();
  ASSERT_OK(token);
  // Another thread of the same client is another owner (C6): it has
  // nothing to unlock, and sees nothing held.
  std::thread([&] {
    EXPECT_EQ(m->state(), LockState::kNotHeld);
    EXPECT_FALSE(m->fencing_token().ok());
    m->unlock();
  }).join();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(reported[0])) << reported[0];
  EXPECT_EQ(m->state(), LockState::kHeld);
  EXPECT_EQ(*m->fencing_token(), *token);
  EXPECT_FALSE(other->try_lock());
  m->unlock();
  EXPECT_EQ(reported.size(), 1u);
  EXPECT_EQ(m->state(), LockState::kNotHeld);
  EXPECT_TRUE(other->try_lock());
  other->unlock();
}

TEST(DistributedMutexTest, AnOwnerTokenHandsTheLockBetweenThreads) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::atomic<int> reported{0};
  std::unique_ptr<DistributedMutex> m = MustMutex(
      *c1, "handed",
      MutexOptions{
          .owner_token = "batch-7",
          .on_release_error = [&](absl::string_view, const absl::Status&) {
            ++reported;
          }});
  std::unique_ptr<DistributedMutex> other = MustMutex(*c2, "handed");
  std::thread([&] {
    m->lock();
    ASSERT_TRUE(m->try_lock());  // re-entry of the token's owner
  }).join();
  // Every thread acts as the token's owner.
  EXPECT_EQ(m->state(), LockState::kHeld);
  EXPECT_OK(m->fencing_token());
  EXPECT_FALSE(other->try_lock());
  m->unlock();
  std::thread([&] {
    EXPECT_EQ(m->state(), LockState::kHeld);
    m->unlock();
  }).join();
  EXPECT_EQ(m->state(), LockState::kNotHeld);
  EXPECT_EQ(reported.load(), 0);
  EXPECT_TRUE(other->try_lock());
  other->unlock();
}

TEST(DistributedMutexTest, UnlockAfterTheClientClosedIsSilent) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> c1 = MustConnect(uri), c2 = MustConnect(uri);
  std::atomic<int> reported{0};
  std::unique_ptr<DistributedMutex> m =
      MustMutex(*c1, "closed-under",
                MutexOptions{.on_release_error = [&](absl::string_view,
                                                     const absl::Status&) {
                  ++reported;
                }});
  m->lock();
  ASSERT_OK(c1->Close());  // releases the hold (C13)
  EXPECT_EQ(m->state(), LockState::kNotHeld);
  m->unlock();
  EXPECT_EQ(reported.load(), 0);
  EXPECT_EQ(m->state(), LockState::kNotHeld);
  std::unique_ptr<DistributedMutex> other = MustMutex(*c2, "closed-under");
  EXPECT_TRUE(other->try_lock());
  other->unlock();
}

TEST(DistributedMutexTest, BadNameIsAStatusNotAnException) {
  std::unique_ptr<LockClient> c = MustConnect(UniqueUri());
  absl::StatusOr<std::unique_ptr<DistributedMutex>> m =
      DistributedMutex::Create(*c, "");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
}

// The short path: a mutex made from the client and a name, as a value.
TEST(DistributedMutexTest, MadeFromTheClientAndANameAsAValue) {
  const std::string uri = UniqueUri();
  std::unique_ptr<LockClient> a = MustConnect(uri);
  std::unique_ptr<LockClient> b = MustConnect(uri);
  DistributedMutex mine(*a, "account/17");
  DistributedMutex theirs(*b, "account/17");
  {
    std::scoped_lock hold(mine);
    EXPECT_FALSE(theirs.try_lock());
    EXPECT_EQ(mine.fencing_token().value_or(0), 1u);
  }
  EXPECT_TRUE(theirs.try_lock());
  theirs.unlock();
}

TEST(DistributedMutexTest, MadeFromABadNameThrowsInvalidArgument) {
  std::unique_ptr<LockClient> c = MustConnect(UniqueUri());
  try {
    DistributedMutex m(*c, "");
    ADD_FAILURE() << "a mutex with an empty name was made";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("DistributedMutex"));
  }
}

}  // namespace
}  // namespace dlock
