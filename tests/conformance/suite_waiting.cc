// Copyright dlock authors. Conformance: waiting without polling, deadlines and
// cancellation (C9), and threads sharing a client (C17).
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"

namespace dlock::test {
namespace {

// A waiter that gave up must leave nothing behind: the released lock is free,
// nothing is listed, and it is at once a fresh hold for whoever asks.
void ExpectNothingLeftBehind(LockClient& client, DistributedLock& lock) {
  absl::StatusOr<LockInfo> info = client.Admin().Inspect(lock.name());
  ASSERT_OK(info);
  EXPECT_FALSE(info->locked);
  absl::StatusOr<std::optional<std::set<std::string>>> listed =
      ListedNames(client);
  ASSERT_OK(listed);
  if (listed->has_value()) {
    EXPECT_TRUE((*listed)->empty());
  }
  absl::StatusOr<Hold> fresh = lock.TryAcquire();
  ASSERT_OK(fresh);
  EXPECT_EQ(fresh->hold_count(), 1);
  EXPECT_OK(fresh->Release());
}

TEST_P(Conformance, C9_ReleaseWakesWaitersFarSoonerThanFallbackPoll) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto first_waiter, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto second_waiter, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("handed off"));
  ASSERT_OK_AND_ASSIGN(auto first, first_waiter->GetLock("handed off"));
  ASSERT_OK_AND_ASSIGN(auto second, second_waiter->GetLock("handed off"));
  // A long lease, so that only the release can free the lock in time.
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));

  // Two waiters in other clients: the release wakes one, whose release (as
  // soon as it has the lock) wakes the other.
  BackgroundAcquire a(*first, WithLease(kLongLease, kNoHang * 2));
  BackgroundAcquire b(*second, WithLease(kLongLease, kNoHang * 2));
  absl::SleepFor(kLetWaiterBlock);
  EXPECT_FALSE(a.done()) << "acquired a held lock";
  EXPECT_FALSE(b.done()) << "acquired a held lock";

  const absl::Time released = absl::Now();
  ASSERT_OK(hold.Release());
  ASSERT_TRUE(a.WaitDone(kNoHang));
  ASSERT_TRUE(b.WaitDone(kNoHang));
  ASSERT_OK(a.result());
  ASSERT_OK(b.result());
  EXPECT_LT(a.done_at() - released, 2 * kPromptly)
      << "woken by the fallback poll, not by the release";
  EXPECT_LT(b.done_at() - released, 2 * kPromptly)
      << "woken by the fallback poll, not by the release";
  EXPECT_LT(std::min(a.done_at(), b.done_at()) - released, kPromptly);
  EXPECT_NE(a.result()->fencing_token, b.result()->fencing_token);
}

TEST_P(Conformance, C9_TimedOutWaiterLeavesNothingBehind) {
  constexpr absl::Duration kWait = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto waiter_client, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("waited for"));
  ASSERT_OK_AND_ASSIGN(auto waiter, waiter_client->GetLock("waited for"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));

  for (int i = 0; i < 2; ++i) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Hold> got = waiter->Acquire(WithLease(kLongLease, kWait));
    const absl::Duration waited = absl::Now() - start;
    EXPECT_CODE(got, kDeadlineExceeded);
    EXPECT_TRUE(IsWaitExpired(got.status())) << got.status();
    EXPECT_GE(waited, kWait - absl::Milliseconds(20));
    EXPECT_LT(waited, kWait + kPromptly) << "the deadline did not end the wait";
    // No hold to believe.
    EXPECT_FALSE(got.ok() && got->state() == LockState::kHeld);
  }
  ASSERT_OK(hold.Release());
  ExpectNothingLeftBehind(*holder, *held);
}

TEST_P(Conformance, C9_CancelledWaiterLeavesNothingBehind) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto waiter_client, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("given up on"));
  ASSERT_OK_AND_ASSIGN(auto waiter, waiter_client->GetLock("given up on"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));

  AcquireOptions options = WithLease(kLongLease, kNoHang * 2);
  CancelToken cancel = options.cancel;
  BackgroundAcquire waiting(*waiter, options);
  absl::SleepFor(kLetWaiterBlock);
  EXPECT_FALSE(waiting.done());
  const absl::Time cancelled = absl::Now();
  cancel.Cancel();
  ASSERT_TRUE(waiting.WaitDone(kNoHang));
  EXPECT_CODE(waiting.result(), kCancelled);
  EXPECT_LT(waiting.done_at() - cancelled, kPromptly);

  ASSERT_OK(hold.Release());
  ExpectNothingLeftBehind(*holder, *held);
}

// A waiter blocked on one lock does not hold up other calls of its client.
TEST_P(Conformance, C17_BlockedWaiterDoesNotStallOtherLocks) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(SlowPollOptions()));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto blocked, client->GetLock("blocked"));
  ASSERT_OK_AND_ASSIGN(auto free_lock, client->GetLock("free"));
  ASSERT_OK_AND_ASSIGN(auto held_elsewhere, other->GetLock("blocked"));
  ASSERT_OK_AND_ASSIGN(Hold elsewhere,
                       held_elsewhere->Acquire(WithLease(kLongLease)));

  BackgroundAcquire waiter(*blocked, WithLease(kLongLease, kNoHang * 2));
  absl::SleepFor(kLetWaiterBlock);
  const absl::Time start = absl::Now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold hold, free_lock->TryAcquire());
    ASSERT_OK(client->Admin().Inspect("free"));
    ASSERT_OK(client->Admin().Inspect("blocked"));
    ASSERT_OK(hold.Release());
  }
  EXPECT_LT(absl::Now() - start, kNoHang / 2);
  EXPECT_FALSE(waiter.done());
  ASSERT_OK(elsewhere.Release());
  ASSERT_TRUE(waiter.WaitDone(kNoHang));
  EXPECT_OK(waiter.result());
}

// Many threads share one client and one handle per lock; each is its own
// owner.
TEST_P(Conformance, C17_ThreadsShareClientAndHandles) {
  constexpr int kThreads = 4;
  constexpr int kCycles = 50;
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  std::vector<std::unique_ptr<DistributedLock>> own_locks;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock(absl::StrCat("own-", t)));
    own_locks.push_back(std::move(lock));
  }
  ASSERT_OK_AND_ASSIGN(auto shared, client->GetLock("shared"));

  std::atomic<int> inside_shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, own = own_locks[t].get()] {
      for (int i = 0; i < kCycles; ++i) {
        absl::StatusOr<Hold> first = own->TryAcquire();
        absl::StatusOr<Hold> second = own->TryAcquire();
        ASSERT_OK(first);
        ASSERT_OK(second);
        EXPECT_EQ(second->hold_count(), 2);
        EXPECT_OK(second->Release());
        EXPECT_OK(first->Release());

        absl::StatusOr<Hold> inside =
            shared->Acquire(WithLease(kLongLease, kNoHang));
        ASSERT_OK(inside);
        EXPECT_EQ(inside_shared.fetch_add(1), 0);
        inside_shared.fetch_sub(1);
        EXPECT_OK(inside->Release());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("shared"));
  EXPECT_FALSE(info.locked);
}

}  // namespace
}  // namespace dlock::test
