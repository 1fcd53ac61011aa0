// Copyright dlock authors. Conformance: semaphores with leases (C22). Each
// case is named after the clause; a backend whose traits do not offer
// semaphores is checked for answering Unimplemented with its reason.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "fault_backend.h"
#include "primitives_fixture.h"
#include "server_process.h"

namespace dlock::test {
namespace {

using Slots = std::vector<int64_t>;

absl::StatusOr<std::unique_ptr<Semaphore>> SemaphoreOf(LockClient& client,
                                                       int64_t n) {
  return client.GetSemaphore("sem", n);
}

AcquireOptions Waiting(absl::Duration wait = kNoHang) {
  AcquireOptions options = WithLease(kLongLease, wait);
  return options;
}

TEST_P(Conformance, C22_AtMostNHoldersUnderContention) {
  constexpr int64_t kN = 3;
  constexpr int kClients = 4;
  constexpr int kThreadsPerClient = 2;
  constexpr int kRounds = 8;
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_OK_AND_ASSIGN(auto c, NewClient());
    clients.push_back(std::move(c));
  }
  if (!Offered(*clients[0], Primitive::kSemaphore)) return;
  std::atomic<int64_t> believed{0};
  std::atomic<int64_t> most{0};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients * kThreadsPerClient; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::unique_ptr<Semaphore>> sem =
          SemaphoreOf(*clients[t % kClients], kN);
      ASSERT_OK(sem);
      const int64_t permits = t % 3 == 0 ? 2 : 1;
      for (int round = 0; round < kRounds; ++round) {
        absl::StatusOr<Permit> permit = (*sem)->Acquire(permits, Waiting());
        ASSERT_OK(permit);
        // Counted only while believed held (C19).
        ASSERT_EQ(permit->state(), LockState::kHeld);
        const int64_t now = believed.fetch_add(permits) + permits;
        int64_t seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        absl::SleepFor(absl::Milliseconds(3));
        believed.fetch_sub(permits);
        ++granted;
        EXPECT_OK(permit->Release());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(granted.load(), kClients * kThreadsPerClient * kRounds);
  EXPECT_LE(most.load(), kN);
  EXPECT_GE(most.load(), 2) << "holders never overlapped: nothing was tested";
}

TEST_P(Conformance, C22_PermitsOfAKilledHolderComeBackWithinTheLease) {
  ASSERT_TRUE(backend().shared_across_processes)
      << MissingCapability("shared_across_processes");
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  if (!Offered(*client, Primitive::kSemaphore)) return;
  constexpr absl::Duration kLease = absl::Seconds(1);
  const std::string holder_path = LockHolderPath();
  ASSERT_EQ(access(holder_path.c_str(), X_OK), 0)
      << holder_path << " is missing: build dlock_lock_holder";
  ASSERT_OK_AND_ASSIGN(std::string dir, MakeTempDir("dlock-permits"));
  absl::Cleanup remove_dir = [dir] { RemoveTree(dir); };
  const std::string log = dir + "/holder.log";
  ChildProcess holder;
  // The child takes both permits, renewed by its watchdog until it dies.
  ASSERT_OK(
      holder.Spawn({holder_path, "--permits", "2", UriIn(ns()), "sem",
                    absl::StrCat(absl::ToInt64Milliseconds(kLease), "ms")},
                   log));
  ASSERT_OK_AND_ASSIGN(const uint64_t child_token, HeldToken(log));
  ASSERT_OK_AND_ASSIGN(auto sem, SemaphoreOf(*client, 2));
  absl::SleepFor(kLease * 1.5);  // past its lease, its watchdog renews
  EXPECT_CODE(sem->TryAcquire(1, WithLease(kLongLease)), kDeadlineExceeded);

  const absl::Time killed = absl::Now();
  holder.Kill();
  ASSERT_OK_AND_ASSIGN(Permit permit,
                       sem->Acquire(1, Waiting(kNoHang + kLease)));
  EXPECT_LE(absl::Now() - killed,
            kLease + ClientOptions().fallback_poll + kPromptly);
  EXPECT_GT(permit.fencing_token(), child_token);
  EXPECT_OK(permit.Release());
}

// A holder cut off from the backend (its renewals fail) is told it lost
// its permits before anyone else is granted them (C19, C20). The waiter
// wakes at the holder's lease end, not at its (slow) fallback poll.
TEST_P(Conformance, C22_LapsedHolderGivesItsPermitsBack) {
  CutOffHolder holder;
  ASSERT_OK_AND_ASSIGN(auto cut_off, NewClient(holder.Options()));
  ASSERT_OK_AND_ASSIGN(auto waiter, NewClient(SlowPollOptions()));
  if (!Offered(*waiter, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto held, SemaphoreOf(*cut_off, 2));
  ASSERT_OK_AND_ASSIGN(auto wanted, SemaphoreOf(*waiter, 2));
  ASSERT_OK_AND_ASSIGN(
      Permit permit, held->Acquire(2, holder.Watched(ObjectKind::kSemaphore)));
  holder.Cut();
  const absl::Time cut = absl::Now();
  ASSERT_OK_AND_ASSIGN(Permit taken, wanted->Acquire(1, Waiting()));
  const absl::Time granted_at = absl::Now();
  EXPECT_LE(holder.told(), granted_at) << "told after another was granted";
  EXPECT_LE(granted_at - cut, kShortWatchdogLease + kPromptly)
      << "the waiter polled (every " << kSlowFallbackPoll
      << ") instead of waking at the holder's lease end";
  EXPECT_EQ(permit.state(), LockState::kLost);
  EXPECT_OK(taken.Release());
}

TEST_P(Conformance, C22_AnotherLimitInForceIsFailedPrecondition) {
  ASSERT_OK_AND_ASSIGN(auto first, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second, NewClient());
  if (!Offered(*first, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto three, SemaphoreOf(*first, 3));
  ASSERT_OK_AND_ASSIGN(auto four, SemaphoreOf(*second, 4));
  ASSERT_OK_AND_ASSIGN(Permit permit, three->Acquire(1, Waiting()));
  absl::StatusOr<Permit> refused = four->Acquire(1, Waiting(absl::Seconds(1)));
  EXPECT_CODE(refused, kFailedPrecondition);
  EXPECT_TRUE(IsLimitMismatch(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "N=3"))
      << refused.status();
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, three->Inspect());
  EXPECT_EQ(info.limit, 3);
  ASSERT_EQ(info.holders.size(), 1u) << "the refused caller took nothing";
  EXPECT_FALSE(info.waiter.has_value());
  EXPECT_OK(permit.Release());
  // Once nothing holds it, the next caller's N is in force.
  ASSERT_OK_AND_ASSIGN(Permit later, four->Acquire(4, Waiting()));
  EXPECT_EQ(later.slots(), (Slots{0, 1, 2, 3}));
  EXPECT_OK(later.Release());
}

TEST_P(Conformance, C22_ManyPermitsAtOnceAreAllOrNone) {
  ASSERT_OK_AND_ASSIGN(auto first, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second, NewClient());
  if (!Offered(*first, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto one, SemaphoreOf(*first, 3));
  ASSERT_OK_AND_ASSIGN(auto many, SemaphoreOf(*second, 3));
  ASSERT_OK_AND_ASSIGN(Permit single, one->Acquire(1, Waiting()));
  EXPECT_EQ(single.slots(), (Slots{0}));
  absl::StatusOr<Permit> all = many->TryAcquire(3, WithLease(kLongLease));
  EXPECT_TRUE(IsHeldByAnother(all.status())) << all.status();
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, many->Inspect());
  ASSERT_EQ(info.holders.size(), 1u) << "nothing taken of the three";
  EXPECT_EQ(info.holders[0].slots, (Slots{0}));
  EXPECT_OK(single.Release());
  ASSERT_OK_AND_ASSIGN(Permit three,
                       many->TryAcquire(3, WithLease(kLongLease)));
  EXPECT_EQ(three.permits(), 3);
  EXPECT_EQ(three.slots(), (Slots{0, 1, 2}));
  EXPECT_OK(three.Release());
}

TEST_P(Conformance, C22_WaiterForManyPermitsIsNotStarvedBySingles) {
  constexpr int64_t kN = 3;
  ASSERT_OK_AND_ASSIGN(auto singles, NewClient());
  ASSERT_OK_AND_ASSIGN(auto greedy, NewClient());
  if (!Offered(*singles, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto sem, SemaphoreOf(*singles, kN));
  ASSERT_OK_AND_ASSIGN(auto all, SemaphoreOf(*greedy, kN));
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        absl::StatusOr<Permit> permit = sem->Acquire(1, Waiting());
        if (!permit.ok()) continue;
        absl::SleepFor(absl::Milliseconds(20));
        EXPECT_OK(permit->Release());
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(100));  // the singles overlap by now
  absl::StatusOr<Permit> three = all->Acquire(kN, Waiting());
  stop = true;
  if (three.ok()) {
    EXPECT_EQ(three->slots(), (Slots{0, 1, 2}));
    EXPECT_OK(three->Release());  // before the singles' last waits
  }
  for (std::thread& t : threads) t.join();
  EXPECT_OK(three) << "starved by a stream of single permits";
}

TEST_P(Conformance, C22_EachGrantsTokenExceedsEveryEarlierGrants) {
  ASSERT_OK_AND_ASSIGN(auto a, NewClient());
  ASSERT_OK_AND_ASSIGN(auto b, NewClient());
  if (!Offered(*a, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto sem_a, SemaphoreOf(*a, 2));
  ASSERT_OK_AND_ASSIGN(auto sem_b, SemaphoreOf(*b, 2));
  uint64_t last = 0;
  // Two holders overlap: each new grant comes while the other holds.
  ASSERT_OK_AND_ASSIGN(Permit held_b, sem_b->Acquire(1, Waiting()));
  last = held_b.fencing_token();
  for (int i = 0; i < 25; ++i) {
    ASSERT_OK_AND_ASSIGN(Permit pa, sem_a->Acquire(1, Waiting()));
    EXPECT_GT(pa.fencing_token(), last);
    last = pa.fencing_token();
    EXPECT_OK(held_b.Release());
    ASSERT_OK_AND_ASSIGN(held_b, sem_b->Acquire(1, Waiting()));
    EXPECT_GT(held_b.fencing_token(), last);
    last = held_b.fencing_token();
    EXPECT_OK(pa.Release());
  }
  EXPECT_OK(held_b.Release());
}

TEST_P(Conformance, C22_NoTwoBelievedHoldersShareASlot) {
  constexpr int64_t kN = 3;
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto c, NewClient());
    clients.push_back(std::move(c));
  }
  if (!Offered(*clients[0], Primitive::kSemaphore)) return;
  // A fenced register per slot: who is in it, and the largest token seen.
  struct Register {
    std::atomic<int> occupants{0};
    std::atomic<uint64_t> last_token{0};
  };
  std::vector<Register> slots(kN);
  std::atomic<int> overlaps{0};
  std::atomic<int> stale{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::unique_ptr<Semaphore>> sem =
          SemaphoreOf(*clients[t % clients.size()], kN);
      ASSERT_OK(sem);
      for (int round = 0; round < 10; ++round) {
        absl::StatusOr<Permit> permit = (*sem)->Acquire(1, Waiting());
        ASSERT_OK(permit);
        ASSERT_EQ(permit->slots().size(), 1u);
        Register& r = slots[permit->slots()[0]];
        if (r.occupants.fetch_add(1) != 0) ++overlaps;
        if (r.last_token.exchange(permit->fencing_token()) >=
            permit->fencing_token()) {
          ++stale;
        }
        absl::SleepFor(absl::Milliseconds(2));
        r.occupants.fetch_sub(1);
        EXPECT_OK(permit->Release());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "two believed holders shared a slot";
  EXPECT_EQ(stale.load(), 0) << "a slot's token went back";
}

TEST_P(Conformance, C22_ReentryKeepsTokenAndSlots) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  if (!Offered(*client, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto sem, SemaphoreOf(*client, 3));
  ASSERT_OK_AND_ASSIGN(auto contender, SemaphoreOf(*other, 3));
  ASSERT_OK_AND_ASSIGN(Permit outer, sem->Acquire(2, Waiting()));
  ASSERT_OK_AND_ASSIGN(Permit inner, sem->Acquire(2, Waiting()));
  EXPECT_EQ(inner.fencing_token(), outer.fencing_token());
  EXPECT_EQ(inner.slots(), outer.slots());
  EXPECT_EQ(inner.hold().hold_count(), 2);
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, sem->Inspect());
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].hold_count, 2);
  EXPECT_OK(inner.Release());
  EXPECT_EQ(outer.state(), LockState::kHeld);
  EXPECT_CODE(contender->TryAcquire(2, WithLease(kLongLease)),
              kDeadlineExceeded);
  EXPECT_OK(outer.Release());
  ASSERT_OK_AND_ASSIGN(Permit freed,
                       contender->TryAcquire(3, WithLease(kLongLease)));
  EXPECT_OK(freed.Release());
}

TEST_P(Conformance, C22_ReentryAskingOtherPermitsIsRefused) {
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions options;
  options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  if (!Offered(*client, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto sem, SemaphoreOf(*client, 4));
  ASSERT_OK_AND_ASSIGN(Permit two, sem->Acquire(2, Waiting()));
  const int sent = faults->calls(FaultPlan::kAcquire);
  absl::StatusOr<Permit> one = sem->Acquire(1, Waiting());
  EXPECT_TRUE(IsPermitsMismatch(one.status())) << one.status();
  EXPECT_EQ(faults->calls(FaultPlan::kAcquire), sent)
      << "known here: no round trip";
  // The same owner token through another client: the backend refuses.
  ASSERT_OK_AND_ASSIGN(Permit shared, sem->Acquire(2, AsOwner("job-7")));
  ASSERT_OK_AND_ASSIGN(auto elsewhere, SemaphoreOf(*other, 4));
  absl::StatusOr<Permit> mismatch = elsewhere->Acquire(1, AsOwner("job-7"));
  EXPECT_TRUE(IsPermitsMismatch(mismatch.status())) << mismatch.status();
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, sem->Inspect());
  EXPECT_EQ(info.holders.size(), 2u);
  EXPECT_OK(shared.Release());
  EXPECT_OK(two.Release());
}

TEST_P(Conformance, C22_TimedOutWaiterLeavesNoPlaceBehind) {
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto waiter, NewClient());
  ASSERT_OK_AND_ASSIGN(auto newcomer, NewClient());
  if (!Offered(*holder, Primitive::kSemaphore)) return;
  ASSERT_OK_AND_ASSIGN(auto held, SemaphoreOf(*holder, 1));
  ASSERT_OK_AND_ASSIGN(auto waited, SemaphoreOf(*waiter, 1));
  ASSERT_OK_AND_ASSIGN(auto fresh, SemaphoreOf(*newcomer, 1));
  ASSERT_OK_AND_ASSIGN(Permit permit, held->Acquire(1, Waiting()));

  absl::StatusOr<Permit> timed_out =
      waited->Acquire(1, Waiting(absl::Milliseconds(300)));
  EXPECT_TRUE(IsWaitExpired(timed_out.status())) << timed_out.status();
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, held->Inspect());
  EXPECT_FALSE(info.waiter.has_value()) << "a timed-out waiter kept a place";

  CancelToken cancel;
  std::thread canceller = CancelAfter(cancel, kLetWaiterBlock);
  AcquireOptions cancelled = Waiting();
  cancelled.cancel = cancel;
  EXPECT_CODE(waited->Acquire(1, cancelled), kCancelled);
  canceller.join();
  ASSERT_OK_AND_ASSIGN(info, held->Inspect());
  EXPECT_FALSE(info.waiter.has_value()) << "a cancelled waiter kept a place";

  EXPECT_OK(permit.Release());
  // Nothing left behind: a newcomer's one try gets the freed permit.
  ASSERT_OK_AND_ASSIGN(Permit next,
                       fresh->TryAcquire(1, WithLease(kLongLease)));
  EXPECT_OK(next.Release());
}

}  // namespace
}  // namespace dlock::test
