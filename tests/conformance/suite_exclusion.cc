// Copyright dlock authors. Conformance: mutual exclusion (C1), atomic
// acquisition (C3) and try-acquire (C10).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"

namespace dlock::test {
namespace {

// 8 threads across 3 clients, each 200 cycles of lock / increment a shared
// counter / check that nobody else is inside / unlock, on one lock.
TEST_P(Conformance, C1_OneOwnerAtATimeUnderContention) {
  constexpr int kClients = 3;
  constexpr int kThreads = 8;
  constexpr int kCycles = 200;
  std::vector<std::unique_ptr<LockClient>> clients;
  std::vector<std::unique_ptr<DistributedLock>> locks;  // one per client
  for (int i = 0; i < kClients; ++i) {
    ASSERT_OK_AND_ASSIGN(auto client, NewClient());
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("contended"));
    clients.push_back(std::move(client));
    locks.push_back(std::move(lock));
  }

  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  // Read and written in two steps on purpose: only exclusion keeps the count
  // exact. Atomic, so that a sanitizer sees no race the backend orders.
  std::atomic<int64_t> counter{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, lock = locks[t % kClients].get()] {
      AcquireOptions options;
      options.wait = absl::Seconds(60);
      for (int i = 0; i < kCycles; ++i) {
        absl::StatusOr<Hold> acquired = lock->Acquire(options);
        if (!acquired.ok()) {
          ADD_FAILURE() << "acquire: " << acquired.status();
          ++failures;
          return;
        }
        if (inside.fetch_add(1) != 0) ++overlaps;
        counter.store(counter.load(std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
        std::this_thread::yield();
        inside.fetch_sub(1);
        if (absl::Status s = acquired->Release(); !s.ok()) {
          ADD_FAILURE() << "release: " << s;
          ++failures;
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter.load(), kThreads * kCycles);
  ASSERT_OK_AND_ASSIGN(LockInfo info, clients[0]->Admin().Inspect("contended"));
  EXPECT_FALSE(info.locked);
}

// Owners racing for the same fresh names: each name has exactly one winner,
// and no hold is ever seen without its lease (never SET then EXPIRE).
TEST_P(Conformance, C3_RacingAcquiresHaveExactlyOneWinner) {
  constexpr int kClients = 3;
  constexpr int kThreads = 6;
  constexpr int kNames = 40;
  constexpr absl::Duration kLease = absl::Seconds(30);
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_OK_AND_ASSIGN(auto client, NewClient());
    clients.push_back(std::move(client));
  }

  std::atomic<int> ready{0};
  std::vector<std::string> owners(kThreads);
  // wins[t][n]: thread t won name n.
  std::vector<std::vector<bool>> wins(kThreads, std::vector<bool>(kNames));
  // What each thread won, held until the checks below are done.
  std::vector<std::vector<Hold>> held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      LockClient& client = *clients[t % kClients];
      owners[t] = client.CurrentOwner();
      std::vector<std::unique_ptr<DistributedLock>> locks;
      for (int n = 0; n < kNames; ++n) {
        absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
            client.GetLock(absl::StrCat("race-", n));
        if (!lock.ok()) {
          ADD_FAILURE() << lock.status();
          return;
        }
        locks.push_back(*std::move(lock));
      }
      // Start together, so that the attempts really race.
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int n = 0; n < kNames; ++n) {
        absl::StatusOr<Hold> acquired = locks[n]->TryAcquire(WithLease(kLease));
        if (acquired.ok()) {
          wins[t][n] = true;
          EXPECT_EQ(acquired->hold_count(), 1);
          held[t].push_back(*std::move(acquired));
        } else {
          EXPECT_CODE(acquired, kDeadlineExceeded);
          EXPECT_TRUE(IsHeldByAnother(acquired.status())) << acquired.status();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (int n = 0; n < kNames; ++n) {
    int winners = 0;
    std::string winner;
    for (int t = 0; t < kThreads; ++t) {
      if (wins[t][n]) {
        ++winners;
        winner = owners[t];
      }
    }
    EXPECT_EQ(winners, 1) << "race-" << n;
    ASSERT_OK_AND_ASSIGN(LockInfo info,
                         clients[0]->Admin().Inspect(absl::StrCat("race-", n)));
    EXPECT_TRUE(info.locked);
    EXPECT_EQ(info.owner, winner);
    EXPECT_EQ(info.hold_count, 1);
    EXPECT_GT(info.remaining_lease, absl::ZeroDuration());
    EXPECT_LE(info.remaining_lease, kLease);
  }
}

TEST_P(Conformance, C10_TryAcquireAnswersPromptly) {
  // Slow polls, so that a try that waited for a poll shows.
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("try"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("try"));

  absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold first, held->TryAcquire());
  EXPECT_EQ(first.hold_count(), 1);
  EXPECT_LT(absl::Now() - start, kPromptly) << "try on a free lock";

  for (int i = 0; i < 3; ++i) {
    start = absl::Now();
    absl::StatusOr<Hold> tried = contender->TryAcquire();
    EXPECT_CODE(tried, kDeadlineExceeded);
    EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
    tried = contender->TryAcquire(WithLease(absl::Seconds(5)));
    EXPECT_CODE(tried, kDeadlineExceeded);
    EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
    EXPECT_LT(absl::Now() - start, kPromptly) << "try on a held lock";
  }

  ASSERT_OK(first.Release());
  start = absl::Now();
  absl::StatusOr<Hold> second = contender->TryAcquire();
  EXPECT_OK(second);
  EXPECT_LT(absl::Now() - start, kPromptly) << "try on a released lock";
  if (second.ok()) {
    EXPECT_OK(second->Release());
  }
}

}  // namespace
}  // namespace dlock::test
