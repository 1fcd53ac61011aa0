// Copyright dlock authors. Unit tests of dlock/cancel.h.
#include "dlock/cancel.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(CancelToken, StartsUncancelledAndCancelsOnce) {
  CancelToken token;
  EXPECT_FALSE(token.IsCancelled());
  int calls = 0;
  token.AddCallback([&] { ++calls; });
  token.Cancel();
  token.Cancel();  // idempotent
  EXPECT_TRUE(token.IsCancelled());
  EXPECT_EQ(calls, 1);
}

TEST(CancelToken, CopiesShareTheFlagFreshTokensDoNot) {
  CancelToken token;
  CancelToken copy = token;
  CancelToken other;
  copy.Cancel();
  EXPECT_TRUE(token.IsCancelled());
  EXPECT_FALSE(other.IsCancelled());
}

TEST(CancelToken, RunsEveryCallbackOnCancel) {
  CancelToken token;
  int first = 0;
  int second = 0;
  token.AddCallback([&] { ++first; });
  token.AddCallback([&] { ++second; });
  EXPECT_EQ(first + second, 0);
  token.Cancel();
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
}

TEST(CancelToken, CallbackAddedAfterCancelRunsAtOnce) {
  CancelToken token;
  token.Cancel();
  int calls = 0;
  token.AddCallback([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  token.Cancel();
  EXPECT_EQ(calls, 1);
}

TEST(CancelToken, RemovedCallbackDoesNotRun) {
  CancelToken token;
  int calls = 0;
  uint64_t id = token.AddCallback([&] { ++calls; });
  token.RemoveCallback(id);
  token.RemoveCallback(id);  // harmless twice
  token.Cancel();
  EXPECT_EQ(calls, 0);
}

TEST(ScopedCancelCallback, LivesForItsScope) {
  CancelToken token;
  int calls = 0;
  {
    ScopedCancelCallback scoped(token, [&] { ++calls; });
  }
  token.Cancel();
  EXPECT_EQ(calls, 0);

  CancelToken other;
  ScopedCancelCallback scoped(other, [&] { ++calls; });
  other.Cancel();
  EXPECT_EQ(calls, 1);
}

// Cancel() from many threads at once runs each callback exactly once, and a
// callback removed concurrently either ran completely or never runs.
TEST(CancelToken, ConcurrentCancelRunsCallbacksOnce) {
  for (int round = 0; round < 50; ++round) {
    CancelToken token;
    std::atomic<int> calls{0};
    for (int i = 0; i < 4; ++i) token.AddCallback([&] { ++calls; });
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&] { token.Cancel(); });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(calls.load(), 4);
  }
}

TEST(CancelToken, RemoveRacingCancelNeverLeavesARunningCallback) {
  for (int round = 0; round < 50; ++round) {
    CancelToken token;
    std::atomic<bool> running{false};
    std::atomic<bool> ran_after_remove{false};
    std::atomic<bool> removed{false};
    uint64_t id = token.AddCallback([&] {
      running = true;
      if (removed.load()) ran_after_remove = true;
      running = false;
    });
    std::thread canceller([&] { token.Cancel(); });
    token.RemoveCallback(id);
    removed = true;
    EXPECT_FALSE(running.load());
    canceller.join();
    EXPECT_FALSE(ran_after_remove.load());
  }
}

}  // namespace
}  // namespace dlock
