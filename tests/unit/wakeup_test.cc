// Copyright dlock authors. Unit tests of dlock/wakeup.h: WakeupHub and
// AcquireWithWakeups. Bounds are loose (a loaded 2-core machine); they tell
// a wake-up from a timeout that is ten times longer.
#include "dlock/wakeup.h"

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

constexpr absl::Duration kLong = absl::Seconds(10);
constexpr absl::Duration kPrompt = absl::Seconds(1);

TEST(WakeupHub, NotifyBeforeWaitIsNotLost) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("a");  // between the attempt and the wait
  const absl::Time start = absl::Now();
  EXPECT_TRUE(waiter.Wait(absl::Now() + kLong, CancelToken()));
  EXPECT_LT(absl::Now() - start, kPrompt);
}

TEST(WakeupHub, EachNotificationWakesOnce) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("a");
  hub.Notify("a");  // coalesced with the first: one wake-up
  EXPECT_TRUE(waiter.Wait(absl::Now() + kLong, CancelToken()));
  EXPECT_FALSE(
      waiter.Wait(absl::Now() + absl::Milliseconds(50), CancelToken()));
}

TEST(WakeupHub, TimesOut) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  const absl::Time start = absl::Now();
  EXPECT_FALSE(waiter.Wait(start + absl::Milliseconds(100), CancelToken()));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(95));
  EXPECT_LT(waited, kPrompt + absl::Milliseconds(100));
}

TEST(WakeupHub, OtherNamesDoNotWake) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("b");
  hub.Notify("ab");
  EXPECT_FALSE(
      waiter.Wait(absl::Now() + absl::Milliseconds(100), CancelToken()));
}

TEST(WakeupHub, NotifyWithoutWaitersIsForgotten) {
  WakeupHub hub;
  hub.Notify("a");  // nobody registered: nothing to remember
  WakeupHub::Waiter waiter(hub, "a");
  EXPECT_FALSE(
      waiter.Wait(absl::Now() + absl::Milliseconds(50), CancelToken()));
}

TEST(WakeupHub, NotifyWakesABlockedWaiterPromptly) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  absl::Time notified;
  std::thread notifier([&] {
    absl::SleepFor(absl::Milliseconds(100));
    notified = absl::Now();
    hub.Notify("a");
  });
  EXPECT_TRUE(waiter.Wait(absl::Now() + kLong, CancelToken()));
  const absl::Time woke = absl::Now();
  notifier.join();
  EXPECT_LT(woke - notified, kPrompt);
}

TEST(WakeupHub, EveryWaiterOfANameWakes) {
  WakeupHub hub;
  WakeupHub::Waiter first(hub, "a");
  WakeupHub::Waiter second(hub, "a");
  hub.Notify("a");
  EXPECT_TRUE(first.Wait(absl::Now() + kLong, CancelToken()));
  EXPECT_TRUE(second.Wait(absl::Now() + kLong, CancelToken()));
}

TEST(WakeupHub, NotifyAllWakesEveryName) {
  WakeupHub hub;
  WakeupHub::Waiter a(hub, "a");
  WakeupHub::Waiter b(hub, "b");
  hub.NotifyAll();
  EXPECT_TRUE(a.Wait(absl::Now() + kLong, CancelToken()));
  EXPECT_TRUE(b.Wait(absl::Now() + kLong, CancelToken()));
  // A waiter registered after NotifyAll did not miss anything of its own.
  WakeupHub::Waiter late(hub, "c");
  EXPECT_FALSE(late.Wait(absl::Now() + absl::Milliseconds(50), CancelToken()));
}

TEST(WakeupHub, CancelWakesABlockedWaiter) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  CancelToken cancel;
  absl::Time cancelled;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancelled = absl::Now();
    cancel.Cancel();
  });
  EXPECT_FALSE(waiter.Wait(absl::InfiniteFuture(), cancel));
  const absl::Time woke = absl::Now();
  canceller.join();
  EXPECT_LT(woke - cancelled, kPrompt);
}

TEST(WakeupHub, AlreadyCancelledReturnsAtOnce) {
  WakeupHub hub;
  WakeupHub::Waiter waiter(hub, "a");
  CancelToken cancel;
  cancel.Cancel();
  const absl::Time start = absl::Now();
  EXPECT_FALSE(waiter.Wait(absl::InfiniteFuture(), cancel));
  EXPECT_LT(absl::Now() - start, kPrompt);
}

TEST(WakeupHub, WaitersComeAndGo) {
  WakeupHub hub;
  for (int i = 0; i < 3; ++i) {
    WakeupHub::Waiter waiter(hub, "a");
    hub.Notify("a");
    EXPECT_TRUE(waiter.Wait(absl::Now() + kLong, CancelToken()));
  }
}

// --- AcquireWithWakeups ----------------------------------------------------

AcquireCall CallUntil(absl::Time deadline, CancelToken cancel = {}) {
  return AcquireCall{.name = "lock",
                     .owner = "me",
                     .lease = absl::Seconds(30),
                     .deadline = deadline,
                     .cancel = std::move(cancel)};
}

Attempt Held(absl::Duration lease_left = absl::InfiniteDuration()) {
  return Attempt{.acquired = std::nullopt, .holder_lease_left = lease_left};
}

Attempt Granted() { return Attempt{.acquired = Acquired{7, 1}}; }

TEST(AcquireWithWakeups, ReturnsTheFirstGrant) {
  WakeupHub hub;
  int attempts = 0;
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(absl::Now() + kLong), hub, kLong, [&] {
        ++attempts;
        return absl::StatusOr<Attempt>(Granted());
      });
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_EQ(acquired->fencing_token, 7u);
  EXPECT_EQ(attempts, 1);
}

TEST(AcquireWithWakeups, PastDeadlineMeansOneAttempt) {
  WakeupHub hub;
  int attempts = 0;
  const absl::Time start = absl::Now();
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(absl::InfinitePast()), hub, kLong, [&] {
        ++attempts;
        return absl::StatusOr<Attempt>(Held());
      });
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(acquired.status().message(), "lock"));
  EXPECT_EQ(attempts, 1);
  EXPECT_LT(absl::Now() - start, kPrompt);
}

TEST(AcquireWithWakeups, NotifyTriggersTheNextAttempt) {
  WakeupHub hub;
  std::atomic<int> attempts{0};
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(100));
    hub.Notify("lock");
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(absl::Now() + kLong), hub, kLong, [&] {
        return absl::StatusOr<Attempt>(++attempts == 1 ? Held() : Granted());
      });
  releaser.join();
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_LT(absl::Now() - start, kPrompt + absl::Milliseconds(100))
      << "waited for the fallback poll, not the notification";
}

TEST(AcquireWithWakeups, FallbackPollRetriesWithoutNotify) {
  WakeupHub hub;
  int attempts = 0;
  absl::StatusOr<Acquired> acquired = AcquireWithWakeups(
      CallUntil(absl::Now() + kLong), hub, absl::Milliseconds(20), [&] {
        return absl::StatusOr<Attempt>(++attempts < 4 ? Held() : Granted());
      });
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_EQ(attempts, 4);
}

TEST(AcquireWithWakeups, HolderLeaseEndShortensTheNap) {
  WakeupHub hub;
  int attempts = 0;
  const absl::Time start = absl::Now();
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(absl::Now() + kLong), hub, kLong, [&] {
        return absl::StatusOr<Attempt>(
            ++attempts == 1 ? Held(absl::Milliseconds(50)) : Granted());
      });
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_LT(absl::Now() - start, kPrompt);
}

TEST(AcquireWithWakeups, DeadlineExceededWhenNeverFree) {
  WakeupHub hub;
  const absl::Time start = absl::Now();
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(start + absl::Milliseconds(150)), hub, kLong,
                         [] { return absl::StatusOr<Attempt>(Held()); });
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kDeadlineExceeded);
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(145));
  EXPECT_LT(waited, kPrompt + absl::Milliseconds(150));
}

TEST(AcquireWithWakeups, CancelEndsTheWait) {
  WakeupHub hub;
  CancelToken cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel.Cancel();
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(absl::InfiniteFuture(), cancel), hub, kLong,
                         [] { return absl::StatusOr<Attempt>(Held()); });
  canceller.join();
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, kPrompt + absl::Milliseconds(100));
}

TEST(AcquireWithWakeups, AttemptErrorsReturnAsIs) {
  WakeupHub hub;
  int attempts = 0;
  absl::StatusOr<Acquired> acquired =
      AcquireWithWakeups(CallUntil(absl::Now() + kLong), hub, kLong, [&] {
        ++attempts;
        return absl::StatusOr<Attempt>(absl::UnavailableError("down"));
      });
  EXPECT_EQ(acquired.status(), absl::UnavailableError("down"));
  EXPECT_EQ(attempts, 1);
}

}  // namespace
}  // namespace dlock
