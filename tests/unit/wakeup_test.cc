// Copyright dlock authors. Unit tests of dlock/backend/wakeup.h: WakeupHub and
// AcquireWithWakeups. Bounds are loose (a loaded 2-core machine); they tell
// a wake-up from a timeout that is ten times longer.
#include "dlock/backend/wakeup.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

constexpr absl::Duration kLong = absl::Seconds(10);
constexpr absl::Duration kPrompt = absl::Seconds(1);

MonoTime Now() { return Clock::Real().Now(); }

TEST(WakeupHub, NotifyBeforeWaitIsNotLost) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("a");  // between the attempt and the wait
  const MonoTime start = Now();
  EXPECT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_LT(Now() - start, kPrompt);
}

TEST(WakeupHub, EachNotificationWakesOnce) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("a");
  hub.Notify("a");  // coalesced with the first: one wake-up
  EXPECT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_FALSE(waiter.Wait(Now() + absl::Milliseconds(50), CancelToken()));
}

TEST(WakeupHub, TimesOut) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  const MonoTime start = Now();
  EXPECT_FALSE(waiter.Wait(start + absl::Milliseconds(100), CancelToken()));
  const absl::Duration waited = Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(95));
  EXPECT_LT(waited, kPrompt + absl::Milliseconds(100));
}

TEST(WakeupHub, OtherNamesDoNotWake) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("b");
  hub.Notify("ab");
  EXPECT_FALSE(waiter.Wait(Now() + absl::Milliseconds(100), CancelToken()));
}

TEST(WakeupHub, AWakeUpIsARaceUnlessEveryAnnouncementSaidOneWaiter) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  hub.Notify("a", WakeupHub::Waking::kOne);
  ASSERT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_FALSE(waiter.woken_for_a_race());

  hub.Notify("a");  // a backend that cannot tell: a race
  ASSERT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_TRUE(waiter.woken_for_a_race());

  // Two announcements seen in one wake-up: a race if either says so.
  hub.Notify("a", WakeupHub::Waking::kOne);
  hub.Notify("a");
  hub.Notify("a", WakeupHub::Waking::kOne);
  ASSERT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_TRUE(waiter.woken_for_a_race());

  hub.Notify("b");  // another name's race is not this one's
  hub.Notify("a", WakeupHub::Waking::kOne);
  ASSERT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_FALSE(waiter.woken_for_a_race());

  hub.NotifyAll();  // announcements may have been lost: anybody's
  ASSERT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  EXPECT_TRUE(waiter.woken_for_a_race());
}

TEST(WakeupHub, NotifyWithoutWaitersIsForgotten) {
  WakeupHub hub(Clock::Real());
  hub.Notify("a");  // nobody registered: nothing to remember
  WakeupHub::Waiter waiter(hub, "a");
  EXPECT_FALSE(waiter.Wait(Now() + absl::Milliseconds(50), CancelToken()));
}

TEST(WakeupHub, NotifyWakesABlockedWaiterPromptly) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  MonoTime notified;
  std::thread notifier([&] {
    absl::SleepFor(absl::Milliseconds(100));
    notified = Now();
    hub.Notify("a");
  });
  EXPECT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  const MonoTime woke = Now();
  notifier.join();
  EXPECT_LT(woke - notified, kPrompt);
}

TEST(WakeupHub, EveryWaiterOfANameWakes) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter first(hub, "a");
  WakeupHub::Waiter second(hub, "a");
  hub.Notify("a");
  EXPECT_TRUE(first.Wait(Now() + kLong, CancelToken()));
  EXPECT_TRUE(second.Wait(Now() + kLong, CancelToken()));
}

TEST(WakeupHub, NotifyAllWakesEveryName) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter a(hub, "a");
  WakeupHub::Waiter b(hub, "b");
  hub.NotifyAll();
  EXPECT_TRUE(a.Wait(Now() + kLong, CancelToken()));
  EXPECT_TRUE(b.Wait(Now() + kLong, CancelToken()));
  // A waiter registered after NotifyAll did not miss anything of its own.
  WakeupHub::Waiter late(hub, "c");
  EXPECT_FALSE(late.Wait(Now() + absl::Milliseconds(50), CancelToken()));
}

TEST(WakeupHub, CancelWakesABlockedWaiter) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  CancelToken cancel;
  MonoTime cancelled;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancelled = Now();
    cancel.Cancel();
  });
  EXPECT_FALSE(waiter.Wait(MonoTime::InfiniteFuture(), cancel));
  const MonoTime woke = Now();
  canceller.join();
  EXPECT_LT(woke - cancelled, kPrompt);
}

TEST(WakeupHub, AlreadyCancelledReturnsAtOnce) {
  WakeupHub hub(Clock::Real());
  WakeupHub::Waiter waiter(hub, "a");
  CancelToken cancel;
  cancel.Cancel();
  const MonoTime start = Now();
  EXPECT_FALSE(waiter.Wait(MonoTime::InfiniteFuture(), cancel));
  EXPECT_LT(Now() - start, kPrompt);
}

TEST(WakeupHub, WaitersComeAndGo) {
  WakeupHub hub(Clock::Real());
  for (int i = 0; i < 3; ++i) {
    WakeupHub::Waiter waiter(hub, "a");
    hub.Notify("a");
    EXPECT_TRUE(waiter.Wait(Now() + kLong, CancelToken()));
  }
}

// --- AcquireWithWakeups ----------------------------------------------------

AcquireCall CallUntil(MonoTime deadline, CancelToken cancel = {}) {
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
  WakeupHub hub(Clock::Real());
  int attempts = 0;
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(Now() + kLong), hub, kLong, [&] {
        ++attempts;
        return absl::StatusOr<Attempt>(Granted());
      });
  ASSERT_OK(acquired);
  EXPECT_EQ(acquired->fencing_token, 7u);
  EXPECT_EQ(attempts, 1);
}

TEST(AcquireWithWakeups, PastDeadlineMeansOneAttempt) {
  WakeupHub hub(Clock::Real());
  int attempts = 0;
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(MonoTime::InfinitePast()), hub, kLong, [&] {
        ++attempts;
        return absl::StatusOr<Attempt>(Held());
      });
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(acquired.status().message(), "lock"));
  EXPECT_EQ(attempts, 1);
  EXPECT_LT(Now() - start, kPrompt);
}

TEST(AcquireWithWakeups, NotifyTriggersTheNextAttempt) {
  WakeupHub hub(Clock::Real());
  std::atomic<int> attempts{0};
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(100));
    hub.Notify("lock");
  });
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(Now() + kLong), hub, kLong, [&] {
        return absl::StatusOr<Attempt>(++attempts == 1 ? Held() : Granted());
      });
  releaser.join();
  ASSERT_OK(acquired);
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_LT(Now() - start, kPrompt + absl::Milliseconds(100))
      << "waited for the fallback poll, not the notification";
}

// A semaphore's or an election's waiter sleeps on the name its releases
// are announced under, not on the name it asked for.
TEST(AcquireWithWakeups, WaitsOnTheNameItIsToldToWakeOn) {
  WakeupHub hub(Clock::Real());
  std::atomic<int> attempts{0};
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(100));
    hub.Notify("lock");  // the asked-for name: must not wake it
    absl::SleepFor(absl::Milliseconds(100));
    hub.Notify("row of lock");
  });
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired = AcquireWithWakeups(
      CallUntil(Now() + kLong), "row of lock", hub, kLong, [&] {
        return absl::StatusOr<Attempt>(++attempts == 1 ? Held() : Granted());
      });
  const absl::Duration waited = Now() - start;  // not the releaser's end
  releaser.join();
  ASSERT_OK(acquired);
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_GE(waited, absl::Milliseconds(200))
      << "woken by the asked-for name's announcement";
  EXPECT_LT(waited, kPrompt + absl::Milliseconds(200))
      << "waited for the fallback poll, not the notification";
}

// The waiter registers only after its first attempt failed; a release
// announced between that attempt's reply and the registration must still
// bring the next attempt at once, not after the fallback poll.
TEST(AcquireWithWakeups, NotifyJustAfterTheFirstAttemptIsNotMissed) {
  WakeupHub hub(Clock::Real());
  int attempts = 0;
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(Now() + kLong), hub, kLong, [&] {
        if (++attempts > 1) return absl::StatusOr<Attempt>(Granted());
        // The holder releases as soon as this attempt has seen it hold.
        hub.Notify("lock");
        return absl::StatusOr<Attempt>(Held());
      });
  ASSERT_OK(acquired);
  EXPECT_EQ(attempts, 2);
  EXPECT_LT(Now() - start, kPrompt)
      << "waited for the fallback poll: the announcement was missed";
}

TEST(AcquireWithWakeups, FallbackPollRetriesWithoutNotify) {
  WakeupHub hub(Clock::Real());
  int attempts = 0;
  absl::StatusOr<Grant> acquired = AcquireWithWakeups(
      CallUntil(Now() + kLong), hub, absl::Milliseconds(20), [&] {
        return absl::StatusOr<Attempt>(++attempts < 4 ? Held() : Granted());
      });
  ASSERT_OK(acquired);
  EXPECT_EQ(attempts, 4);
}

TEST(AcquireWithWakeups, HolderLeaseEndShortensTheNap) {
  WakeupHub hub(Clock::Real());
  int attempts = 0;
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(Now() + kLong), hub, kLong, [&] {
        return absl::StatusOr<Attempt>(
            ++attempts == 1 ? Held(absl::Milliseconds(50)) : Granted());
      });
  ASSERT_OK(acquired);
  EXPECT_LT(Now() - start, kPrompt);
}

TEST(AcquireWithWakeups, DeadlineExceededWhenNeverFree) {
  WakeupHub hub(Clock::Real());
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(start + absl::Milliseconds(150)), hub, kLong,
                         [] { return absl::StatusOr<Attempt>(Held()); });
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kDeadlineExceeded);
  const absl::Duration waited = Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(145));
  EXPECT_LT(waited, kPrompt + absl::Milliseconds(150));
}

TEST(AcquireWithWakeups, CancelEndsTheWait) {
  WakeupHub hub(Clock::Real());
  CancelToken cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel.Cancel();
  });
  const MonoTime start = Now();
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(MonoTime::InfiniteFuture(), cancel), hub,
                         kLong, [] { return absl::StatusOr<Attempt>(Held()); });
  canceller.join();
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(Now() - start, kPrompt + absl::Milliseconds(100));
}

TEST(AcquireWithWakeups, AttemptErrorsReturnAsIs) {
  WakeupHub hub(Clock::Real());
  int attempts = 0;
  absl::StatusOr<Grant> acquired =
      AcquireWithWakeups(CallUntil(Now() + kLong), hub, kLong, [&] {
        ++attempts;
        return absl::StatusOr<Attempt>(absl::UnavailableError("down"));
      });
  EXPECT_EQ(acquired.status(), absl::UnavailableError("down"));
  EXPECT_EQ(attempts, 1);
}

// The lease a grant starts is counted from the attempt that won, however
// long the wait before it (C19).
TEST(AcquireWithWakeups, GrantCarriesTheSendTimeOfTheWinningAttempt) {
  ManualClock clock;
  WakeupHub hub(clock);
  const MonoTime start = clock.Now();
  int attempts = 0;
  MonoTime last_sent;
  absl::StatusOr<Grant> acquired = AcquireWithWakeups(
      CallUntil(MonoTime::InfiniteFuture()), hub, kLong, [&] {
        last_sent = clock.Now();
        // Each reply takes 4 s; the holder releases during the first.
        clock.Advance(absl::Seconds(4));
        if (++attempts == 1) {
          hub.Notify("lock");
          return absl::StatusOr<Attempt>(Held());
        }
        return absl::StatusOr<Attempt>(Granted());
      });
  ASSERT_OK(acquired);
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(acquired->sent, last_sent);
  EXPECT_EQ(acquired->sent, start + absl::Seconds(4));
}

// Two clients (a hub each, as two processes) wait for one lock. Each release
// reaches the first 100 us before the second, every time, as when a server
// tells its subscribers in a fixed order or one client's path is slower: the
// races must still be fair draws, not won by the first told every time (a
// history run saw one worker granted once in 30 s while two others took
// turns).
TEST(AcquireWithWakeups, TheWaiterToldFirstDoesNotWinEveryRace) {
  constexpr int kRounds = 100;
  constexpr int kDriver = -1, kFree = 0;
  WakeupHub hubs[2] = {WakeupHub(Clock::Real()), WakeupHub(Clock::Real())};
  absl::Mutex mu;
  int owner = kDriver;               // guarded by mu
  bool refused[2] = {false, false};  // since the last release
  CancelToken stop;
  auto client = [&](int me) {
    while (AcquireWithWakeups(CallUntil(MonoTime::InfiniteFuture(), stop),
                              hubs[me], kLong,
                              [&] {
                                absl::MutexLock lock(&mu);
                                if (owner != kFree) {
                                  refused[me] = true;
                                  return absl::StatusOr<Attempt>(Held());
                                }
                                owner = me + 1;
                                return absl::StatusOr<Attempt>(Granted());
                              })
               .ok()) {
    }
  };
  std::thread first(client, 0), second(client, 1);
  int wins[2] = {0, 0};
  mu.Lock();
  for (int round = 0; round < kRounds; ++round) {
    if (!mu.AwaitWithTimeout(
            absl::Condition(
                +[](bool* r) { return r[0] && r[1]; }, refused),
            kLong)) {
      ADD_FAILURE() << "a client stopped waiting, round " << round;
      break;
    }
    mu.Unlock();
    absl::SleepFor(absl::Milliseconds(2));  // both asleep in their waits
    mu.Lock();
    owner = kFree;
    refused[0] = refused[1] = false;
    mu.Unlock();
    hubs[0].Notify("lock");
    // Spun, not slept: a sleep this short lasts longer on a loaded machine.
    for (const MonoTime at = Now() + absl::Microseconds(100); Now() < at;) {
    }
    hubs[1].Notify("lock");
    mu.Lock();
    if (!mu.AwaitWithTimeout(absl::Condition(
                                 +[](int* o) { return *o != kFree; }, &owner),
                             kLong)) {
      ADD_FAILURE() << "nobody took the lock, round " << round;
      break;
    }
    ++wins[owner - 1];
    owner = kDriver;  // taken back: the winner waits again
  }
  mu.Unlock();
  stop.Cancel();
  first.join();
  second.join();
  // Each draw is fair but for the 100 us head start (0.4 for the second
  // with a 1 ms spread): a sixth or fewer of 100 is five standard
  // deviations below that.
  EXPECT_GT(wins[1], kRounds / 6)
      << "the waiter told second won " << wins[1] << " of " << kRounds;
  EXPECT_GT(wins[0], kRounds / 6)
      << "the waiter told first won " << wins[0] << " of " << kRounds;
}

// Waits count on the hub's clock: an injected clock that does not move keeps
// a waiter waiting however much real time passes, and moving it ends the
// wait at once.
TEST(WakeupHub, WaitsFollowTheInjectedClock) {
  ManualClock clock;
  WakeupHub hub(clock);
  WakeupHub::Waiter waiter(hub, "a");
  std::atomic<bool> returned{false};
  std::thread waiting([&] {
    EXPECT_FALSE(waiter.Wait(clock.Now() + absl::Seconds(30), CancelToken()));
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(returned.load()) << "the wait ended on real time";
  clock.Advance(absl::Seconds(29));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(returned.load()) << "the wait ended before its deadline";
  const MonoTime real_start = Now();
  clock.Advance(absl::Seconds(1));
  waiting.join();
  EXPECT_LT(Now() - real_start, kPrompt);
}

}  // namespace
}  // namespace dlock
